"""Which validated range IDs to keep: those of retained heads, found by diffing trees.

A mirror's set of validated range IDs would grow forever; it only needs the ranges of the trees
a validation may lean on: the heads the mirror moved to and the few before them. Heads form
*chains*: validating tree H against base B (the branch's mirror head) moves B's chain to H.
Each chain keeps its ``heads_kept`` newest heads (its *window*), and a range stays while some
chain *holds* it. Every step costs what the advance changed, never a scan of the repository:

- advancing a chain from B to H holds the ranges H added and writes the ranges it removed to a
  *death list* stamped with H's sequence number;
- once the window's oldest head is newer than a death list, no head in the window can hold those
  ranges unless they came back (a hold records the sequence of its latest entry): they are
  released, and a range no chain holds leaves the validated set;
- a tree validated without a usable base (a new branch, a tag, or B no longer a chain's head
  because another branch moved off it first) starts a chain holding all of its ranges.

Several replicas may work at once, so all state lives in the KV: a chain moves by
compare-and-swap, a hold is released only if it did not change meanwhile, and a range removed
from the set is written back if a hold appeared while it was removed.

Keys under the retention prefix ``Q``:

- ``Q c/<chain>`` → the chain: its head, last sequence number and window (JSON);
- ``Q m/<metarange_id>`` → the chain whose head that tree is;
- ``Q h/<range_id>/<chain>`` → the sequence number at which the chain last took the range;
- ``Q d/<chain>/<sequence>`` → the ranges the advance to that sequence removed (JSON).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["Chain", "RangeRetention"]

_SEQ_DIGITS = 12


@dataclass(frozen=True, slots=True)
class Chain:
    """A chain of advances: its head, last sequence number, kept heads and last move.

    Attributes:
        id: The chain's key.
        head: The tree of its newest head.
        seq: The sequence number of its newest head.
        window: ``(sequence, tree)`` of the heads it keeps, oldest first.
        moved_at: When it last moved (seconds since the epoch).
    """

    id: str
    head: str
    seq: int
    window: list[tuple[int, str]]
    moved_at: float

    def dump(self) -> bytes:
        """Return the record stored in the KV (without the ID, which is its key)."""
        return json.dumps(
            {
                "head": self.head,
                "seq": self.seq,
                "window": [list(w) for w in self.window],
                "moved_at": self.moved_at,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def load(cls, chain_id: str, raw: bytes) -> Chain:
        """Return the chain ``chain_id`` stored as ``raw``."""
        data = json.loads(raw)
        window = [(int(s), str(m)) for s, m in data["window"]]
        return cls(chain_id, data["head"], int(data["seq"]), window, float(data["moved_at"]))


class RangeRetention:
    """The holds of a mirror's chains of retained heads on validated ranges, in a KV.

    Args:
        kv: Where the state lives (shared by the replicas of the replicant).
        prefix: The key prefix of this mirror's retention state.
        heads_kept: Heads each chain keeps: its head and the ``heads_kept - 1`` before it.
        add: Writes range IDs back to the validated set.
        drop: Removes one range ID from the validated set.
    """

    def __init__(
        self,
        kv: KV,
        prefix: bytes,
        heads_kept: int,
        *,
        add: Callable[[Iterable[str]], None],
        drop: Callable[[str], None],
    ) -> None:
        if heads_kept < 1:
            raise ValueError(f"heads_kept must be positive, got {heads_kept}")
        self._kv = kv
        self._prefix = prefix
        self._kept = heads_kept
        self._add = add
        self._drop = drop

    @property
    def heads_kept(self) -> int:
        """Return how many heads each chain keeps."""
        return self._kept

    # keys

    def _chain_key(self, chain: str) -> bytes:
        return self._prefix + b"c/" + chain.encode()

    def _head_key(self, metarange_id: str) -> bytes:
        return self._prefix + b"m/" + metarange_id.encode()

    def _holds_prefix(self, range_id: str) -> bytes:
        return self._prefix + b"h/" + range_id.encode() + b"/"

    def _hold_key(self, range_id: str, chain: str) -> bytes:
        return self._holds_prefix(range_id) + chain.encode()

    def _deaths_prefix(self, chain: str) -> bytes:
        return self._prefix + b"d/" + chain.encode() + b"/"

    def _get(self, key: bytes) -> bytes | None:
        try:
            return self._kv.get(key)
        except KeyNotFoundError:
            return None

    # recording an advance

    def record(
        self, metarange_id: str, base_metarange_id: str, ids: Iterable[str], base_ids: Iterable[str]
    ) -> str | None:
        """Record that tree ``metarange_id`` (ranges ``ids``) validated against its base.

        Returns:
            The chain whose head it now is, or ``None`` when it is the head of one already.
        """
        tree = set(ids)
        if base_metarange_id and base_metarange_id != metarange_id:
            chain = self._advance(metarange_id, base_metarange_id, tree, set(base_ids))
            if chain is not None:
                return chain
        if self._is_head(metarange_id):
            return None  # another branch or a tag sits on this tree: its chain holds the ranges
        return self._start(metarange_id, tree)

    def _is_head(self, metarange_id: str) -> bool:
        chain_id = self._get(self._head_key(metarange_id))
        if chain_id is None:
            return False
        raw = self._get(self._chain_key(chain_id.decode()))
        return raw is not None and Chain.load("", raw).head == metarange_id

    def _advance(self, mid: str, base: str, tree: set[str], base_tree: set[str]) -> str | None:
        """Move the chain whose head is ``base`` to ``mid``; ``None`` if none has that head."""
        raw_chain_id = self._get(self._head_key(base))
        if raw_chain_id is None:
            return None
        chain_id = raw_chain_id.decode()
        raw = self._get(self._chain_key(chain_id))
        if raw is None:
            return None
        chain = Chain.load(chain_id, raw)
        if chain.head != base:
            return None
        seq = chain.seq + 1
        window = [*chain.window, (seq, mid)][-self._kept :]
        try:
            new = Chain(chain_id, mid, seq, window, time.time())
            self._kv.set_if(self._chain_key(chain_id), new.dump(), raw)
        except KVPreconditionFailedError:
            return None  # another branch moved off base first: this one starts its own chain
        added = tree - base_tree
        removed = sorted(base_tree - tree)
        stamp = str(seq).encode()
        self._kv.set_many((self._hold_key(r, chain_id), stamp) for r in sorted(added))
        if removed:
            self._kv.set(self._death_key(chain_id, seq), json.dumps(removed).encode())
        self._kv.set(self._head_key(mid), chain_id.encode())
        try:
            self._kv.delete_if(self._head_key(base), raw_chain_id)
        except KVPreconditionFailedError:
            pass  # another chain started on base meanwhile: its pointer stays
        # a prune may have dropped one of them between its validation and its hold
        self._add(added)
        return chain_id

    def _start(self, mid: str, tree: set[str]) -> str:
        """Start a chain at ``mid`` holding every range of it."""
        chain_id = uuid.uuid4().hex
        self._kv.set_many((self._hold_key(r, chain_id), b"1") for r in sorted(tree))
        chain = Chain(chain_id, mid, 1, [(1, mid)], time.time())
        self._kv.set_if(self._chain_key(chain_id), chain.dump(), None)
        self._kv.set(self._head_key(mid), chain_id.encode())
        self._add(tree)
        return chain_id

    def _death_key(self, chain: str, seq: int) -> bytes:
        return self._deaths_prefix(chain) + str(seq).zfill(_SEQ_DIGITS).encode()

    # pruning

    def prune(self, chain_id: str) -> int:
        """Release the ranges the heads leaving ``chain_id``'s window were the last to hold.

        Returns:
            How many range IDs left the validated set.
        """
        raw = self._get(self._chain_key(chain_id))
        if raw is None:
            return 0
        oldest = Chain.load(chain_id, raw).window[0][0]
        dropped = 0
        prefix = self._deaths_prefix(chain_id)
        for key, value in list(self._kv.scan(prefix)):
            seq = int(key[len(prefix) :])
            if seq > oldest:
                break  # the oldest head kept still holds what this advance removed
            for range_id in json.loads(value):
                dropped += self._release(range_id, chain_id, seq)
            self._kv.delete(key)
        return dropped

    def _release(self, range_id: str, chain_id: str, seq: int) -> int:
        """Release the chain's hold on a range removed at ``seq``; drop it if none holds it.

        The ID leaves the set before the hold goes, so that a prune stopped half-way leaves the
        hold and its death list to the next prune rather than an ID nothing will release.
        """
        key = self._hold_key(range_id, chain_id)
        held = self._get(key)
        if held is not None and int(held) >= seq:
            return 0  # the range came back after it was removed
        if not self._held_besides(range_id, key):
            self._drop(range_id)
            # a chain that takes a range writes it back after its hold; one that did so
            # before the drop shows here
            if self._held_besides(range_id, key) or self._get(key) != held:
                self._add([range_id])
                return 0
            dropped = 1
        else:
            dropped = 0
        if held is not None:
            try:
                self._kv.delete_if(key, held)
            except KVPreconditionFailedError:
                self._add([range_id])  # taken again by this chain meanwhile
                return 0
        return dropped

    def _held_besides(self, range_id: str, key: bytes) -> bool:
        return any(k != key for k, _ in self._kv.scan(self._holds_prefix(range_id)))

    # ending chains

    def chains(self) -> list[Chain]:
        """Return every chain of the mirror."""
        cut = len(self._prefix + b"c/")
        return [Chain.load(k[cut:].decode(), raw) for k, raw in self._kv.scan(self._prefix + b"c/")]

    def end(self, chain: Chain, ids: Iterable[str]) -> int:
        """End ``chain``, unless it moved since it was read; release the ranges it held.

        Args:
            chain: The chain as :meth:`chains` returned it.
            ids: The ranges of every tree of its window.

        Returns:
            How many range IDs left the validated set.
        """
        key = self._chain_key(chain.id)
        try:
            self._kv.delete_if(key, chain.dump())
        except KVPreconditionFailedError:
            return 0  # it moved (or ended) meanwhile: its branch is alive
        try:
            self._kv.delete_if(self._head_key(chain.head), chain.id.encode())
        except KVPreconditionFailedError:
            pass  # another chain sits on that tree now
        held = set(ids)
        deaths = list(self._kv.scan(self._deaths_prefix(chain.id)))
        for _, value in deaths:
            held.update(json.loads(value))  # removed, but held until their death list is pruned
        ended = chain.seq + 1  # after every entry: each hold of the chain is released
        dropped = sum(self._release(r, chain.id, ended) for r in sorted(held))
        for death_key, _ in deaths:
            self._kv.delete(death_key)
        return dropped

    # inspection

    def retained_heads(self) -> list[str]:
        """Return the trees of every chain's window (what the validated set is bounded by)."""
        heads: list[str] = []
        for chain in self.chains():
            heads.extend(m for _, m in chain.window)
        return heads

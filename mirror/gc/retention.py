"""Which commits garbage collection retains: lakeFS's rules, over first-parent history.

lakeFS's semantics (pkg/graveler/retention/active_commits.go):

- Walks start from every branch head and from every *dangling* commit, one that is no
  commit's first parent (the head of a deleted branch, say, or a commit whose branch moved
  away by a hard reset).
- A branch head is always retained. A branch walk uses ``T = now - days * 86400``, its days
  being the branch's rule, else the default.
- Each walk follows first parents; a parent is retained when its child was created after
  ``T``. So a branch keeps every commit made inside its window, and the newest one before it.
- A dangling commit is walked as if a child created at its own time pointed at it, with the
  default window: it is retained only if it was made inside that window, and the walk goes on
  from it in the same way.
- Where walks meet, the longest retention wins.

The result is the union of what each walk retains on its own, whatever order they run in. A walk
stops where a walk of at least as long a retention has been before: from there on, that walk
retains a superset. (lakeFS's code stops one step earlier, before deciding on the meeting commit
itself, which can expire the newest commit before a branch's window when a longer walk reached
it from another child; LakeMirror keeps it.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from mirror.core.ids import BranchID, CommitID, MetaRangeID
from mirror.core.model import Commit
from mirror.gc.rules import GCRules

__all__ = ["DAY", "CommitNode", "dangling_commits", "retained_commits"]

DAY = 86_400
"""Seconds in a day of retention."""


@dataclass(frozen=True, slots=True)
class CommitNode:
    """What retention needs of a commit: its time, its first parent and its tree."""

    creation_date: int
    first_parent: CommitID | None
    metarange_id: MetaRangeID

    @classmethod
    def of(cls, commit: Commit) -> CommitNode:
        """Return the node of ``commit``."""
        parent = commit.parents[0] if commit.parents else None
        return cls(commit.creation_date, parent, commit.metarange_id)


def dangling_commits(commits: Mapping[CommitID, CommitNode]) -> set[CommitID]:
    """Return the commits that are no commit's first parent."""
    parents = {n.first_parent for n in commits.values() if n.first_parent is not None}
    return {c for c in commits if c not in parents}


def retained_commits(
    commits: Mapping[CommitID, CommitNode],
    heads: Iterable[tuple[BranchID, CommitID]],
    rules: GCRules,
    now: int,
    lookup: Callable[[CommitID], CommitNode] | None = None,
) -> set[CommitID]:
    """Return the commits that ``rules`` retain at time ``now`` (seconds).

    Args:
        commits: Every commit of the repository, read before ``heads``.
        heads: ``(branch, head commit)`` of every branch.
        rules: The repository's rules.
        now: The time the windows end at, in seconds.
        lookup: Returns a commit missing from ``commits`` (one made after they were read);
            without it, a missing commit raises ``KeyError``.
    """
    nodes = dict(commits)

    def node(cid: CommitID) -> CommitNode:
        found = nodes.get(cid)
        if found is None:
            if lookup is None:
                raise KeyError(cid)
            found = nodes[cid] = lookup(cid)
        return found

    retained: set[CommitID] = set()
    # the earliest threshold each commit was walked from with: a later walk from there with a
    # threshold no earlier would retain nothing more
    walked: dict[CommitID, int] = {}

    def walk(child_time: int, start: CommitID, threshold: int) -> None:
        cid: CommitID | None = start
        while cid is not None:
            if child_time > threshold:
                retained.add(cid)
            before = walked.get(cid)
            if before is not None and before <= threshold:
                return
            walked[cid] = threshold
            current = node(cid)
            child_time, cid = current.creation_date, current.first_parent

    head_list = list(heads)
    head_ids = {cid for _, cid in head_list}
    for branch, cid in head_list:
        retained.add(cid)
        current = node(cid)
        threshold = now - rules.retention_days(branch) * DAY
        if current.first_parent is not None:
            walk(current.creation_date, current.first_parent, threshold)
        # the head itself is walked with its branch's threshold, so that dangling walks
        # (shorter or not) stop at it like at any commit walked before
        before = walked.get(cid)
        if before is None or threshold < before:
            walked[cid] = threshold
    default_threshold = now - rules.default_retention_days * DAY
    for cid in sorted(dangling_commits(nodes) - head_ids):
        walk(node(cid).creation_date, cid, default_threshold)
    return retained

"""Garbage collection rules of a repository: lakeFS's body, and where the rules are kept.

A repository's rules say for how many days each branch keeps the commits it moved past
(``default_retention_days`` for branches without a rule of their own). lakeFS validates nothing
in them; LakeMirror refuses only what cannot mean anything: missing keys, wrong types, negative or
fractional day counts, empty branch names. Rules for branches that do not exist (yet) are kept,
as in lakeFS, and a branch named twice keeps its last rule.

The rules live in the KV, under ``gc/rules/<repo>:<instance>``: every server replica of a region
reads the same rules at once, and a mirror, whose KV is its own region's, never sees the
source's rules (a mirror has none: it runs no garbage collection). lakeFS keeps them in the
storage namespace instead, where S3 Replication would copy the source's rules into a mirror's
bucket.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mirror.core.deletion import CleanupRegistry
from mirror.core.ids import BranchID
from mirror.core.model import Repository, decode_json, encode_json
from mirror.gc.errors import GCRulesNotFoundError, InvalidGCRulesError
from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = ["MAX_RETENTION_DAYS", "GCRules", "GCRulesStore", "register_gc_rules_cleanup"]

MAX_RETENTION_DAYS = 2**31 - 1
"""The largest day count lakeFS's rules hold (a 32-bit integer)."""


def _days(value: object, where: str) -> int:
    # JSON true/false are ints in Python; a count of days is never a boolean
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidGCRulesError(f"{where}: expected a whole number of days, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise InvalidGCRulesError(f"{where}: expected a whole number of days, got {value!r}")
        value = int(value)
    if not 0 <= value <= MAX_RETENTION_DAYS:
        raise InvalidGCRulesError(
            f"{where}: {value} days is out of range (0 to {MAX_RETENTION_DAYS})"
        )
    return value


@dataclass(frozen=True, slots=True)
class GCRules:
    """How long each branch retains the commits it moved past.

    Attributes:
        default_retention_days: Days for branches without a rule, and for dangling commits.
        branches: ``(branch, days)`` rules, sorted by branch name, each branch once.
    """

    default_retention_days: int
    branches: tuple[tuple[BranchID, int], ...] = ()

    @classmethod
    def of(cls, default_retention_days: int, branches: Mapping[str, int] | None = None) -> GCRules:
        """Return rules with ``branches`` given as a mapping of branch name to days.

        Raises:
            InvalidGCRulesError: a count of days is negative or too large, or a name is empty.
        """
        body = {
            "default_retention_days": default_retention_days,
            "branches": [
                {"branch_id": b, "retention_days": d} for b, d in (branches or {}).items()
            ],
        }
        return cls.from_lakefs(body)

    def retention_days(self, branch: str) -> int:
        """Return the days ``branch`` retains: its own rule, else the default."""
        for name, days in self.branches:
            if name == branch:
                return days
        return self.default_retention_days

    def branch_days(self) -> dict[BranchID, int]:
        """Return the branch rules as a mapping."""
        return dict(self.branches)

    def to_lakefs(self) -> dict[str, Any]:
        """Return lakeFS's body: ``branches`` is a list, ``[]`` when empty (never ``null``)."""
        return {
            "default_retention_days": self.default_retention_days,
            "branches": [{"branch_id": b, "retention_days": d} for b, d in self.branches],
        }

    @classmethod
    def from_lakefs(cls, body: object) -> GCRules:
        """Parse lakeFS's body ``{"default_retention_days": N, "branches": [...]}``.

        Both keys are required; unknown keys are ignored. ``branches`` may be ``null`` (lakeFS
        itself sends that for no branch rules).

        Raises:
            InvalidGCRulesError: the body is malformed; the message names the field.
        """
        if not isinstance(body, Mapping):
            raise InvalidGCRulesError(
                "garbage collection rules: expected a JSON object with default_retention_days "
                "and branches"
            )
        missing = [k for k in ("default_retention_days", "branches") if k not in body]
        if missing:
            raise InvalidGCRulesError(
                f"garbage collection rules: missing {' and '.join(missing)} (both are required)"
            )
        default = _days(body["default_retention_days"], "default_retention_days")
        raw = body["branches"]
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise InvalidGCRulesError(f"branches: expected a list of rules, got {raw!r}")
        rules: dict[BranchID, int] = {}
        for i, rule in enumerate(raw):
            where = f"branches[{i}]"
            if not isinstance(rule, Mapping):
                raise InvalidGCRulesError(
                    f"{where}: expected an object with branch_id and retention_days"
                )
            if "branch_id" not in rule or "retention_days" not in rule:
                raise InvalidGCRulesError(
                    f"{where}: branch_id and retention_days are both required"
                )
            branch = rule["branch_id"]
            if not isinstance(branch, str) or not branch:
                raise InvalidGCRulesError(
                    f"{where}.branch_id: expected a branch name, got {branch!r}"
                )
            rules[BranchID(branch)] = _days(rule["retention_days"], f"{where}.retention_days")
        return cls(default, tuple(sorted(rules.items())))

    def encode(self) -> bytes:
        """Return the KV encoding of the rules."""
        return encode_json(self.to_lakefs())

    @classmethod
    def decode(cls, data: bytes) -> GCRules:
        """Decode rules written by :meth:`encode`."""
        return cls.from_lakefs(decode_json(data))


class GCRulesStore:
    """The rules of every repository, one KV record each.

    The key holds the repository's instance ID, so a repository re-created under the same name
    never inherits the rules of its predecessor.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    @staticmethod
    def _key(repo: Repository) -> bytes:
        return f"gc/rules/{repo.id}:{repo.instance_uid}".encode()

    def get(self, repo: Repository) -> GCRules:
        """Return the rules of ``repo``.

        Raises:
            GCRulesNotFoundError: the repository has no rules.
        """
        try:
            return GCRules.decode(self.kv.get(self._key(repo)))
        except KeyNotFoundError as exc:
            raise GCRulesNotFoundError(repo.id) from exc

    def find(self, repo: Repository) -> GCRules | None:
        """Return the rules of ``repo``, or ``None`` when it has none."""
        try:
            return self.get(repo)
        except GCRulesNotFoundError:
            return None

    def set(self, repo: Repository, rules: GCRules) -> None:
        """Replace the rules of ``repo``."""
        self.kv.set(self._key(repo), rules.encode())

    def delete(self, repo: Repository) -> None:
        """Remove the rules of ``repo``; removing none is not an error (as in lakeFS)."""
        self.kv.delete(self._key(repo))


def register_gc_rules_cleanup(registry: CleanupRegistry, kv: KV) -> None:
    """Have deleted repositories' garbage collection rules removed with them."""
    registry.add_repository_cleanup("gc rules", GCRulesStore(kv).delete)

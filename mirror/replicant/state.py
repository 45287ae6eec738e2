"""What a replicant keeps in its region's KV: mirror configurations, branch status and leases.

Everything lives under the ``replicant/`` prefix of the region's KV, so replicas of the replicant
share it and a restarted replica resumes from it:

- ``replicant/mirrors/<name>`` → the mirror's configuration (JSON);
- ``replicant/status/<name>/<branch>`` → the last status of a mirrored branch (JSON);
- ``replicant/leases/<name>`` → which replica works the mirror, until when (JSON);
- ``replicant/ranges/<name>/<range_id>`` → ranges validated complete in the mirror's namespace;
- ``replicant/range-retention/<name>/`` → which retained heads hold those ranges
  (:class:`~mirror.validator.retention.RangeRetention`);
- ``replicant/preserved/<name>`` → the branches adopting repository ``name`` preserved (JSON);
- ``replicant/lag-history/<name>/<branch>/<slot>`` → the branch's lag of the last hour
  (:mod:`~mirror.replicant.lag_history`);
- ``replicant/promotions/<name>`` → the report of the newest promotion of mirror ``name`` (JSON),
  kept after the mirror's configuration is removed.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from mirror.errors import AlreadyExistsError, NotFoundError
from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError
from mirror.replicant.lag_history import history_prefix

__all__ = [
    "BranchState",
    "BranchStatus",
    "Lag",
    "Lease",
    "MirrorConfig",
    "MirrorExistsError",
    "MirrorNotFoundError",
    "ReplicantStore",
]

BranchState = Literal["synced", "waiting", "validating", "error"]
_ROOT = b"replicant/"


class MirrorNotFoundError(NotFoundError):
    """No mirror of that name is configured."""


class MirrorExistsError(AlreadyExistsError):
    """A mirror of that name is configured already."""


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    """One mirror: a source repository of another region copied into a local repository."""

    name: str
    """The mirror repository's name in this region."""
    source_region: str
    source_repo: str
    region: str
    """The region the mirror lives in (the replicant's own)."""
    storage_namespace: str
    """Where object-store replication delivers the source namespace's files in this region."""
    branches: tuple[str, ...] = ("*",)
    """Glob patterns of the source branches to mirror."""
    tags: bool = True
    created: int = 0
    adopted: bool = False
    """The mirror repository existed before the mirror (it was a source, now following another)."""
    preserved: tuple[str, ...] = ()
    """Branches holding commits the repository had and its source lacked; never deleted."""
    preserved_tags: tuple[str, ...] = ()
    """Copies of tags of such commits (``preserved-<tag>-<UTC>``); never deleted."""

    def mirrors_branch(self, branch: str) -> bool:
        """Return whether ``branch`` matches one of the mirror's branch patterns."""
        return any(fnmatch.fnmatchcase(branch, p) for p in self.branches)

    def to_json(self) -> dict[str, Any]:
        """Return the configuration as plain data (the API's and the KV's form)."""
        data = asdict(self)
        data["branches"] = list(self.branches)
        data["preserved"] = list(self.preserved)
        data["preserved_tags"] = list(self.preserved_tags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MirrorConfig:
        """Return the configuration stored as ``data``."""
        return cls(
            name=data["name"],
            source_region=data["source_region"],
            source_repo=data["source_repo"],
            region=data["region"],
            storage_namespace=data["storage_namespace"],
            branches=tuple(data.get("branches") or ("*",)),
            tags=bool(data.get("tags", True)),
            created=int(data.get("created", 0)),
            adopted=bool(data.get("adopted", False)),
            preserved=tuple(data.get("preserved") or ()),
            preserved_tags=tuple(data.get("preserved_tags") or ()),
        )


@dataclass(frozen=True, slots=True)
class Lag:
    """How many source commits a mirror branch does not show: a count, or a lower bound."""

    commits: int
    exact: bool = True
    """``False`` while the commits behind the source head are not all known (their records
    were not read yet): the branch is then *at least* ``commits`` behind."""


@dataclass(slots=True)
class BranchStatus:
    """Where mirroring of one branch stands."""

    branch: str
    state: BranchState = "waiting"
    source_head: str | None = None
    mirror_head: str | None = None
    lag_seconds: float = 0.0
    lag_commits: int | None = 0
    """The source commits the mirror branch does not show; ``None`` when only a lower bound is
    known (``lag_commits_at_least``)."""
    missing_objects: int = 0
    missing_sample: list[str] = field(default_factory=list)
    last_error: str | None = None
    last_advance: float | None = None
    behind_since: int | None = None
    """Creation date of the oldest source commit the mirror branch does not show yet."""
    updated: float = 0.0
    lag_commits_at_least: int | None = None
    """A lower bound of ``lag_commits`` while that is unknown, else ``None``."""

    @property
    def lag(self) -> Lag:
        """Return the commits behind: the count, or the lower bound while it is unknown."""
        if self.lag_commits is not None:
            return Lag(self.lag_commits)
        return Lag(self.lag_commits_at_least or 0, exact=False)

    def set_lag(self, lag: Lag) -> None:
        """Record the commits behind, in the field that says whether it is a count or a bound."""
        self.lag_commits = lag.commits if lag.exact else None
        self.lag_commits_at_least = None if lag.exact else lag.commits

    def to_json(self) -> dict[str, Any]:
        """Return the status as plain data."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BranchStatus:
        """Return the status stored as ``data``."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True, slots=True)
class Lease:
    """A replica's claim on a mirror until ``expires`` (seconds since the epoch)."""

    owner: str
    expires: float


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _load(raw: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw)
    return data


class ReplicantStore:
    """The replicant's records in the region's KV (see the module docstring for the layout)."""

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    @staticmethod
    def _mirror_key(name: str) -> bytes:
        return _ROOT + b"mirrors/" + name.encode()

    @staticmethod
    def ranges_prefix(name: str) -> bytes:
        """Return the key prefix of the ranges validated for mirror ``name``."""
        return _ROOT + b"ranges/" + name.encode() + b"/"

    @staticmethod
    def range_retention_prefix(name: str) -> bytes:
        """Return the key prefix of what bounds the validated ranges of mirror ``name``."""
        return _ROOT + b"range-retention/" + name.encode() + b"/"

    # mirrors

    def add_mirror(self, config: MirrorConfig) -> None:
        """Record a new mirror.

        Raises:
            MirrorExistsError: a mirror of that name exists.
        """
        try:
            self.kv.set_if(self._mirror_key(config.name), _dump(config.to_json()), None)
        except KVPreconditionFailedError as exc:
            raise MirrorExistsError(f"mirror {config.name!r} already exists") from exc

    def get_mirror(self, name: str) -> MirrorConfig:
        """Return a mirror's configuration.

        Raises:
            MirrorNotFoundError: no such mirror.
        """
        try:
            return MirrorConfig.from_json(_load(self.kv.get(self._mirror_key(name))))
        except KeyNotFoundError as exc:
            raise MirrorNotFoundError(f"mirror {name!r} not found") from exc

    def list_mirrors(self) -> Iterator[MirrorConfig]:
        """Yield every mirror in name order."""
        for _, raw in self.kv.scan(_ROOT + b"mirrors/"):
            yield MirrorConfig.from_json(_load(raw))

    def delete_mirror(self, name: str) -> None:
        """Forget a mirror, its status, lease and range cache.

        Raises:
            MirrorNotFoundError: no such mirror.
        """
        self.get_mirror(name)
        self.kv.delete(self._mirror_key(name))
        for prefix in (
            _ROOT + b"status/" + name.encode() + b"/",
            self.ranges_prefix(name),
            self.range_retention_prefix(name),
            history_prefix(name),
        ):
            for key, _ in list(self.kv.scan(prefix)):
                self.kv.delete(key)
        self.kv.delete(_ROOT + b"leases/" + name.encode())
        self.kv.delete(_ROOT + b"preserved/" + name.encode())

    # fail-back

    def put_preserved(self, name: str, branches: list[dict[str, Any]]) -> None:
        """Keep the report of the branches preserved when mirror ``name`` adopted its repository."""
        self.kv.set(_ROOT + b"preserved/" + name.encode(), json.dumps(branches).encode())

    def get_preserved(self, name: str) -> list[dict[str, Any]]:
        """Return the branches preserved when mirror ``name`` adopted its repository."""
        try:
            found: list[dict[str, Any]] = json.loads(
                self.kv.get(_ROOT + b"preserved/" + name.encode())
            )
        except KeyNotFoundError:
            return []
        return found

    # promotions

    @staticmethod
    def _promotion_key(name: str) -> bytes:
        return _ROOT + b"promotions/" + name.encode()

    def put_promotion(self, name: str, report: dict[str, Any]) -> None:
        """Keep the report of mirror ``name``'s promotion (replacing an older one)."""
        self.kv.set(self._promotion_key(name), _dump(report))

    def get_promotion(self, name: str) -> dict[str, Any] | None:
        """Return the report of mirror ``name``'s newest promotion, or ``None``."""
        try:
            return _load(self.kv.get(self._promotion_key(name)))
        except KeyNotFoundError:
            return None

    # status

    def put_status(self, name: str, status: BranchStatus) -> None:
        """Store the status of one mirrored branch."""
        key = _ROOT + b"status/" + name.encode() + b"/" + status.branch.encode()
        self.kv.set(key, _dump(status.to_json()))

    def drop_status(self, name: str, branch: str) -> None:
        """Forget the status of a branch that is no longer mirrored."""
        self.kv.delete(_ROOT + b"status/" + name.encode() + b"/" + branch.encode())

    def list_status(self, name: str) -> list[BranchStatus]:
        """Return the stored status of every branch of a mirror."""
        prefix = _ROOT + b"status/" + name.encode() + b"/"
        return [BranchStatus.from_json(_load(raw)) for _, raw in self.kv.scan(prefix)]

    # leases

    def get_lease(self, name: str) -> Lease | None:
        """Return the current lease on a mirror, or ``None``."""
        try:
            data = _load(self.kv.get(_ROOT + b"leases/" + name.encode()))
        except KeyNotFoundError:
            return None
        return Lease(str(data["owner"]), float(data["expires"]))

    def try_lease(self, name: str, owner: str, seconds: float, now: float) -> bool:
        """Take or renew the lease on a mirror for ``seconds``; return whether ``owner`` holds it.

        A lease held by another replica is taken over only once it has expired. Two replicas
        racing for it are ordered by the KV's compare-and-swap: exactly one wins.
        """
        key = _ROOT + b"leases/" + name.encode()
        try:
            raw: bytes | None = self.kv.get(key)
        except KeyNotFoundError:
            raw = None
        if raw is not None:
            current = _load(raw)
            if current["owner"] != owner and float(current["expires"]) > now:
                return False
        try:
            self.kv.set_if(key, _dump({"owner": owner, "expires": now + seconds}), raw)
        except KVPreconditionFailedError:
            return False
        return True

    def release_lease(self, name: str, owner: str) -> None:
        """Give a lease up if ``owner`` holds it."""
        key = _ROOT + b"leases/" + name.encode()
        try:
            raw = self.kv.get(key)
        except KeyNotFoundError:
            return
        if _load(raw)["owner"] == owner:
            try:
                self.kv.delete_if(key, raw)
            except KVPreconditionFailedError:
                return

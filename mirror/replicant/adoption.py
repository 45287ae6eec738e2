"""Adoption: make an existing repository of this region a mirror of another region's repository.

This is how mirroring is reversed after a promotion (fail-back): the old source, which may have
accepted commits its mirror never saw, becomes a mirror of the promoted repository. Every
mirrored branch is checked first: its local head must be the new source's head or one of its
ancestors. A branch whose head is not has **diverged**: the commits the new source lacks would be
lost when the mirror moves the branch to the source's head. Adoption refuses it, naming the branch
and the first commit that differs, unless asked to preserve: then each diverged head is kept on a
new branch ``preserved-<branch>-<UTC yyyymmddThhmmss>`` (which the mirror never deletes), and the
report lists those branches, their commits and how many paths they changed. A tag naming one of
those commits is copied the same way (``preserved-<tag>-<UTC>``), since the mirror deletes tags
its source lacks.

Then the repository is demoted (read-only, ``mirror_of`` the new source) and mirrored; the worker
starts from the commits the repository has, copying only what it lacks.
"""

from __future__ import annotations

import heapq
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from mirror.core.validate import validate_repository_id
from mirror.errors import AlreadyExistsError, ConflictError, InvalidValueError, NotFoundError
from mirror.logging import get_logger
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.host import ReplicantHost
from mirror.replicant.mirror_request import MirrorRequest
from mirror.replicant.state import (
    MirrorConfig,
    MirrorExistsError,
    MirrorNotFoundError,
)
from mirror.replicant.worker import parents_first

__all__ = ["AdoptionHost", "DivergedError", "PreservedBranch", "adopt", "preserved_name"]

PRESERVED_PREFIX = "preserved-"
_ANCESTRY_LIMIT = 100_000
_log = get_logger("mirror.replicant")


class AdoptionHost(ReplicantHost, Protocol):
    """What an adoption uses of its region's replicant: a host that checks mirror requests."""

    def check_region(self, request: MirrorRequest) -> None:
        """Check that ``request`` mirrors into the replicant's region, with sane branch patterns."""
        ...

    async def open_namespace(self, namespace: str) -> None:
        """Check that the validator can read ``namespace``."""
        ...

    async def find_source(
        self, source_repo: str, source_region: str | None
    ) -> tuple[str, dict[str, object]]:
        """Return the region holding ``source_repo`` (the named one, or the only one) and it."""
        ...

    async def rebalance(self) -> None:
        """Renew or take leases; start workers for mirrors held."""
        ...


class DivergedError(ConflictError):
    """A branch of the repository to adopt holds commits the new source lacks."""


@dataclass(frozen=True, slots=True)
class PreservedBranch:
    """A diverged branch's head, kept on a branch of its own before the repository is mirrored."""

    branch: str
    """The new branch (``preserved-<from_branch>-<UTC timestamp>``)."""
    from_branch: str
    head: str
    commits: list[str]
    """The commits the new source lacks, parents first."""
    paths: int
    """Paths those commits changed (the files the new source needs to take them)."""

    def to_json(self) -> dict[str, Any]:
        """Return the record as plain data."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Divergence:
    branch: str
    local_head: str
    source_head: str | None
    first: str
    """The first commit of the branch's history the source lacks (the head if none is)."""
    fork: str | None
    """The newest commit of the branch's first-parent history that the source has."""
    commits: list[RemoteCommit]


def preserved_name(branch: str, at: float) -> str:
    """Return the name of the branch preserving ``branch``'s head at ``at`` (epoch seconds)."""
    stamp = datetime.fromtimestamp(at, UTC).strftime("%Y%m%dT%H%M%S")
    return f"{PRESERVED_PREFIX}{branch}-{stamp}"


class _History:
    """Commit records of one repository, read once each."""

    def __init__(self, client: LakeFSClient, repo: str) -> None:
        self.client = client
        self.repo = repo
        self._known: dict[str, RemoteCommit] = {}

    async def get(self, commit_id: str) -> RemoteCommit:
        found = self._known.get(commit_id)
        if found is None:
            found = await self.client.get_commit(self.repo, commit_id)
            self._known[commit_id] = found
        return found


async def _lacking(
    local: _History, source: _History, head: str, source_heads: list[str]
) -> dict[str, RemoteCommit]:
    """Return the commits reachable from local ``head`` but from none of ``source_heads``.

    Both histories are walked newest generation first (a commit's generation exceeds its
    parents'), the source's only down to the generation of the local commit being decided, so
    the walk stops at the fork instead of reading either whole history. A commit record the
    source holds but cannot reach (copied by a mirror, never advanced to) counts as lacking.
    """
    reachable: set[str] = set()
    frontier: list[tuple[int, str]] = []
    for cid in source_heads:
        heapq.heappush(frontier, (-(await source.get(cid)).generation, cid))
    todo: list[tuple[int, str]] = [(-(await local.get(head)).generation, head)]
    lacking: dict[str, RemoteCommit] = {}
    seen: set[str] = set()
    while todo and len(seen) < _ANCESTRY_LIMIT:
        _, cid = heapq.heappop(todo)
        if cid in seen:
            continue
        seen.add(cid)
        commit = await local.get(cid)
        while frontier and -frontier[0][0] >= commit.generation and cid not in reachable:
            _, sid = heapq.heappop(frontier)
            if sid in reachable:
                continue
            reachable.add(sid)
            for parent in (await source.get(sid)).parents:
                if parent not in reachable:
                    heapq.heappush(frontier, (-(await source.get(parent)).generation, parent))
        if cid in reachable:
            continue  # so are its ancestors
        lacking[cid] = commit
        for parent in commit.parents:
            heapq.heappush(todo, (-(await local.get(parent)).generation, parent))
    return lacking


async def _divergence(
    local: _History,
    source: _History,
    branch: str,
    local_head: str,
    source_head: str | None,
    source_heads: list[str],
) -> _Divergence | None:
    if local_head == source_head:
        return None
    # a branch the source lacks goes away with nothing lost if another source branch reaches it
    reference = [source_head] if source_head is not None else source_heads
    extra = await _lacking(local, source, local_head, reference)
    if not extra:
        return None
    first, fork = local_head, None
    walk: str | None = local_head
    while walk is not None:
        if walk not in extra:
            fork = walk
            break
        first = walk
        parents = extra[walk].parents
        walk = parents[0] if parents else None
    return _Divergence(branch, local_head, source_head, first, fork, parents_first(extra))


async def _check(
    service: AdoptionHost,
    config: MirrorConfig,
    local_heads: dict[str, str],
) -> list[_Divergence]:
    source = service.client(config.source_region)
    source_heads = await source.list_branches(config.source_repo)
    local = _History(service.local, config.name)
    remote = _History(source, config.source_repo)
    found: list[_Divergence] = []
    for branch, head in sorted(local_heads.items()):
        if not config.mirrors_branch(branch) or branch in config.preserved:
            continue
        diverged = await _divergence(
            local,
            remote,
            branch,
            head,
            source_heads.get(branch),
            sorted(set(source_heads.values())),
        )
        if diverged is not None:
            found.append(diverged)
    return found


def _refusal(config: MirrorConfig, diverged: list[_Divergence], *, demoted: bool) -> DivergedError:
    source = f"{config.source_region}/{config.source_repo}"
    parts = [
        f"branch {d.branch!r} diverged at commit {d.first} ({len(d.commits)} commit(s) not in "
        f"{source}; local head {d.local_head}, source head {d.source_head})"
        for d in diverged
    ]
    state = "it is now read-only" if demoted else "nothing was changed"
    return DivergedError(
        f"repository {config.name!r} is not a prefix of {source}: {'; '.join(parts)}; {state}; "
        "adopt with preserve_diverged to keep those commits on preserved branches"
    )


async def _new_branch(service: AdoptionHost, config: MirrorConfig, name: str, head: str) -> str:
    """Create branch ``name`` (or ``name-2``, ... if taken: a second pass in the same second)."""
    for attempt in range(1, 100):
        branch = name if attempt == 1 else f"{name}-{attempt}"
        try:
            await service.local.preserve_branch(config.name, branch, head, [])
        except AlreadyExistsError:
            continue
        return branch
    raise AlreadyExistsError(f"branches {name}, {name}-2, ... exist already")


async def _preserve(
    service: AdoptionHost, config: MirrorConfig, diverged: list[_Divergence]
) -> list[PreservedBranch]:
    kept: list[PreservedBranch] = []
    at = service.now()
    for d in diverged:
        branch = await _new_branch(service, config, preserved_name(d.branch, at), d.local_head)
        paths = (
            await service.local.count_diff(config.name, d.fork, d.local_head)
            if d.fork is not None
            else await service.local.count_objects(config.name, d.local_head)
        )
        kept.append(
            PreservedBranch(branch, d.branch, d.local_head, [c.id for c in d.commits], paths)
        )
        service.metrics.preserved_commits.labels(config.name).inc(len(d.commits))
        _log.warning(
            "diverged branch preserved",
            mirror=config.name,
            branch=d.branch,
            preserved=branch,
            head=d.local_head,
            commits=len(d.commits),
            paths=paths,
        )
    return kept


async def _keep_tags(
    service: AdoptionHost, config: MirrorConfig, diverged: list[_Divergence]
) -> tuple[str, ...]:
    """Copy the tags of preserved commits to ``preserved-<tag>-<UTC>``; return every kept tag.

    The mirror worker deletes (or moves) tags the source lacks; a tag naming a commit only a
    preserved branch holds would vanish with nothing to show it existed. Earlier copies
    (``preserved-*`` tags the source lacks) are kept too.
    """
    local_tags = await service.local.list_tags(config.name)
    source_tags = await service.client(config.source_region).list_tags(config.source_repo)
    lacking = {c.id for d in diverged for c in d.commits}
    kept = [t for t in local_tags if t.startswith(PRESERVED_PREFIX) and t not in source_tags]
    at = service.now()
    for tag, commit in sorted(local_tags.items()):
        if tag in kept or source_tags.get(tag) == commit or commit not in lacking:
            continue
        copy = preserved_name(tag, at)
        # the repository is read-only by now: tags are written through the mirror endpoint
        await service.local.set_tag(config.name, copy, commit)
        kept.append(copy)
        _log.warning("tag of a preserved commit kept", mirror=config.name, tag=tag, copy=copy)
    return tuple(sorted(kept))


async def adopt(
    service: AdoptionHost, source_repo: str, request: MirrorRequest
) -> tuple[MirrorConfig, list[PreservedBranch]]:
    """Mirror ``source_repo`` into the existing local repository ``request.name``.

    Returns:
        The mirror, and the branches that preserve diverged heads.

    Raises:
        NotFoundError: no local repository of that name, or no source repository.
        MirrorExistsError: the repository is mirrored already.
        InvalidValueError: the storage namespace given is not the repository's.
        DivergedError: a branch diverged and ``preserve_diverged`` is false.
    """
    validate_repository_id(request.name)
    validate_repository_id(source_repo)
    service.check_region(request)
    try:
        service.store.get_mirror(request.name)
    except MirrorNotFoundError:
        pass
    else:
        raise MirrorExistsError(f"mirror {request.name!r} already exists")
    local = service.local
    try:
        repo = await local.get_repository(request.name)
    except NotFoundError as exc:
        raise NotFoundError(f"repository {request.name!r} to adopt not found: {exc}") from exc
    namespace = str(repo["storage_namespace"]).rstrip("/")
    if request.storage_namespace and request.storage_namespace.rstrip("/") != namespace:
        raise InvalidValueError(
            f"storage_namespace {request.storage_namespace!r} is not the namespace of "
            f"repository {request.name!r} ({namespace!r})"
        )
    await service.open_namespace(namespace)
    source_region, _ = await service.find_source(source_repo, request.source_region)
    following = repo.get("mirror_of")
    if repo.get("read_only") and following not in (None, f"{source_region}/{source_repo}"):
        raise ConflictError(
            f"repository {request.name!r} is a mirror of {following}, not of "
            f"{source_region}/{source_repo}"
        )
    heads = await local.list_branches(request.name)
    carried = tuple(sorted(b for b in heads if b.startswith(PRESERVED_PREFIX)))
    config = MirrorConfig(
        name=request.name,
        source_region=source_region,
        source_repo=source_repo,
        region=request.region,
        storage_namespace=namespace,
        branches=tuple(request.branches),
        tags=request.tags,
        created=int(service.now()),
        adopted=True,
        preserved=carried,
    )
    diverged = await _check(service, config, heads)
    if diverged and not request.preserve_diverged:
        raise _refusal(config, diverged, demoted=False)
    kept = await _preserve(service, config, diverged)
    await local.demote_repository(config.name, f"{source_region}/{source_repo}")
    # a write acknowledged between the check and the demotion moved a head: check it again
    after = await local.list_branches(config.name)
    moved = {b: h for b, h in after.items() if heads.get(b) != h}
    config = replace(config, preserved=carried + tuple(k.branch for k in kept))
    late = await _check(service, config, moved)
    if late and not request.preserve_diverged:
        raise _refusal(config, late, demoted=True)
    kept += await _preserve(service, config, late)
    config = replace(config, preserved=carried + tuple(k.branch for k in kept))
    if config.tags:
        tags = await _keep_tags(service, config, diverged + late)
        config = replace(config, preserved_tags=tags)
    service.store.add_mirror(config)
    service.store.put_preserved(config.name, [k.to_json() for k in kept])
    _log.info(
        "repository adopted as a mirror",
        mirror=config.name,
        source=f"{source_region}/{source_repo}",
        preserved=[k.branch for k in kept],
        preserved_tags=list(config.preserved_tags),
    )
    await service.rebalance()
    return config, kept

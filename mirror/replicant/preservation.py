"""Fail-back, second step: copy a branch preserved in another region into a repository here.

When a repository is adopted as a mirror, the commits it accepted that its new source lacks stay
on ``preserved-*`` branches of that repository (see :mod:`mirror.replicant.adoption`). Copying
such a branch to the new source, in this replicant's region, takes two things: the files of its
head must be in the repository's namespace here (object-store replication, or a copy under the
same keys), and the commit records must be imported. This module checks the first with the
validator, as a mirror head is checked, and only then imports the records and creates the branch
through the region's server (``POST …/mirror/preserve``), so the branch is readable from the
moment it appears.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from mirror.core.validate import validate_repository_id
from mirror.errors import ConflictError, NotFoundError
from mirror.logging import get_logger
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.readers import NamespaceReaders
from mirror.replicant.settings import ServiceSettings
from mirror.replicant.worker import parents_first
from mirror.validator import MemoryValidatedRanges, Validator

__all__ = ["CopiedBranch", "FilesMissingError", "PreservationHost", "copy_preserved"]

_log = get_logger("mirror.replicant")


class PreservationHost(Protocol):
    """What copying a preserved branch uses of its region's replicant.

    :class:`~mirror.replicant.service.ReplicantService` is one (it imports this module, never the
    reverse).
    """

    @property
    def settings(self) -> ServiceSettings:
        """Return the replica's region, peers and tuning."""
        ...

    @property
    def readers(self) -> NamespaceReaders:
        """Return the opener of the validator's readers of namespaces."""
        ...

    @property
    def local(self) -> LakeFSClient:
        """Return the client of the replicant's own region."""
        ...

    def peer(self, region: str) -> LakeFSClient:
        """Return the API client of another configured region."""
        ...


class FilesMissingError(ConflictError):
    """The files of the branch's head are not all in this region's namespace yet."""


@dataclass(frozen=True, slots=True)
class CopiedBranch:
    """A branch of another region's repository, now in a repository of this region."""

    branch: str
    head: str
    source: str
    """``"<region>/<repo>"`` the branch was read from."""
    commits: list[str]
    """Commit records imported, parents first (empty when the branch was copied before)."""

    def to_json(self) -> dict[str, Any]:
        """Return the record as plain data."""
        return asdict(self)


async def copy_preserved(
    service: PreservationHost, repo: str, from_region: str, from_repo: str, branch: str
) -> CopiedBranch:
    """Copy ``branch`` of ``from_repo`` in ``from_region`` into the local repository ``repo``.

    Copying again a branch copied before (same head) changes nothing.

    Raises:
        UnknownRegionError: ``from_region`` is not another configured region.
        NotFoundError: no such repository here, or no such repository or branch there.
        FilesMissingError: files of the head are not in ``repo``'s namespace yet (409).
        AlreadyExistsError: ``repo`` has a branch of that name at another commit (409).
    """
    validate_repository_id(repo)
    validate_repository_id(from_repo)
    remote = service.peer(from_region)
    local = service.local
    source = f"{from_region}/{from_repo}"
    head = await remote.get_branch_head(from_repo, branch)
    if head is None:
        raise NotFoundError(f"branch {branch!r} of {source} not found")
    target = await local.get_repository(repo)
    if await local.get_branch_head(repo, branch) == head:
        return CopiedBranch(branch, head, source, [])
    lacking: dict[str, RemoteCommit] = {}
    todo = [head]
    while todo:
        cid = todo.pop()
        if cid in lacking or await local.has_commit(repo, cid):
            continue
        commit = await remote.get_commit(from_repo, cid)
        lacking[cid] = commit
        todo.extend(commit.parents)
    namespace = str(target["storage_namespace"])
    validator = Validator(
        await service.readers.open(namespace),
        validated=MemoryValidatedRanges(),
        concurrency=service.settings.concurrency,
        list_threshold=service.settings.list_threshold,
        open_external=service.readers.open_now,
    )
    top = lacking[head] if head in lacking else await remote.get_commit(from_repo, head)
    report = await validator.validate(top.meta_range_id)
    if not report.complete:
        raise FilesMissingError(
            f"{report.missing_count} file(s) of {branch!r} at {head} are not in {namespace} yet "
            f"(e.g. {', '.join(report.missing[:3])}); replicate or copy them under the same "
            "keys, then copy the branch again"
        )
    ordered = parents_first(lacking)
    await local.preserve_branch(repo, branch, head, ordered)
    _log.info(
        "preserved branch copied",
        repository=repo,
        branch=branch,
        head=head,
        source=source,
        commits=len(ordered),
    )
    return CopiedBranch(branch, head, source, [c.id for c in ordered])

"""An asynchronous client of a region's lakeFS-compatible API: what a replicant reads and writes.

Reads (repositories, branches, commits, tags) go to any region; the ``mirror`` methods call the
endpoints only a holder of ``fs:MirrorRepository`` may use, on the replicant's own region.
HTTP errors become the shared error tree of :mod:`mirror.errors`, carrying the server's message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from mirror import __version__
from mirror.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ConflictError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    UnavailableError,
)

__all__ = ["JSON", "LakeFSClient", "RemoteCommit"]

JSON = dict[str, Any]
_PAGE = 1000


def _seg(value: str) -> str:
    return quote(value, safe="")


@dataclass(frozen=True, slots=True)
class RemoteCommit:
    """A commit record as the API carries it (enough to recompute and verify its ID)."""

    id: str
    parents: tuple[str, ...]
    meta_range_id: str
    creation_date: int
    generation: int
    raw: JSON

    @classmethod
    def from_json(cls, data: JSON) -> RemoteCommit:
        """Return the commit of an API ``Commit`` object."""
        return cls(
            id=str(data["id"]),
            parents=tuple(str(p) for p in data.get("parents") or ()),
            meta_range_id=str(data.get("meta_range_id") or ""),
            creation_date=int(data.get("creation_date") or 0),
            generation=int(data.get("generation") or 0),
            raw=data,
        )


def _error(response: httpx.Response) -> LakeMirrorError:
    try:
        body = response.json()
        message = str(body.get("message", "")) if isinstance(body, dict) else ""
    except ValueError:
        message = ""
    message = message or f"HTTP {response.status_code} from {response.request.url.path}"
    status = response.status_code
    cls: type[LakeMirrorError]
    if status == 401:
        cls = AuthenticationError
    elif status == 403:
        cls = PermissionDeniedError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = AlreadyExistsError if "exist" in message.lower() else ConflictError
    elif status == 412:
        cls = PreconditionFailedError
    elif status in (400, 422):
        cls = InvalidValueError
    else:
        cls = UnavailableError
    return cls(message)


class LakeFSClient:
    """Call one region's ``/api/v1`` with HTTP Basic credentials.

    Args:
        base_url: The server's root URL (``/api/v1`` is appended).
        access_key_id: The key ID of the calling user.
        secret_access_key: Its secret (sent only in the Authorization header).
        timeout: Seconds before a request is abandoned.
        transport: An httpx transport to use instead of the network (tests).
    """

    def __init__(
        self,
        base_url: str,
        access_key_id: str,
        secret_access_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            base_url=self.base_url + "/api/v1",
            auth=(access_key_id, secret_access_key),
            timeout=timeout,
            headers={"User-Agent": f"lakemirror-replicant/{__version__}"},
            transport=transport,
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> LakeFSClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _call(
        self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        try:
            response = await self._http.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise UnavailableError(f"{self.base_url}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise _error(response)
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> JSON:
        data: JSON = (await self._call(method, path, **kwargs)).json()
        return data

    async def _pages(self, path: str) -> AsyncIterator[JSON]:
        after = ""
        while True:
            body = await self._json("GET", path, params={"after": after, "amount": _PAGE})
            for item in body.get("results", []):
                yield item
            pagination = body.get("pagination") or {}
            if not pagination.get("has_more"):
                return
            after = str(pagination.get("next_offset", ""))

    # reads

    async def current_user(self) -> JSON:
        """Return the user the credentials belong to."""
        user: JSON = (await self._json("GET", "/user")).get("user", {})
        return user

    async def get_repository(self, repo: str) -> JSON:
        """Return a repository.

        Raises:
            NotFoundError: no such repository.
        """
        return await self._json("GET", f"/repositories/{_seg(repo)}")

    async def list_branches(self, repo: str) -> dict[str, str]:
        """Return every branch of ``repo`` with its head commit."""
        return {
            str(b["id"]): str(b["commit_id"])
            async for b in self._pages(f"/repositories/{_seg(repo)}/branches")
        }

    async def get_branch_head(self, repo: str, branch: str) -> str | None:
        """Return the head commit of a branch, or ``None`` if there is no such branch."""
        try:
            body = await self._json("GET", f"/repositories/{_seg(repo)}/branches/{_seg(branch)}")
        except NotFoundError:
            return None
        return str(body["commit_id"])

    async def get_commit(self, repo: str, commit_id: str) -> RemoteCommit:
        """Return a commit record.

        Raises:
            NotFoundError: no such commit.
        """
        body = await self._json("GET", f"/repositories/{_seg(repo)}/commits/{_seg(commit_id)}")
        return RemoteCommit.from_json(body)

    async def has_commit(self, repo: str, commit_id: str) -> bool:
        """Return whether ``repo`` holds the commit record ``commit_id``."""
        try:
            await self.get_commit(repo, commit_id)
        except NotFoundError:
            return False
        return True

    async def list_tags(self, repo: str) -> dict[str, str]:
        """Return every tag of ``repo`` with its commit."""
        return {
            str(t["id"]): str(t["commit_id"])
            async for t in self._pages(f"/repositories/{_seg(repo)}/tags")
        }

    async def count_diff(self, repo: str, left: str, right: str) -> int:
        """Return how many paths ``right`` changed since their merge base with ``left``.

        With ``left`` an ancestor of ``right`` that is every path they differ by.
        """
        path = f"/repositories/{_seg(repo)}/refs/{_seg(left)}/diff/{_seg(right)}"
        return sum([1 async for _ in self._pages(path)])

    async def count_objects(self, repo: str, ref: str) -> int:
        """Return how many objects ``ref`` holds."""
        path = f"/repositories/{_seg(repo)}/refs/{_seg(ref)}/objects/ls"
        return sum([1 async for _ in self._pages(path)])

    # mirror writes (fs:MirrorRepository)

    async def create_mirror_repository(
        self, name: str, storage_namespace: str, default_branch: str, mirror_of: str
    ) -> JSON:
        """Create a read-only mirror repository.

        Raises:
            AlreadyExistsError: the name is taken.
            InvalidValueError: bad name or namespace.
        """
        body = {
            "name": name,
            "storage_namespace": storage_namespace,
            "default_branch": default_branch,
            "mirror_of": mirror_of,
        }
        return await self._json("POST", "/mirror/repositories", json=body)

    async def import_commit(self, repo: str, commit: RemoteCommit) -> None:
        """Add a commit record to a mirror (its parents must be there; the ID is verified)."""
        await self._call("POST", f"/repositories/{_seg(repo)}/mirror/commits", json=commit.raw)

    async def set_branch_head(
        self, repo: str, branch: str, commit_id: str, expected: str | None
    ) -> None:
        """Move (or, with ``expected=None``, create) a mirror branch by compare-and-swap.

        Raises:
            PreconditionFailedError: the head is not ``expected``.
        """
        await self._call(
            "PUT",
            f"/repositories/{_seg(repo)}/mirror/branches/{_seg(branch)}",
            json={"commit_id": commit_id, "expected": expected},
        )

    async def delete_branch(self, repo: str, branch: str) -> None:
        """Delete a mirror branch."""
        await self._call("DELETE", f"/repositories/{_seg(repo)}/mirror/branches/{_seg(branch)}")

    async def set_tag(self, repo: str, tag: str, commit_id: str) -> None:
        """Create a mirror tag (a no-op if it exists at the same commit)."""
        await self._call(
            "PUT",
            f"/repositories/{_seg(repo)}/mirror/tags/{_seg(tag)}",
            json={"commit_id": commit_id},
        )

    async def delete_tag(self, repo: str, tag: str) -> None:
        """Delete a mirror tag."""
        await self._call("DELETE", f"/repositories/{_seg(repo)}/mirror/tags/{_seg(tag)}")

    # repository roles (fs:MirrorRepository)

    async def demote_repository(self, repo: str, mirror_of: str) -> JSON:
        """Make ``repo`` a read-only mirror of ``mirror_of`` (``"<region>/<repo>"``).

        Demoting again with the same ``mirror_of`` succeeds again (a retry); every write the
        server acknowledges on ``repo`` happened before this call answered.

        Returns:
            The repository, now ``read_only`` with ``mirror_of`` set.

        Raises:
            NotFoundError: no such repository.
            ConflictError: the repository is read-only already, mirroring something else.
        """
        return await self._json(
            "POST", f"/repositories/{_seg(repo)}/mirror/demote", json={"mirror_of": mirror_of}
        )

    async def promote_repository(self, repo: str, promotion: JSON) -> JSON:
        """Make the mirror ``repo`` writable, keeping ``promotion`` as its promotion record.

        Returns:
            The repository, now writable with no ``mirror_of``.

        Raises:
            NotFoundError: no such repository.
            ConflictError: the repository is not a mirror (not read-only).
        """
        return await self._json(
            "POST",
            f"/repositories/{_seg(repo)}/mirror/promote",
            json={"promotion": promotion},
        )

    async def get_promotion(self, repo: str) -> JSON | None:
        """Return the newest promotion record of ``repo``, or ``None`` if it was never promoted.

        Raises:
            NotFoundError: no such repository.
        """
        try:
            return await self._json("GET", f"/repositories/{_seg(repo)}/mirror/promotion")
        except NotFoundError:
            # a missing repository must not read as "never promoted"
            await self.get_repository(repo)
            return None

    async def preserve_branch(
        self, repo: str, branch: str, head: str, commits: Sequence[RemoteCommit]
    ) -> JSON:
        """Import ``commits`` (parents first, IDs verified) and create ``branch`` at ``head``.

        Works on a writable or a read-only repository.

        Returns:
            The new branch as a ``Ref`` (``id``, ``commit_id``).

        Raises:
            AlreadyExistsError: the branch exists.
            InvalidValueError: a commit's ID does not match its content.
            NotFoundError: no such repository, or a parent (or ``head``) is missing.
        """
        body = {"branch": branch, "head": head, "commits": [c.raw for c in commits]}
        return await self._json("POST", f"/repositories/{_seg(repo)}/mirror/preserve", json=body)

"""A small synchronous client of lakeFS's ``/api/v1`` over httpx, with lakeFS's errors mapped.

Every method answers the server's JSON (``dict`` / ``list``) and raises a
:class:`~mirror.client.errors.CLIError` subclass chosen by the HTTP status, carrying the server's
``message``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from mirror import __version__
from mirror.client.config import ClientConfig
from mirror.client.errors import (
    AuthError,
    CLIError,
    ConflictError,
    NotFoundError,
    RejectedError,
    UnavailableError,
    UsageError,
)

__all__ = ["MAX_PAGE", "LakeFSClient", "error_for"]

JSON = dict[str, Any]
MAX_PAGE = 1000
_META = "x-lakefs-meta-"


def _seg(value: str) -> str:
    return quote(value, safe="")


def error_for(status: int, message: str) -> CLIError:
    """Return the CLI error for an HTTP error status and the server's message."""
    if status in (401, 403):
        cls: type[CLIError] = AuthError
    elif status == 404:
        cls = NotFoundError
    elif status in (409, 412):
        cls = ConflictError
    elif status in (429, 503):
        # lakeFS's 429 "Too many attempts, try again later" is a retry-later, as a 503 is
        cls = UnavailableError
    elif 400 <= status < 500:
        cls = RejectedError
    else:
        cls = CLIError
    return cls(message, status=status)


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    message = ""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]
        # a 401 carries lakeFS's text alone, and the server's reason beside it
        if isinstance(body.get("detail"), str) and body["detail"]:
            message = f"{message}: {body['detail']}"
    reason = f"{response.status_code} {response.reason_phrase}".strip()
    text = f"{message} ({reason})" if message else reason
    raise error_for(response.status_code, text)


class LakeFSClient:
    """Call a lakeFS-compatible server with HTTP Basic access keys.

    Safe to share between threads (httpx's connection pool is).
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Open a client for ``config``.

        Raises:
            UsageError: no access key is configured.
        """
        if not config.token and not (config.access_key_id and config.secret_access_key):
            raise UsageError(
                "no credentials: set credentials.access_key_id and "
                "credentials.secret_access_key in the configuration file, or "
                "LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"
            )
        self.base_url = config.endpoint_url
        headers = {"User-Agent": f"lakemirror-cli/{__version__}", "Accept": "application/json"}
        if config.token:
            # a login token (``lakemirror login``) signs in instead of the access key
            headers["Authorization"] = f"Bearer {config.token}"
        self._http = httpx.Client(
            base_url=config.endpoint_url,
            auth=None if config.token else (config.access_key_id, config.secret_access_key),
            timeout=timeout,
            headers=headers,
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
            transport=transport,
        )

    def __enter__(self) -> LakeFSClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # -- transport -------------------------------------------------------------------------

    def _transport_error(self, exc: httpx.TransportError) -> CLIError:
        what = "timed out" if isinstance(exc, httpx.TimeoutException) else str(exc) or "failed"
        host = httpx.URL(self.base_url).copy_with(username=None, password=None)
        return UnavailableError(f"cannot reach the server at {host}: {what}")

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send a request; return the response if its status is below 400.

        Raises:
            CLIError: the server answered an error (subclass by status), or could not be reached.
        """
        try:
            response = self._http.request(
                method, path, params=params, json=json, content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc
        _raise_for(response)
        return response

    @contextmanager
    def stream(
        self, method: str, path: str, *, params: Mapping[str, Any] | None = None
    ) -> Iterator[httpx.Response]:
        """Send a request and yield the response with its body unread.

        Raises:
            CLIError: as :meth:`request`.
        """
        try:
            with self._http.stream(method, path, params=params) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for(response)
                yield response
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from exc

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """GET ``path`` and return its JSON body."""
        return self.request("GET", path, params=params).json()

    def paginate(
        self,
        path: str,
        params: Mapping[str, Any] | None = None,
        *,
        limit: int | None = None,
        after: str = "",
    ) -> Iterator[JSON]:
        """Yield the ``results`` of a lakeFS listing, page after page.

        Args:
            path: The listing's path.
            params: Other query parameters (``prefix``, ``delimiter``, ...).
            limit: Stop after this many results (``None``: all of them).
            after: Start strictly after this ID or path.
        """
        yielded = 0
        while True:
            amount = MAX_PAGE if limit is None else min(MAX_PAGE, limit - yielded)
            if amount <= 0:
                return
            body = self.get_json(path, {**(params or {}), "after": after, "amount": amount})
            for item in body["results"]:
                yield item
                yielded += 1
                if limit is not None and yielded >= limit:
                    return
            pagination = body["pagination"]
            if not pagination["has_more"] or not pagination["next_offset"]:
                return
            after = pagination["next_offset"]

    # -- repositories ----------------------------------------------------------------------

    def create_repository(
        self, name: str, storage_namespace: str, default_branch: str, *, read_only: bool = False
    ) -> JSON:
        """Create a repository."""
        body = {
            "name": name,
            "storage_namespace": storage_namespace,
            "default_branch": default_branch,
            "read_only": read_only,
        }
        result: JSON = self.request("POST", "/repositories", json=body).json()
        return result

    def list_repositories(
        self, *, prefix: str = "", after: str = "", limit: int | None = None
    ) -> Iterator[JSON]:
        """Yield repositories by ID."""
        return self.paginate("/repositories", {"prefix": prefix}, limit=limit, after=after)

    def get_repository(self, repo: str) -> JSON:
        """Return a repository."""
        result: JSON = self.get_json(f"/repositories/{_seg(repo)}")
        return result

    def delete_repository(self, repo: str, *, force: bool = False) -> None:
        """Delete a repository (``force``: even a read-only one)."""
        self.request("DELETE", f"/repositories/{_seg(repo)}", params={"force": force})

    # -- branches --------------------------------------------------------------------------

    def _branch(self, repo: str, branch: str) -> str:
        return f"/repositories/{_seg(repo)}/branches/{_seg(branch)}"

    def create_branch(self, repo: str, name: str, source: str) -> str:
        """Create a branch at ``source``; return its head commit ID."""
        response = self.request(
            "POST",
            f"/repositories/{_seg(repo)}/branches",
            json={"name": name, "source": source},
        )
        return response.text.strip()

    def list_branches(
        self, repo: str, *, prefix: str = "", after: str = "", limit: int | None = None
    ) -> Iterator[JSON]:
        """Yield a repository's branches by name."""
        return self.paginate(
            f"/repositories/{_seg(repo)}/branches", {"prefix": prefix}, limit=limit, after=after
        )

    def get_branch(self, repo: str, branch: str) -> JSON:
        """Return a branch (``id``, ``commit_id``)."""
        result: JSON = self.get_json(self._branch(repo, branch))
        return result

    def delete_branch(self, repo: str, branch: str) -> None:
        """Delete a branch."""
        self.request("DELETE", self._branch(repo, branch))

    def reset_branch(self, repo: str, branch: str, kind: str, path: str | None = None) -> None:
        """Drop staged changes: ``reset`` (all), ``object`` or ``common_prefix`` at ``path``."""
        body: JSON = {"type": kind}
        if path is not None:
            body["path"] = path
        self.request("PUT", self._branch(repo, branch), json=body)

    def commit(
        self,
        repo: str,
        branch: str,
        message: str,
        metadata: Mapping[str, str],
        *,
        allow_empty: bool = False,
    ) -> JSON:
        """Commit a branch's staged changes; return the commit."""
        body = {"message": message, "metadata": dict(metadata), "allow_empty": allow_empty}
        result: JSON = self.request(
            "POST", self._branch(repo, branch) + "/commits", json=body
        ).json()
        return result

    def diff_uncommitted(
        self, repo: str, branch: str, *, prefix: str = "", limit: int | None = None
    ) -> Iterator[JSON]:
        """Yield a branch's uncommitted changes by path."""
        return self.paginate(self._branch(repo, branch) + "/diff", {"prefix": prefix}, limit=limit)

    def revert(
        self, repo: str, branch: str, ref: str, *, parent_number: int, allow_empty: bool
    ) -> None:
        """Commit the inverse of ``ref``'s changes onto the branch."""
        body = {"ref": ref, "parent_number": parent_number, "allow_empty": allow_empty}
        self.request("POST", self._branch(repo, branch) + "/revert", json=body)

    def cherry_pick(self, repo: str, branch: str, ref: str, *, parent_number: int) -> JSON:
        """Apply ``ref``'s changes onto the branch as a new commit; return it."""
        body = {"ref": ref, "parent_number": parent_number}
        result: JSON = self.request(
            "POST", self._branch(repo, branch) + "/cherry-pick", json=body
        ).json()
        return result

    # -- tags ------------------------------------------------------------------------------

    def create_tag(self, repo: str, tag: str, ref: str) -> JSON:
        """Create a tag at ``ref``; return it (``id``, ``commit_id``)."""
        body = {"id": tag, "ref": ref}
        result: JSON = self.request("POST", f"/repositories/{_seg(repo)}/tags", json=body).json()
        return result

    def list_tags(
        self, repo: str, *, prefix: str = "", after: str = "", limit: int | None = None
    ) -> Iterator[JSON]:
        """Yield a repository's tags by name."""
        return self.paginate(
            f"/repositories/{_seg(repo)}/tags", {"prefix": prefix}, limit=limit, after=after
        )

    def get_tag(self, repo: str, tag: str) -> JSON:
        """Return a tag (``id``, ``commit_id``)."""
        result: JSON = self.get_json(f"/repositories/{_seg(repo)}/tags/{_seg(tag)}")
        return result

    def delete_tag(self, repo: str, tag: str) -> None:
        """Delete a tag."""
        self.request("DELETE", f"/repositories/{_seg(repo)}/tags/{_seg(tag)}")

    # -- commits, log, diff, merge ---------------------------------------------------------

    def get_commit(self, repo: str, ref: str) -> JSON:
        """Return the commit a ref expression resolves to."""
        result: JSON = self.get_json(f"/repositories/{_seg(repo)}/commits/{_seg(ref)}")
        return result

    def log(
        self, repo: str, ref: str, *, first_parent: bool = False, limit: int | None = None
    ) -> Iterator[JSON]:
        """Yield the history of a ref, newest first."""
        return self.paginate(
            f"/repositories/{_seg(repo)}/refs/{_seg(ref)}/commits",
            {"first_parent": first_parent},
            limit=limit,
        )

    def diff_refs(
        self,
        repo: str,
        left: str,
        right: str,
        *,
        two_dot: bool = False,
        prefix: str = "",
        limit: int | None = None,
    ) -> Iterator[JSON]:
        """Yield the differences between two refs by path."""
        return self.paginate(
            f"/repositories/{_seg(repo)}/refs/{_seg(left)}/diff/{_seg(right)}",
            {"prefix": prefix, "type": "two_dot" if two_dot else "three_dot"},
            limit=limit,
        )

    def merge(
        self,
        repo: str,
        source: str,
        destination: str,
        *,
        message: str = "",
        metadata: Mapping[str, str] | None = None,
        strategy: str | None = None,
        allow_empty: bool = False,
        squash: bool = False,
    ) -> JSON:
        """Merge ``source`` into the branch ``destination``; return ``{"reference": ...}``."""
        body: JSON = {"allow_empty": allow_empty, "squash_merge": squash}
        if message:
            body["message"] = message
        if metadata:
            body["metadata"] = dict(metadata)
        if strategy:
            body["strategy"] = strategy
        result: JSON = self.request(
            "POST",
            f"/repositories/{_seg(repo)}/refs/{_seg(source)}/merge/{_seg(destination)}",
            json=body,
        ).json()
        return result

    # -- objects ---------------------------------------------------------------------------

    def _ref(self, repo: str, ref: str) -> str:
        return f"/repositories/{_seg(repo)}/refs/{_seg(ref)}"

    def list_objects(
        self,
        repo: str,
        ref: str,
        *,
        prefix: str = "",
        delimiter: str = "",
        limit: int | None = None,
    ) -> Iterator[JSON]:
        """Yield objects (and, with a delimiter, common prefixes) by path."""
        return self.paginate(
            self._ref(repo, ref) + "/objects/ls",
            {"prefix": prefix, "delimiter": delimiter},
            limit=limit,
        )

    def stat_object(self, repo: str, ref: str, path: str) -> JSON:
        """Return an object's metadata."""
        result: JSON = self.get_json(self._ref(repo, ref) + "/objects/stat", {"path": path})
        return result

    @contextmanager
    def read_object(self, repo: str, ref: str, path: str) -> Iterator[httpx.Response]:
        """Yield the response of an object's download with its body unread."""
        with self.stream(
            "GET", self._ref(repo, ref) + "/objects", params={"path": path, "presign": False}
        ) as response:
            yield response

    def upload_object(
        self,
        repo: str,
        branch: str,
        path: str,
        content: bytes | Iterable[bytes],
        *,
        size: int | None = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> JSON:
        """Upload bytes to ``path`` on a branch; return the object's stats."""
        headers: dict[str, str] = {}
        if size is not None:
            headers["Content-Length"] = str(size)
        if content_type:
            headers["Content-Type"] = content_type
        for key, value in (metadata or {}).items():
            headers[_META + key] = value
        result: JSON = self.request(
            "POST",
            self._branch(repo, branch) + "/objects",
            params={"path": path},
            content=content,
            headers=headers,
        ).json()
        return result

    def delete_object(self, repo: str, branch: str, path: str) -> None:
        """Stage the deletion of one object."""
        self.request("DELETE", self._branch(repo, branch) + "/objects", params={"path": path})

    def delete_objects(self, repo: str, branch: str, paths: list[str]) -> JSON:
        """Stage the deletion of up to 1000 paths; return the server's error list."""
        result: JSON = self.request(
            "POST", self._branch(repo, branch) + "/objects/delete", json={"paths": paths}
        ).json()
        return result

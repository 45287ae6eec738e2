"""This region's replicant as the web UI calls it: over HTTP, as the signed-in person.

The mirroring pages read and change mirrors through the replicant's configuration API
(``/service/replication/v1``) at ``ui.replicant_url``. Each call carries the person's login
token as ``Authorization: Bearer``: the replicant verifies it with the region's token key and
applies the person's own policies, exactly as for their access key. The UI imports nothing of
the replicant (a sibling front door): this is an HTTP client of its documented API.

A refusal comes back as :class:`~mirror.ui.api.ApiError` with the replicant's own message; a
replicant that cannot be reached is a 503 saying where it was looked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx
import structlog

from mirror.ui.api import ApiError, error_text
from mirror.ui.render import urlpart

__all__ = [
    "REPLICATION_PREFIX",
    "ReplicantClient",
    "mirror_path",
    "mirrors_path",
]

REPLICATION_PREFIX = "/service/replication/v1"
_TIMEOUT = 30.0
"""Seconds a call may take, but a promotion, which waits for the mirror to catch up."""


def mirrors_path(source_repo: str) -> str:
    """Return the path of the mirrors of ``source_repo`` under :data:`REPLICATION_PREFIX`."""
    return f"/repositories/{urlpart(source_repo)}/mirrors"


def mirror_path(source_repo: str, name: str, *rest: str) -> str:
    """Return the path of mirror ``name`` of ``source_repo`` (and of ``rest`` under it)."""
    return "/".join([f"{mirrors_path(source_repo)}/{urlpart(name)}", *rest])


class ReplicantClient:
    """Call the replicant of this region.

    Args:
        base_url: The replicant's base URL (``ui.replicant_url``).
        transport: The HTTP transport (tests may hand in their own).
    """

    def __init__(self, base_url: str, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url + REPLICATION_PREFIX, timeout=_TIMEOUT, transport=transport
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def call(
        self,
        method: str,
        path: str,
        token: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send one call under ``/service/replication/v1`` as the person; return its success.

        Args:
            method: The HTTP method.
            path: The path under the prefix (:func:`mirrors_path`, :func:`mirror_path`).
            token: The person's login token.
            json: The JSON body.
            params: The query parameters.
            timeout: Seconds to wait for the answer, when not the default.

        Raises:
            ApiError: the replicant refused (its status and message), or could not be reached
                (503).
        """
        headers = {"Authorization": f"Bearer {token}"}
        # the replicant logs the call under the page's request ID, so both logs read together
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if isinstance(request_id, str):
            headers["X-Request-ID"] = request_id
        try:
            response = await self._client.request(
                method,
                path,
                json=json,
                params=params,
                headers=headers,
                timeout=_TIMEOUT if timeout is None else timeout,
            )
        except httpx.HTTPError as exc:
            raise ApiError(
                503,
                f"this region's replicant ({self.base_url}) could not be reached: "
                f"{type(exc).__name__}: {exc}",
            ) from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, error_text(response))
        return response

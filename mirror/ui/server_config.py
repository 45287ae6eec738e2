"""The server's configuration as the UI reads it: ``GET /api/v1/config``, once per process.

What ``/config`` answers (the version, the storage configuration, the capabilities) is fixed
when the server starts, so the UI reads it on the first page that needs it and keeps it: an
Objects page then asks nothing to decide whether to offer an import. The UI does not import the
API's configuration; it reads it through the API like every other piece of data, as whoever is
signed in (any signed-in person may read it).
"""

from __future__ import annotations

from typing import Any

from mirror.ui.api import ApiClient

__all__ = ["ServerConfig"]


class ServerConfig:
    """The server's ``/config``, read once and kept for the life of the process.

    Two pages asking at once before the first answer both read it; the answers are the same.
    A refusal is not kept: the next page asks again.
    """

    def __init__(self) -> None:
        self._config: dict[str, Any] | None = None

    async def read(self, api: ApiClient, token: str) -> dict[str, Any]:
        """Return ``GET /api/v1/config`` as the session of ``token`` reads it, the first time.

        Raises:
            SignedOut: the API no longer accepts the session.
            ApiError: the API refused, with its message.
        """
        if self._config is None:
            answer = await api.call("GET", "/config", token)
            self._config = answer.json()
        return self._config

    async def storage(self, api: ApiClient, token: str) -> dict[str, Any]:
        """Return the server's storage configuration (``/config``'s ``storage_config``)."""
        storage: dict[str, Any] = (await self.read(api, token)).get("storage_config") or {}
        return storage

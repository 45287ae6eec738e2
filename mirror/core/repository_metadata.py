"""A repository's metadata: a string map of the repository, outside its history.

lakeFS keeps it on the repository record (``GET/POST/DELETE /repositories/{r}/metadata``); here
it is one KV record per repository instance, ``repometa/<repository>:<instance>``, changed only
by compare-and-swap so concurrent writers from several server processes merge their keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import Repository
from mirror.errors import ConflictError
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["RepositoryMetadataStore"]

_MAX_TRIES = 20


class RepositoryMetadataStore:
    """The metadata maps of every repository, in the KV.

    Args:
        kv: Where the maps live.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    @staticmethod
    def _key(repo: Repository) -> bytes:
        return f"repometa/{repo.id}:{repo.instance_uid}".encode()

    def delete_repository(self, repo: Repository) -> None:
        """Delete the whole metadata map of ``repo`` (a deleted repository's; none: no error)."""
        self.kv.delete(self._key(repo))

    def _read(self, repo: Repository) -> tuple[dict[str, str], bytes | None]:
        try:
            raw = self.kv.get(self._key(repo))
        except KeyNotFoundError:
            return {}, None
        found: dict[str, str] = json.loads(raw)
        return found, raw

    def get(self, repo: Repository) -> dict[str, str]:
        """Return the repository's metadata (empty when none was ever set)."""
        return self._read(repo)[0]

    def _change(
        self, repo: Repository, change: Callable[[dict[str, str]], dict[str, str]]
    ) -> dict[str, str]:
        if repo.read_only:
            raise RepositoryReadOnlyError(repo.id)
        for _ in range(_MAX_TRIES):
            current, raw = self._read(repo)
            updated = change(dict(current))
            encoded = json.dumps(updated, sort_keys=True, separators=(",", ":")).encode()
            try:
                self.kv.set_if(self._key(repo), encoded, raw)
            except KVPreconditionFailedError:
                continue
            return updated
        raise ConflictError(f"metadata of repository {repo.id!r}: changed concurrently, try again")

    def set(self, repo: Repository, values: Mapping[str, str]) -> dict[str, str]:
        """Set the given keys, keeping the others; return the whole map.

        Raises:
            RepositoryReadOnlyError: the repository is read-only.
        """

        def merge(current: dict[str, str]) -> dict[str, str]:
            current.update(values)
            return current

        return self._change(repo, merge)

    def delete(self, repo: Repository, keys: Iterable[str]) -> dict[str, str]:
        """Remove the given keys (missing ones are ignored); return the whole map.

        Raises:
            RepositoryReadOnlyError: the repository is read-only.
        """
        gone = set(keys)

        def drop(current: dict[str, str]) -> dict[str, str]:
            return {k: v for k, v in current.items() if k not in gone}

        return self._change(repo, drop)

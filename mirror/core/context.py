"""What every catalog operation works with: the stores, the clock and the retry policy."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from mirror.block.protocol import BlockStore, NamespaceResolver
from mirror.core.committed import ChunkingParams, CommittedStore
from mirror.core.errors import (
    RefPreconditionFailedError,
    RepositoryReadOnlyError,
    TooManyTriesError,
)
from mirror.core.model import Repository
from mirror.core.namespaces import CommittedStoreCache
from mirror.core.paths import DataPathProvider
from mirror.core.refs import RefStore
from mirror.core.staging import StagingStore
from mirror.core.validate import validate_repository_id
from mirror.kv.protocol import KV

__all__ = ["CatalogContext"]

T = TypeVar("T")


class CatalogContext:
    """The stores of a catalog and the rules its operations share.

    Args:
        kv: Where refs, commits and staging live.
        blocks: Opens the object store of each storage namespace.
        chunking: How committed trees split into ranges.
        clock: Returns the current time in seconds.
        max_tries: Attempts of a compare-and-swap before :class:`TooManyTriesError`.
        backoff: Initial and maximal back-off between attempts, in seconds.
        range_cache_size: Decoded ranges kept per namespace.
        namespace_cache_size: Namespaces whose range caches are kept.
    """

    def __init__(
        self,
        kv: KV,
        blocks: NamespaceResolver,
        *,
        chunking: ChunkingParams,
        clock: Callable[[], float],
        max_tries: int,
        backoff: tuple[float, float],
        range_cache_size: int,
        namespace_cache_size: int,
    ) -> None:
        self.kv = kv
        self.blocks = blocks
        self.refs = RefStore(kv)
        self.staging = StagingStore(kv)
        self.chunking = chunking
        self.paths = DataPathProvider()
        self.clock = clock
        self.max_tries = max_tries
        self.backoff = backoff
        self.committed_stores = CommittedStoreCache(blocks, range_cache_size, namespace_cache_size)

    def now(self) -> int:
        """Return the current time in whole seconds."""
        return int(self.clock())

    def committed(self, repo: Repository) -> CommittedStore:
        """Return the committed-data store of ``repo``'s storage namespace."""
        return self.committed_stores.get(repo.storage_namespace)

    def block_store(self, repo: Repository) -> BlockStore:
        """Return the object store of ``repo``'s storage namespace."""
        return self.blocks.open(repo.storage_namespace)

    def repository(self, name: str) -> Repository:
        """Return the repository called ``name``.

        Raises:
            InvalidNameError: bad repository name.
            RepositoryNotFoundError: no such repository.
        """
        return self.refs.get_repository(validate_repository_id(name))

    def record(self, repository: str | Repository) -> Repository:
        """Return ``repository`` if it is a record already read, else the record of that name.

        Raises:
            InvalidNameError: bad repository name.
            RepositoryNotFoundError: no such repository.
        """
        if isinstance(repository, Repository):
            return repository
        return self.repository(repository)

    def writable(self, name: str, force: bool = False) -> Repository:
        """Return the repository called ``name`` if it may be written (or ``force``).

        Raises:
            RepositoryNotFoundError: no such repository.
            RepositoryReadOnlyError: the repository is read-only and not ``force``.
        """
        repo = self.repository(name)
        if repo.read_only and not force:
            raise RepositoryReadOnlyError(repo.id)
        return repo

    def retry(self, what: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it stops losing compare-and-swap races, with jittered back-off.

        Raises:
            TooManyTriesError: ``attempt`` lost every one of ``max_tries`` races.
        """
        delay, cap = self.backoff
        for _ in range(self.max_tries):
            try:
                return attempt()
            except RefPreconditionFailedError:
                # backoff jitter, no secret
                time.sleep(random.uniform(0, delay))  # nosec B311
                delay = min(cap, delay * 2)
        raise TooManyTriesError(f"{what}: gave up after {self.max_tries} concurrent updates")

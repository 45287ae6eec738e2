"""The replicant of one region: mirror configuration, leases, and one worker per leased mirror.

Every replica of a region's replicant runs the same :class:`ReplicantService` over the region's
KV. Each replica tries to take the lease of every configured mirror; the one holding a lease runs
that mirror's :class:`~mirror.replicant.worker.MirrorWorker` and renews the lease every third of
its duration. If it stops renewing (it died, or lost the KV), another replica takes the mirror
over once the lease expires. Branch heads move only by compare-and-swap, so even two workers
overlapping for a moment cannot move a head to an unvalidated commit.

A replica that stops (SIGTERM) cancels its workers and gives its leases up at once, so another
replica takes the mirrors over on its next lease round instead of after the leases expire. The
stop is bounded by ``shutdown_timeout``: a worker that has not stopped by then is left behind
and its lease released all the same.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

from mirror.block.errors import InvalidNamespaceError
from mirror.block.resolver import split_namespace
from mirror.config import RegionSettings
from mirror.core.validate import validate_repository_id
from mirror.errors import InvalidValueError, LakeMirrorError, NotFoundError, UnavailableError
from mirror.kv import KV
from mirror.logging import get_logger
from mirror.replicant import adoption, preservation, promotion
from mirror.replicant.adoption import PreservedBranch
from mirror.replicant.bulk import BulkFirstSync
from mirror.replicant.client import LakeFSClient
from mirror.replicant.lag_history import LagSample, read_history
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.mirror_request import MirrorRequest
from mirror.replicant.preservation import CopiedBranch
from mirror.replicant.promotion import PromotionReport
from mirror.replicant.readers import NamespaceReaders
from mirror.replicant.settings import ServiceSettings
from mirror.replicant.state import (
    BranchStatus,
    MirrorConfig,
    MirrorNotFoundError,
    ReplicantStore,
)
from mirror.replicant.worker import FirstSync, MirrorWorker, WorkerSettings
from mirror.validator import KVValidatedRanges, ObjectCache, Validator

__all__ = ["MirrorRequest", "ReplicantService", "ServiceSettings", "UnknownRegionError"]


class UnknownRegionError(InvalidValueError):
    """A region name is not in the configuration (or cannot be used that way)."""


class ReplicantService:
    """Configure mirrors and run the workers of the mirrors this replica leases.

    Args:
        settings: Region, peers and tuning.
        kv: The region's KV (the replicant's records live under ``replicant/``).
        readers: Opens the validator's readers of mirror namespaces.
        client_factory: Builds the API client of a region (tests may pass their own transport).
        clock: Wall-clock seconds.
    """

    def __init__(
        self,
        settings: ServiceSettings,
        kv: KV,
        readers: NamespaceReaders,
        *,
        client_factory: Callable[[RegionSettings], LakeFSClient] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if settings.region not in settings.regions:
            raise UnknownRegionError(
                f"replicant.region {settings.region!r} is not among the configured regions "
                f"({', '.join(sorted(settings.regions)) or 'none'})"
            )
        unset = sorted(name for name, r in settings.regions.items() if not r.server_url)
        if unset:
            raise UnknownRegionError(f"regions without a server_url: {', '.join(unset)}")
        self.settings = settings
        self.store = ReplicantStore(kv)
        self.readers = readers
        self.metrics = ReplicantMetrics()
        self._client_factory = client_factory or _client
        self._clock = clock
        self._clients: dict[str, LakeFSClient] = {}
        self._workers: dict[str, tuple[MirrorWorker, asyncio.Task[None]]] = {}
        self._exported: set[str] = set()
        """Mirrors whose series this replica's ``/metrics`` shows."""
        self._manager: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Task[None] | None = None
        self.bulk = BulkFirstSync(settings.bulk_threshold) if settings.bulk_threshold else None
        self._log = get_logger("mirror.replicant").bind(replica=settings.replica_id)
        self._promotion_locks: dict[str, asyncio.Lock] = {}
        self._promoting: set[str] = set()
        """Mirrors whose worker this replica stopped for a promotion in progress."""

    # clients

    def client(self, region: str) -> LakeFSClient:
        """Return the API client of a configured region.

        Raises:
            UnknownRegionError: the region is not configured.
        """
        found = self._clients.get(region)
        if found is None:
            settings = self.settings.regions.get(region)
            if settings is None:
                raise UnknownRegionError(f"unknown region {region!r}")
            found = self._client_factory(settings)
            self._clients[region] = found
        return found

    def peer(self, region: str) -> LakeFSClient:
        """Return the API client of another configured region.

        Raises:
            UnknownRegionError: the region is unknown, or it is this replicant's own.
        """
        if region == self.settings.region:
            raise UnknownRegionError(f"region {region!r} is this replicant's own")
        return self.client(region)

    @property
    def local(self) -> LakeFSClient:
        """Return the client of this replicant's own region."""
        return self.client(self.settings.region)

    # configuration

    def now(self) -> float:
        """Return the replicant's wall-clock time (seconds since the epoch)."""
        return self._clock()

    def check_region(self, request: MirrorRequest) -> None:
        """Check that ``request`` mirrors into this replicant's region, with sane branch patterns.

        Raises:
            UnknownRegionError: the mirror's region is unknown or not this replicant's.
            InvalidValueError: bad branch patterns.
        """
        if request.region not in self.settings.regions:
            raise UnknownRegionError(f"unknown region {request.region!r}")
        if request.region != self.settings.region:
            raise UnknownRegionError(
                f"this replicant mirrors into region {self.settings.region!r}; configure mirrors "
                f"into {request.region!r} on that region's replicant"
            )
        if not request.branches or any(not p or len(p) > 256 for p in request.branches):
            raise InvalidValueError("branches must be a non-empty list of glob patterns")

    async def open_namespace(self, namespace: str) -> None:
        """Check that the validator can read ``namespace``.

        Raises:
            InvalidValueError: the namespace is malformed or of an unsupported scheme.
        """
        try:
            split_namespace(namespace)
            await self.readers.open(namespace)
        except InvalidNamespaceError as exc:
            raise InvalidValueError(str(exc)) from exc

    async def create_mirror(self, source_repo: str, request: MirrorRequest) -> MirrorConfig:
        """Configure a mirror and create its read-only repository in this region.

        With ``request.existing`` the local repository is adopted instead (see :meth:`adopt`).

        Raises:
            InvalidValueError: bad name, branch pattern or namespace.
            UnknownRegionError: the mirror's region is unknown or not this replicant's.
            NotFoundError: the source repository was found in no (or not the named) region.
            AlreadyExistsError: the mirror (or a repository of that name) exists.
            DivergedError: adopting, a branch diverged and ``preserve_diverged`` is false.
        """
        if request.existing:
            return (await self.adopt(source_repo, request))[0]
        validate_repository_id(request.name)
        validate_repository_id(source_repo)
        self.check_region(request)
        await self.open_namespace(request.storage_namespace)
        source_region, source = await self.find_source(source_repo, request.source_region)
        config = MirrorConfig(
            name=request.name,
            source_region=source_region,
            source_repo=source_repo,
            region=request.region,
            storage_namespace=request.storage_namespace.rstrip("/"),
            branches=tuple(request.branches),
            tags=request.tags,
            created=int(self._clock()),
        )
        self.store.add_mirror(config)
        try:
            await self.local.create_mirror_repository(
                config.name,
                config.storage_namespace,
                str(source.get("default_branch") or "main"),
                f"{source_region}/{source_repo}",
            )
        except BaseException:
            self.store.delete_mirror(config.name)
            raise
        self._log.info(
            "mirror created",
            mirror=config.name,
            source=f"{source_region}/{source_repo}",
            namespace=config.storage_namespace,
        )
        await self.rebalance()
        return config

    async def adopt(
        self, source_repo: str, request: MirrorRequest
    ) -> tuple[MirrorConfig, list[PreservedBranch]]:
        """Mirror ``source_repo`` into the existing local repository ``request.name``.

        See :mod:`mirror.replicant.adoption`.

        Returns:
            The mirror, and the branches preserving heads its new source lacks.
        """
        return await adoption.adopt(self, source_repo, request)

    async def promote(
        self, source_repo: str, name: str, *, force: bool = False, timeout: float = 60.0
    ) -> PromotionReport:
        """Promote a mirror to this region's writable repository.

        See :mod:`mirror.replicant.promotion`.
        """
        try:
            return await promotion.promote(self, source_repo, name, force=force, timeout=timeout)
        finally:
            self._promoting.discard(name)

    async def copy_preserved(
        self, repo: str, from_region: str, from_repo: str, branch: str
    ) -> CopiedBranch:
        """Copy a branch preserved in another region into the local repository ``repo``.

        See :mod:`mirror.replicant.preservation`.
        """
        return await preservation.copy_preserved(self, repo, from_region, from_repo, branch)

    def promotion_lock(self, name: str) -> asyncio.Lock:
        """Return the lock serializing this replica's promotions of mirror ``name``."""
        return self._promotion_locks.setdefault(name, asyncio.Lock())

    async def stop_local_worker(self, name: str) -> None:
        """Stop this replica's worker of a mirror being promoted; none restarts until it ends."""
        self._promoting.add(name)
        await self._stop_worker(name, release=False)

    async def find_source(
        self, source_repo: str, source_region: str | None
    ) -> tuple[str, dict[str, object]]:
        """Return the region holding ``source_repo`` (the named one, or the only one) and it.

        Raises:
            NotFoundError: no region holds it.
            UnavailableError: it was not found and some region could not be reached.
            InvalidValueError: several regions hold it and none was named.
        """
        if source_region is not None:
            if source_region not in self.settings.regions:
                raise UnknownRegionError(f"unknown source region {source_region!r}")
            if source_region == self.settings.region:
                raise UnknownRegionError("a mirror's source must be in another region")
            candidates = [source_region]
        else:
            candidates = sorted(r for r in self.settings.regions if r != self.settings.region)
        found: list[tuple[str, dict[str, object]]] = []
        unreachable: list[str] = []
        for region in candidates:
            try:
                found.append((region, await self.client(region).get_repository(source_repo)))
            except NotFoundError:
                continue
            except UnavailableError:
                unreachable.append(region)
        if not found and unreachable:
            raise UnavailableError(
                f"source repository {source_repo!r} not found; region(s) "
                f"{', '.join(unreachable)} could not be reached"
            )
        if not found:
            where = source_region or "any other region"
            raise NotFoundError(f"source repository {source_repo!r} not found in {where}")
        if len(found) > 1:
            names = ", ".join(r for r, _ in found)
            raise InvalidValueError(
                f"repository {source_repo!r} exists in several regions ({names}); "
                "name one with source_region"
            )
        return found[0]

    def get_mirror(self, source_repo: str, name: str) -> MirrorConfig:
        """Return a mirror of ``source_repo``.

        Raises:
            MirrorNotFoundError: no such mirror of that repository.
        """
        config = self.store.get_mirror(name)
        if config.source_repo != source_repo:
            raise MirrorNotFoundError(f"mirror {name!r} of {source_repo!r} not found")
        return config

    def list_mirrors(self, source_repo: str | None = None) -> list[MirrorConfig]:
        """Return the mirrors of ``source_repo``, or every mirror of the region (``None``)."""
        return [m for m in self.store.list_mirrors() if source_repo in (None, m.source_repo)]

    def lag_history(self, source_repo: str, name: str) -> dict[str, list[LagSample]]:
        """Return each branch's lag samples of the last hour of a mirror of ``source_repo``.

        Raises:
            MirrorNotFoundError: no such mirror of that repository.
        """
        self.get_mirror(source_repo, name)
        return read_history(self.store.kv, name, self._clock())

    def promotion_report(self, source_repo: str, name: str) -> dict[str, Any]:
        """Return the report of the newest promotion of mirror ``name`` of ``source_repo``.

        Raises:
            NotFoundError: the mirror was never promoted (from that repository).
        """
        report = self.store.get_promotion(name)
        if report is None or not str(report.get("source", "")).endswith(f"/{source_repo}"):
            raise NotFoundError(f"promotion of mirror {name!r} of {source_repo!r} not found")
        return report

    async def delete_mirror(self, source_repo: str, name: str) -> None:
        """Stop mirroring; the mirror repository stays (read-only) with what it shows."""
        self.get_mirror(source_repo, name)
        await self._stop_worker(name)
        self.store.delete_mirror(name)
        self.metrics.forget_mirror(name)
        self._exported.discard(name)
        self._log.info("mirror deleted", mirror=name)

    def status(self, name: str) -> list[BranchStatus]:
        """Return the status of a mirror's branches (live if this replica works it)."""
        running = self._workers.get(name)
        if running is not None:
            return running[0].status()
        return self.store.list_status(name)

    def worker_owner(self, name: str) -> str | None:
        """Return the replica holding a mirror's lease (if unexpired)."""
        lease = self.store.get_lease(name)
        if lease is None or lease.expires <= self._clock():
            return None
        return lease.owner

    # workers and leases

    async def start(self) -> None:
        """Start taking leases and working mirrors in the background."""
        self._loop = asyncio.get_running_loop()
        if self._manager is None and self._stopping is None:
            self._manager = asyncio.create_task(self._manage(), name="replicant-manager")

    def request_stop(self) -> None:
        """Begin :meth:`stop` now; safe to call from a signal handler or another thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._begin_stop)

    def _begin_stop(self) -> asyncio.Task[None]:
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_task(
                self._stop(), name="replicant-stop"
            )
        return self._stopping

    async def stop(self) -> None:
        """Stop every worker, give up leases, close clients and readers.

        Takes at most ``settings.shutdown_timeout`` seconds to wait for the workers (plus one KV
        call per lease held); a worker still running then is logged and left behind. Calling it
        again, or after :meth:`request_stop`, waits for the same stop.
        """
        await asyncio.shield(self._begin_stop())

    async def _stop(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.shutdown_timeout
        tasks: list[asyncio.Task[None]] = []
        if self._manager is not None:
            tasks.append(self._manager)
            self._manager = None
        tasks += [task for _, task in self._workers.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            if pending:
                self._log.error(
                    "workers did not stop within the shutdown timeout; leaving them",
                    workers=sorted(t.get_name() for t in pending),
                    shutdown_timeout=self.settings.shutdown_timeout,
                )
        self._workers.clear()
        self._release_leases()
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
        await self.readers.aclose()
        if self.bulk is not None:
            self.bulk.stop()

    def _release_leases(self) -> None:
        # Every configured mirror, not only those with a worker: the manager may have been
        # cancelled between taking a lease and starting its worker.
        try:
            names = [m.name for m in self.store.list_mirrors()]
        except LakeMirrorError as exc:
            self._log.warning("leases not released: mirrors unreadable", error=str(exc))
            return
        for name in names:
            try:
                self.store.release_lease(name, self.settings.replica_id)
            except LakeMirrorError as exc:
                self._log.warning("lease not released", mirror=name, error=str(exc))
            self.metrics.lease_held.labels(name).set(0)
        self._log.info("leases released", mirrors=len(names))

    async def _manage(self) -> None:
        interval = min(self.settings.poll_interval, self.settings.lease_seconds / 3)
        while True:
            try:
                await self.rebalance()
            except LakeMirrorError as exc:
                self._log.warning("lease round failed", error=str(exc))
            await asyncio.sleep(interval)

    async def rebalance(self) -> None:
        """Renew or take leases; start workers for mirrors held, stop those lost or deleted."""
        if self._stopping is not None:
            return
        now = self._clock()
        # the KV calls of a round run on a worker thread: a slow or unreachable KV must not stall
        # the event loop, which answers /healthz and the configuration API meanwhile
        mirrors = await asyncio.to_thread(lambda: list(self.store.list_mirrors()))
        configured = {m.name: m for m in mirrors}
        for name in list(self._workers):
            if name not in configured:
                await self._stop_worker(name)
        for name in self._exported - configured.keys():
            self.metrics.forget_mirror(name)
        self._exported = set(configured)
        for name, config in sorted(configured.items()):
            held = await asyncio.to_thread(
                self.store.try_lease,
                name,
                self.settings.replica_id,
                self.settings.lease_seconds,
                now,
            )
            self.metrics.lease_held.labels(name).set(1 if held else 0)
            running = self._workers.get(name)
            if held and name in self._promoting:
                continue  # its worker was stopped for the promotion; keep the lease meanwhile
            if held and (running is None or running[1].done()):
                await self._start_worker(config)
            elif not held and running is not None:
                self._log.warning("lease lost; stopping the worker", mirror=name)
                await self._stop_worker(name, release=False)

    async def _start_worker(self, config: MirrorConfig) -> None:
        reader = await self.readers.open(config.storage_namespace)
        validated = KVValidatedRanges(
            self.store.kv,
            self.store.ranges_prefix(config.name),
            retention_prefix=self.store.range_retention_prefix(config.name),
            heads_kept=self.settings.validated_heads_kept,
        )
        validator = Validator(
            reader,
            validated=validated,
            objects=ObjectCache(self.settings.object_cache_size),
            events=self.metrics.for_validation(config.name),
            concurrency=self.settings.concurrency,
            list_threshold=self.settings.list_threshold,
            open_external=self.readers.open_now,
        )
        worker = MirrorWorker(
            config,
            self.client(config.source_region),
            self.local,
            validator,
            self.store,
            self.metrics,
            WorkerSettings(poll_interval=self.settings.poll_interval),
            clock=self._clock,
            first_sync=self._first_sync(config, validated, validator),
        )
        task = asyncio.create_task(worker.run(), name=f"mirror:{config.name}")
        self._workers[config.name] = (worker, task)
        self._log.info("lease taken; worker started", mirror=config.name)

    def _first_sync(
        self, config: MirrorConfig, validated: KVValidatedRanges, validator: Validator
    ) -> FirstSync | None:
        bulk = self.bulk
        if bulk is None:
            return None
        store = self.readers.store(config.storage_namespace)
        return functools.partial(
            bulk.validate, config.storage_namespace, store, validated, validator
        )

    async def _stop_worker(self, name: str, *, release: bool = True) -> None:
        running = self._workers.pop(name, None)
        if running is not None:
            running[1].cancel()
            await asyncio.gather(running[1], return_exceptions=True)
        if release:
            self.store.release_lease(name, self.settings.replica_id)
        self.metrics.lease_held.labels(name).set(0)

    def working(self) -> list[str]:
        """Return the mirrors this replica works now."""
        return sorted(n for n, (_, task) in self._workers.items() if not task.done())


def _client(settings: RegionSettings) -> LakeFSClient:
    secret = settings.secret_access_key.get_secret_value() if settings.secret_access_key else ""
    return LakeFSClient(settings.server_url or "", settings.access_key_id or "", secret)

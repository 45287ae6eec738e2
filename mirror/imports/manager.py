"""Start, watch and cancel imports running in the background of a server process.

An import is checked up front (repository, read-only, branch, sources), gets a status record in
the KV (:mod:`mirror.imports.records`) and runs as a background task of this process
(:mod:`mirror.tasks`), whose heartbeat lets any process tell a running import from one whose
process died. While it runs, its record is rewritten about every ``save_interval`` seconds with
the count of objects ingested; that write is also where a cancel request is noticed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from mirror.core.catalog import Catalog
from mirror.core.errors import LakeFSText, RepositoryReadOnlyError
from mirror.core.imports import (
    ImportCanceledError,
    ImportSource,
    import_objects,
    require_clean,
    validate_sources,
)
from mirror.core.model import Commit, Repository
from mirror.errors import ConflictError
from mirror.imports.records import (
    CANCELED_ERROR,
    ImportRecord,
    ImportRecords,
    new_import_id,
)
from mirror.logging import get_logger
from mirror.tasks import TaskNotFoundError, TaskRunner

__all__ = ["ImportCompletedError", "ImportManager"]

log = get_logger("mirror.imports")

CommitView = Callable[[Commit], dict[str, Any]]
"""Returns the JSON a finished import's status shows for its commit."""


class ImportCompletedError(LakeFSText, ConflictError):
    """A cancel of an import that already committed (lakeFS answers 409 ``conflict found``)."""

    lakefs_text = "conflict found"


class ImportManager:
    """Imports of one catalog, run as background tasks of this process.

    Args:
        catalog: The versioning core.
        runner: This process's task runner (``None``: imports run in plain threads, and a
            process that dies leaves them reading as running).
        save_interval: Seconds between progress saves.
        clock: Returns the time in Unix seconds.
    """

    def __init__(
        self,
        catalog: Catalog,
        runner: TaskRunner | None,
        *,
        save_interval: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.catalog = catalog
        self.runner = runner
        self.records = ImportRecords(catalog.kv)
        self.save_interval = save_interval
        self.clock = clock

    def start(
        self,
        repository: str,
        branch: str,
        sources: Sequence[ImportSource],
        *,
        committer: str,
        message: str,
        metadata: Mapping[str, str] | None,
        commit_view: CommitView,
    ) -> ImportRecord:
        """Check the import, record it and start it in the background; return its record.

        Raises:
            RepositoryNotFoundError: no such repository.
            RepositoryReadOnlyError: the repository is a mirror.
            BranchNotFoundError: no such branch.
            DirtyBranchError: the branch has uncommitted changes.
            InvalidImportTypeError: a source type is unknown.
            InvalidImportSourceError: a source is prohibited or malformed.
            ImportNotSupportedError: the namespace cannot be imported from.
        """
        repo = self.catalog.get_repository(repository)
        if repo.read_only:
            raise RepositoryReadOnlyError(repo.id)
        require_clean(self.catalog, repository, branch)
        validate_sources(repo, sources)
        record = ImportRecord(
            id=new_import_id(),
            repository=repository,
            branch=branch,
            task="",
            update_time=self.clock(),
        )
        self.records.create(repo, record)

        def work() -> dict[str, Any]:
            self._run(repo, record, sources, committer, message, metadata, commit_view)
            return {"import": record.id}

        if self.runner is None:
            name = f"lakemirror-import-{record.id}"
            threading.Thread(target=work, name=name, daemon=True).start()
            return record
        task = self.runner.submit(
            "import",
            repository,
            {"branch": branch, "import": record.id},
            work,
            lambda exc: (500, str(exc)),
        )
        self._update(repo, record.id, lambda r: replace(r, task=task.id))
        return replace(record, task=task.id)

    def _update(
        self, repo: Repository, import_id: str, change: Callable[[ImportRecord], ImportRecord]
    ) -> ImportRecord:
        """Apply ``change`` to the stored record, reading it again whenever it changed.

        Raises:
            ImportNotFoundError: the record is gone (its repository was deleted).
        """
        while True:
            current, raw = self.records.get_raw(repo, import_id)
            updated = change(current)
            if self.records.replace(repo, raw, updated) is not None:
                return updated

    def _run(
        self,
        repo: Repository,
        record: ImportRecord,
        sources: Sequence[ImportSource],
        committer: str,
        message: str,
        metadata: Mapping[str, str] | None,
        commit_view: CommitView,
    ) -> None:
        ingested = [0]
        canceled = threading.Event()
        stop = threading.Event()

        def save() -> None:
            # a thread of its own: progress is saved even while a listing waits on the store
            while not stop.wait(self.save_interval):
                try:
                    saved = self._update(
                        repo,
                        record.id,
                        lambda r: r.with_progress(ingested[0], self.clock()),
                    )
                except Exception as exc:  # the KV failing now and then must not end the import
                    log.warning("cannot save import progress", import_id=record.id, error=str(exc))
                    continue
                if saved.cancel:
                    canceled.set()
                    return

        def progress(count: int) -> None:
            ingested[0] = count
            if canceled.is_set():
                raise ImportCanceledError()

        saver = threading.Thread(target=save, name=f"lakemirror-import-{record.id}-progress")
        saver.daemon = True
        saver.start()
        try:
            self._import(repo, record, sources, committer, message, metadata, commit_view, progress)
        finally:
            stop.set()
            saver.join()

    def _check_cancel(self, repo: Repository, record: ImportRecord) -> None:
        """Stop the import if a cancel came since the last progress save."""
        current, _ = self.records.get_raw(repo, record.id)
        if current.cancel:
            raise ImportCanceledError()

    def _import(
        self,
        repo: Repository,
        record: ImportRecord,
        sources: Sequence[ImportSource],
        committer: str,
        message: str,
        metadata: Mapping[str, str] | None,
        commit_view: CommitView,
        progress: Callable[[int], None],
    ) -> None:
        try:
            result = import_objects(
                self.catalog,
                record.repository,
                record.branch,
                sources,
                committer=committer,
                message=message,
                metadata=metadata,
                progress=progress,
                before_commit=lambda: self._check_cancel(repo, record),
                clock=self.clock,
            )
        except Exception as exc:
            canceled = isinstance(exc, ImportCanceledError)
            error = CANCELED_ERROR if canceled else f"import error: {exc}"
            log.info("import failed", import_id=record.id, error=error)
            self._update(
                repo,
                record.id,
                lambda r: replace(r, completed=False, error=error, update_time=self.clock()),
            )
            return
        view = commit_view(result.commit)
        self._update(
            repo,
            record.id,
            lambda r: replace(
                r,
                completed=True,
                error=None,
                ingested_objects=result.ingested,
                metarange_id=result.commit.metarange_id,
                commit=view,
                update_time=self.clock(),
            ),
        )
        log.info("import committed", import_id=record.id, objects=result.ingested)

    def status(self, repository: str, import_id: str) -> ImportRecord:
        """Return an import's status as clients see it.

        An import whose process died reads as failed: ``import error: <why>``.

        Raises:
            RepositoryNotFoundError: no such repository.
            ImportNotFoundError: no such import in the repository.
        """
        repo = self.catalog.get_repository(repository)
        record, _ = self.records.get_raw(repo, import_id)
        if record.ended or not record.task or self.runner is None:
            return record
        try:
            task = self.runner.store.status(record.task)
        except TaskNotFoundError:
            return replace(record, error="import error: the task running it is gone")
        if task.done and task.error:
            return replace(record, error=f"import error: {task.error}")
        return record

    def cancel(self, repository: str, import_id: str) -> None:
        """Ask a running import to stop; it reads as canceled at once.

        Raises:
            RepositoryNotFoundError: no such repository.
            ImportNotFoundError: no such import in the repository.
            ImportCompletedError: the import already committed.
        """
        repo = self.catalog.get_repository(repository)

        def canceled(r: ImportRecord) -> ImportRecord:
            if r.completed:
                raise ImportCompletedError(f"import {import_id!r} already completed")
            return replace(r, cancel=True, error=CANCELED_ERROR, update_time=self.clock())

        self._update(repo, import_id, canceled)

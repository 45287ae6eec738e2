"""What the layers above the core keep of a repository, removed when it is deleted.

The core deletes a repository's refs, staging, pull requests and metadata itself
(:mod:`mirror.core.deletion`); it cannot import the layers keeping the other records of a
repository instance, so the API registers their cleanups on the catalog it serves. The S3
gateway's multipart uploads are among them: every API process removes them, its gateway enabled
or not, since any process may delete a repository whose uploads another one started.
"""

from __future__ import annotations

import logging
import threading

from mirror.actions.pending import delete_pending
from mirror.actions.runs import RunStore
from mirror.api.hidden import HiddenBranches
from mirror.core.catalog import Catalog
from mirror.core.model import Repository
from mirror.gateway.uploads import UploadStore
from mirror.gc.rules import GCRulesStore
from mirror.imports.records import ImportRecords

__all__ = ["register_repository_cleanups", "resume_deletions_in_background"]

log = logging.getLogger(__name__)


def register_repository_cleanups(catalog: Catalog) -> None:
    """Have ``catalog`` remove the records the API's layers keep of a deleted repository.

    Those are its action runs and pending post-events, imports, hidden-branch marks, GC rules
    and the S3 gateway's multipart uploads in progress (their parts' bytes stay in the storage
    namespace, as the rest of it does). Registering again replaces the cleanups, never adds to them.
    """
    kv = catalog.kv
    runs = RunStore(kv)

    def actions(repo: Repository) -> None:
        delete_pending(kv, repo)  # first: a pending event would record a run again
        runs.delete_repository(repo)

    catalog.add_repository_cleanup("action runs", actions)
    catalog.add_repository_cleanup("imports", ImportRecords(kv).delete_repository)
    catalog.add_repository_cleanup("hidden branches", HiddenBranches(kv).delete_repository)
    catalog.add_repository_cleanup("gc rules", GCRulesStore(kv).delete)
    catalog.add_repository_cleanup("multipart uploads", UploadStore(kv).delete_repository)


def resume_deletions_in_background(catalog: Catalog) -> threading.Thread:
    """Finish, in a thread of its own, the repository deletions failures left half-done.

    A server does it when it starts, without making its start wait for a large leftover.
    """

    def resume() -> None:
        try:
            finished = catalog.resume_deletions()
        except Exception as exc:  # the next start (or deletion) tries again
            log.warning("deleted repositories' records not removed: %s", exc)
            return
        if finished:
            log.info("finished removing the records of %d deleted repositories", finished)

    thread = threading.Thread(target=resume, name="resume-deletions", daemon=True)
    thread.start()
    return thread

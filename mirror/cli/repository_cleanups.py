"""What a server process removes with a deleted repository, beside what the core removes itself.

The core deletes a repository's refs, staging, pull requests and metadata
(:mod:`mirror.core.deletion`). Every other record of a repository instance is kept by a layer
above it, which registers its own cleanup: action runs and pending post-events
(:mod:`mirror.actions.runs`), imports (:mod:`mirror.imports.records`), GC rules
(:mod:`mirror.gc.rules`), hidden-branch marks (:mod:`mirror.api.hidden`) and the S3 gateway's
multipart uploads (:mod:`mirror.gateway.uploads`). Only the process that assembles those layers
knows them all, so it registers them here. Every server process registers every one, its gateway
enabled or not, since any process may delete a repository whose uploads another one started.
"""

from __future__ import annotations

import logging
import threading

from mirror.actions.runs import register_runs_cleanup
from mirror.api.hidden import register_hidden_branches_cleanup
from mirror.core.catalog import Catalog
from mirror.gateway.uploads import register_uploads_cleanup
from mirror.gc.rules import register_gc_rules_cleanup
from mirror.imports.records import register_imports_cleanup

__all__ = ["register_repository_cleanups", "resume_deletions_in_background"]

log = logging.getLogger(__name__)


def register_repository_cleanups(catalog: Catalog) -> None:
    """Have ``catalog`` remove every record the layers above the core keep of a deleted repository.

    Registering again replaces the cleanups, never adds to them.
    """
    for register in (
        register_runs_cleanup,
        register_imports_cleanup,
        register_hidden_branches_cleanup,
        register_gc_rules_cleanup,
        register_uploads_cleanup,
    ):
        register(catalog, catalog.kv)


def resume_deletions_in_background(catalog: Catalog) -> threading.Thread:
    """Finish, in a thread of its own, the repository deletions failures left half-done.

    A server does it when it starts, once :func:`register_repository_cleanups` registered every
    cleanup (a resumed deletion runs only the cleanups registered), without making its start wait
    for a large leftover.
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

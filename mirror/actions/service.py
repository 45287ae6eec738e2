"""The actions service: what the catalog calls around its writes (a :class:`Hooks`).

For each event it reads the action files at the event's ``source_ref``, keeps those whose
``on`` filters match, and runs them (pkg/actions/service.go): actions in parallel, the hooks of
one action in order, a hook after a failure only when its ``if`` is ``failure()``. A run is
recorded only when some action matched: its record in the KV (:mod:`mirror.actions.runs`), each
hook's output log in the repository's namespace at
``_lakefs/actions/log/<run>/<hook_run_id>.log`` next to ``run.manifest``.

Pre-event hooks run in the caller's thread and abort the operation on failure. Post-event hooks
run on a small thread pool after the operation returns; their failures are only recorded. A
post-event is kept in the KV until its run is recorded (:mod:`mirror.actions.post_queue`), so one
cut short by a crash runs again in another process: at least once.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from mirror.actions.egress import EgressPolicy, hook_client
from mirror.actions.model import ACTIONS_PREFIX, Action, ActionFileError, ActionHook, parse_action
from mirror.actions.pending import PendingEvent, PendingEvents
from mirror.actions.post_queue import PostQueue, process_name
from mirror.actions.runs import (
    HookRunRecord,
    RunRecord,
    RunStore,
    new_run_id,
)
from mirror.actions.webhook import HookOutcome, call_hook
from mirror.core.committed import CommittedStore, RangeInfo
from mirror.core.hooks import HookAbortError, HookEvent, HookRun
from mirror.core.model import ObjectStat, Repository
from mirror.errors import LakeMirrorError, NotFoundError

if TYPE_CHECKING:
    from mirror.actions.lua_libs import ErrorAnswer
    from mirror.core.catalog import Catalog

__all__ = ["LOG_PREFIX", "ActionsService", "event_payload", "log_key", "lua_action"]

log = logging.getLogger(__name__)

_COMMIT_ID = re.compile(r"[0-9a-f]{64}")
_CACHED_COMMITS = 256
_CACHED_FILES = 1024

LOG_PREFIX = "_lakefs/actions/log/"
"""Where, in a repository's namespace, the hook output logs of each run are."""


def log_key(run_id: str, hook_run_id: str) -> str:
    """Return the namespace key of a hook run's output log."""
    return f"{LOG_PREFIX}{run_id}/{hook_run_id}.log"


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_payload(event: HookEvent, action: str, hook_id: str, when: float) -> dict[str, Any]:
    """Return lakeFS's webhook payload (pkg/actions/event.go): empty fields are left out."""
    payload: dict[str, Any] = {
        "event_type": event.event_type,
        "event_time": _rfc3339(when),
        "action_name": action,
        "hook_id": hook_id,
        "repository_id": event.repository,
    }
    optional: dict[str, Any] = {
        "branch_id": event.branch_id,
        "source_ref": event.source_ref,
        "tag_id": event.tag_id,
        "commit_id": event.commit_id,
        "commit_message": event.commit_message,
        "committer": event.committer,
        "commit_metadata": dict(event.commit_metadata),
        "merge_source": event.merge_source,
    }
    payload.update({k: v for k, v in optional.items() if v})
    return payload


class ActionsService:
    """Runs lakeFS actions for a catalog's events and records the runs.

    Args:
        catalog: Where the action files, the run records and the logs are.
        env_prefix: Only environment variables with this prefix may appear in hook properties.
        environ: The environment substituted into ``{{ ENV.X }}`` (the process's by default).
        post_workers: Threads running post-event hooks.
        mirror_post_hooks: Run post-commit hooks when a mirror's branch advances (the
            replicant moved it once the data arrived); off: hooks never run on mirrors.
        post_lease: Seconds this process's claim on a pending post-event holds unrenewed;
            a dead process's events run elsewhere that long after it died.
        owner: This process's name in those claims (default: host, process ID, random).
        clock: Returns the current time in seconds.
        error_answer: The API's status and message for an error, which lua hooks' ``lakefs``
            calls answer (every error is a 500 without it).
        egress: Where webhook and airflow hooks may connect (:mod:`mirror.actions.egress`);
            anywhere by default.
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        env_prefix: str = "LAKEFSACTION_",
        environ: Mapping[str, str] | None = None,
        post_workers: int = 4,
        mirror_post_hooks: bool = False,
        post_lease: float = 30.0,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
        error_answer: ErrorAnswer | None = None,
        egress: EgressPolicy | None = None,
    ) -> None:
        self.mirror_post_hooks = mirror_post_hooks
        self.error_answer = error_answer
        self.catalog = catalog
        self.runs = RunStore(catalog.kv)
        self.env_prefix = env_prefix
        self.environ = os.environ if environ is None else environ
        self.clock = clock
        self.pending = PendingEvents(catalog.kv, owner or process_name(), post_lease, clock)
        self._post = PostQueue(self.pending, self._run_post, workers=post_workers)
        # one client for every hook: it keeps connections and builds its TLS context once
        self._http = hook_client(egress or EgressPolicy())
        # the actions of a commit never change (its ID hashes its tree), so they are kept; a
        # branch's are read at every event
        self._by_commit: OrderedDict[tuple[str, str], list[Action]] = OrderedDict()
        self._by_file: OrderedDict[tuple[str, str, str, int], Action] = OrderedDict()
        self._lock = threading.Lock()

    # the Hooks protocol

    def pre(self, event: HookEvent) -> HookRun:
        """Run the pre-event hooks of ``event``; raise if one failed.

        Raises:
            HookAbortError: a hook failed (412).
            ActionFileError: an action file is invalid (500; no run recorded).
        """
        run = self.run(event)
        if run is None:
            return HookRun()
        if run.status == "failed":
            failures = tuple(
                (h.hook_run_id, h.action, h.hook_id, h.error)
                for h in run.hooks
                if h.status == "failed"
            )
            raise HookAbortError(event.event_type, run.run_id, failures)
        return HookRun(run.run_id)

    def post(self, event: HookEvent, pre: HookRun | None = None) -> None:
        """Record the new commit on the pre-commit run, then start the post-event hooks.

        When an action matches, the event is recorded as pending in the KV before this
        returns (so before the operation answers), and runs on the post-event pool. The
        actions are read here, at the event's source ref as it is now; those of a commit are
        kept, so the queued run does not read them again.
        """
        try:
            repo = self.catalog.get_repository(event.repository)
        except LakeMirrorError as exc:
            log.warning("%s hooks of %s not run: %s", event.event_type, event.repository, exc)
            return
        if pre is not None and pre.run_id and event.commit_id:
            try:
                if not self.runs.get(repo, pre.run_id).commit_id:
                    self.runs.set_commit(repo, pre.run_id, event.commit_id)
            except LakeMirrorError as exc:
                log.warning("could not record the commit of run %s: %s", pre.run_id, exc)
        if repo.read_only and not self.mirror_post_hooks:
            return
        try:
            actions: list[Action] | None = self.load(event.repository, event.source_ref, repo)
        except ActionFileError as exc:
            log.warning("%s hooks of %s not run: %s", event.event_type, event.repository, exc)
            return
        except LakeMirrorError:
            actions = None  # the queued event reads them again, and runs again while unavailable
        if actions is not None and not any(a.matches(event) for a in actions):
            return  # nothing to run, so nothing to keep pending (most events of most branches)
        self._post.submit(repo, event)

    def start(self) -> None:
        """Run the post-events other processes left pending when they died, from now on.

        A server calls this once it serves; :meth:`post` starts it too.
        """
        self._post.start()

    def close(self, wait: bool = True) -> None:
        """Stop the post-event pool (waiting for the hooks already queued)."""
        self._post.close(wait=wait)
        if wait:
            self._http.close()

    # running

    def _run_post(self, pending: PendingEvent) -> None:
        """Run a pending post-event (raises :class:`UnavailableError` to have it run again)."""
        event = pending.event
        try:
            repo = self.catalog.get_repository(event.repository)
        except NotFoundError:
            return  # deleted since: its events went with it
        if repo.instance_uid != pending.instance_uid:
            return  # deleted and created again under its name
        if repo.read_only and not self.mirror_post_hooks:
            return
        run = self.run(event)
        if run is not None and run.status == "failed":
            log.warning(
                "%s hooks of %s failed, run %s", event.event_type, event.repository, run.run_id
            )

    def load(self, repository: str, ref: str, record: Repository | None = None) -> list[Action]:
        """Return the actions at ``ref`` (every object directly under ``_lakefs_actions/``).

        ``record``: the repository's record, when the caller has just read it.

        Raises:
            ActionFileError: a file is invalid, or two actions share a name.
        """
        # a full commit ID resolves to that commit before any branch or tag of that name
        key = (repository, ref) if _COMMIT_ID.fullmatch(ref) else None
        if key is None:
            head = self._unchanged_head(record or repository, ref)
            if head is not None:
                return self.load(repository, head, record)
        if key is not None:
            with self._lock:
                if key in self._by_commit:
                    self._by_commit.move_to_end(key)
                    return self._by_commit[key]
        derived = None if key is None else self._parents_actions(repository, ref, record)
        actions = self._read(repository, ref) if derived is None else derived
        if key is not None:
            with self._lock:
                self._by_commit[key] = actions
                while len(self._by_commit) > _CACHED_COMMITS:
                    self._by_commit.popitem(last=False)
        return actions

    def _unchanged_head(self, repository: str | Repository, ref: str) -> str | None:
        """Return the head commit of branch ``ref`` if nothing is staged under the actions prefix.

        A branch's actions are then its head commit's, kept per commit: a commit to a branch
        without action files lists them once per head, not at every event. ``None``: ``ref``
        is no branch, or changes to ``_lakefs_actions/`` are staged (the branch is listed).
        """
        try:
            branch = self.catalog.get_branch(repository, ref)
        except LakeMirrorError:
            return None  # a tag, a commit prefix or an expression: resolved by the listing
        staged = self.catalog.staging.iterate(branch.tokens, ACTIONS_PREFIX)
        if next(iter(staged), None) is not None:
            return None
        return branch.commit_id

    def _parents_actions(
        self, repository: str, commit_id: str, record: Repository | None
    ) -> list[Action] | None:
        """Return the kept actions of the first parent of ``commit_id`` if its tree has them too.

        Every key under ``_lakefs_actions/`` lies in a range whose key span meets the prefix's,
        so two trees listing the same such ranges (range IDs hash their records) hold the same
        action files; when the ranges differ, their records under the prefix are compared. A
        commit that changed nothing there is not listed again. ``None``: the parent's actions
        are not kept, or the action files differ (the commit is listed).
        """
        try:
            repo = self.catalog.get_repository(record or repository)
            commit = self.catalog.get_commit(repo, commit_id)
            if not commit.parents:
                return None
            with self._lock:
                kept = self._by_commit.get((repository, commit.parents[0]))
            if kept is None:
                return None
            parent = self.catalog.get_commit(repo, commit.parents[0])
            store = self.catalog.committed(repo)
            mine = _ranges_meeting_actions(store.read_metarange(commit.metarange_id))
            theirs = _ranges_meeting_actions(store.read_metarange(parent.metarange_id))
            if mine != theirs:
                # a small repository is one range, changed by every commit: compare the records
                if _action_records(store, mine) != _action_records(store, theirs):
                    return None
        except LakeMirrorError:
            return None
        return kept

    def _parse(self, repository: str, ref: str, obj: ObjectStat) -> Action:
        # an object version's bytes never change: its address and checksum name them
        key = (obj.path, obj.physical_address, obj.entry.checksum, obj.entry.size)
        with self._lock:
            found = self._by_file.get(key)
            if found is not None:
                self._by_file.move_to_end(key)
                return found
        action = parse_action(obj.path, self.catalog.read_object(repository, ref, obj.path))
        with self._lock:
            self._by_file[key] = action
            while len(self._by_file) > _CACHED_FILES:
                self._by_file.popitem(last=False)
        return action

    def _read(self, repository: str, ref: str) -> list[Action]:
        actions: list[Action] = []
        after = ""
        while True:
            page = self.catalog.list_objects(
                repository, ref, ACTIONS_PREFIX, after=after, amount=1000, delimiter="/"
            )
            for obj in page.objects:
                actions.append(self._parse(repository, ref, obj))
            if not page.has_more:
                break
            after = page.next_offset
        names: set[str] = set()
        for action in actions:
            if action.name in names:
                raise ActionFileError(
                    f"action file {action.source!r}: action name {action.name!r} is not unique"
                )
            names.add(action.name)
        return actions

    def run(self, event: HookEvent) -> RunRecord | None:
        """Run the actions ``event`` matches and record the run (``None``: nothing matched).

        Raises:
            ActionFileError: an action file is invalid (no run recorded).
        """
        matched = [a for a in self.load(event.repository, event.source_ref) if a.matches(event)]
        if not matched:
            return None
        run_id = new_run_id()
        start = self.clock()
        if len(matched) == 1:
            results = [self._run_action(event, run_id, 0, matched[0])]
        else:
            with ThreadPoolExecutor(len(matched), thread_name_prefix="hooks") as pool:
                futures = [
                    pool.submit(self._run_action, event, run_id, i, a)
                    for i, a in enumerate(matched)
                ]
                results = [f.result() for f in futures]
        hooks = tuple(h for action_hooks in results for h in action_hooks)
        failed = any(h.status == "failed" for h in hooks)
        record = RunRecord(
            run_id=run_id,
            repository=event.repository,
            event_type=event.event_type,
            branch=event.branch_id,
            source_ref=event.source_ref,
            commit_id=event.commit_id,
            start_time=_rfc3339(start),
            end_time=_rfc3339(self.clock()),
            status="failed" if failed else "completed",
            hooks=hooks,
        )
        repo = self.catalog.get_repository(event.repository)
        self.runs.save(repo, record)
        if not self._still_there(repo):
            # deleted while the hooks ran: its cleanup may have come before this record
            self.runs.delete_repository(repo)
        self._write(event.repository, f"{LOG_PREFIX}{run_id}/run.manifest", _manifest(record))
        return record

    def _still_there(self, repo: Repository) -> bool:
        """Return whether ``repo``'s instance still exists (``True`` when that is unknown)."""
        try:
            return self.catalog.get_repository(repo.id).instance_uid == repo.instance_uid
        except NotFoundError:
            return False
        except LakeMirrorError:
            return True

    def _run_action(
        self, event: HookEvent, run_id: str, index: int, action: Action
    ) -> list[HookRunRecord]:
        out: list[HookRunRecord] = []
        failed = False
        for j, hook in enumerate(action.hooks):
            hook_run_id = f"{index:04d}_{j:04d}"
            start = self.clock()
            wanted = failed if hook.condition == "failure()" else not failed
            if not wanted:
                out.append(
                    HookRunRecord(hook_run_id, action.name, hook.id, _rfc3339(start), "", "skipped")
                )
                continue
            if hook.type == "lua":
                outcome = self._call_lua(event, run_id, action, hook, start)
            else:
                payload = event_payload(event, action.name, hook.id, start)
                outcome = call_hook(
                    hook,
                    payload,
                    env_prefix=self.env_prefix,
                    environ=self.environ,
                    client=self._http,
                )
            self._write(event.repository, log_key(run_id, hook_run_id), outcome.log.encode())
            status = "failed" if outcome.error else "completed"
            failed = failed or bool(outcome.error)
            out.append(
                HookRunRecord(
                    hook_run_id,
                    action.name,
                    hook.id,
                    _rfc3339(start),
                    _rfc3339(self.clock()),
                    status,
                    outcome.error,
                )
            )
        return out

    def _call_lua(
        self, event: HookEvent, run_id: str, action: Action, hook: ActionHook, start: float
    ) -> HookOutcome:
        """Run a lua hook (lupa is imported only here, when a lua hook runs)."""
        from mirror.actions.lua import ScriptNotFoundError, call_lua_hook
        from mirror.actions.lua_libs import CatalogClient, libraries, unmapped

        def read_script(path: str) -> str:
            try:
                data = self.catalog.read_object(event.repository, event.source_ref, path)
            except NotFoundError:
                raise ScriptNotFoundError(404) from None
            except LakeMirrorError:
                raise ScriptNotFoundError(500) from None
            return data.decode("utf-8", "surrogateescape")

        return call_lua_hook(
            hook,
            lua_action(self.catalog, event, action.name, hook.id, run_id, start),
            read_script=read_script,
            libraries=libraries(
                CatalogClient(self.catalog, event.repository, self.error_answer or unmapped)
            ),
            username=event.committer,
            env_prefix=self.env_prefix,
            environ=self.environ,
        )

    def _write(self, repository: str, key: str, data: bytes) -> None:
        try:
            repo = self.catalog.get_repository(repository)
            self.catalog.block_store(repo).put(key, data)
        except LakeMirrorError as exc:
            # the run is recorded in the KV all the same; only its output is lost
            log.warning("could not write %s of %s: %s", key, repository, exc)


_ACTIONS_END = ACTIONS_PREFIX[:-1] + chr(ord(ACTIONS_PREFIX[-1]) + 1)
"""The first key after every key under ``_lakefs_actions/``."""


def _ranges_meeting_actions(ranges: list[RangeInfo]) -> list[str]:
    """Return the IDs of the ranges whose key span meets the ``_lakefs_actions/`` prefix."""
    return [r.id for r in ranges if r.min_key < _ACTIONS_END and r.max_key >= ACTIONS_PREFIX]


def _action_records(store: CommittedStore, range_ids: list[str]) -> list[tuple[str, str]]:
    """Return the key and identity of every record under ``_lakefs_actions/`` in those ranges.

    An identity hashes the object's checksum, size and metadata, so equal lists mean equal
    action files.
    """
    found: list[tuple[str, str]] = []
    for rid in range_ids:
        rows = store.read_rows(rid)
        keys = rows.keys
        first = bisect.bisect_left(keys, ACTIONS_PREFIX)
        end = bisect.bisect_left(keys, _ACTIONS_END, first)
        found.extend((keys[i], rows.identity(i)) for i in range(first, end))
    return found


def lua_action(
    catalog: Catalog, event: HookEvent, action: str, hook_id: str, run_id: str, when: float
) -> dict[str, Any]:
    """Return a lua hook's global ``action``: lakeFS's hook record (pkg/actions/lua.go).

    Its string fields are always there (``""`` when the event has none), as in lakeFS;
    ``commit`` has the event's message, committer and metadata, and the stored commit's
    parents, meta-range and date once the commit exists. ``merge_source`` is set for merges.
    """
    commit: dict[str, Any] = {
        "message": event.commit_message,
        "committer": event.committer,
        "metadata": dict(event.commit_metadata),
        "meta_range_id": "",
        "creation_date": "",
        "version": 0,
        "parents": [],
    }
    namespace = ""
    try:
        namespace = catalog.get_repository(event.repository).storage_namespace
        if event.commit_id:
            found = catalog.get_commit(event.repository, event.commit_id)
            commit.update(
                message=event.commit_message or found.message,
                committer=event.committer or found.committer,
                metadata=dict(event.commit_metadata or found.metadata),
                meta_range_id=found.metarange_id,
                creation_date=_rfc3339(found.creation_date),
                version=found.version,
                parents=list(found.parents),
            )
    except LakeMirrorError:
        pass  # not stored yet (a pre-merge's commit): the event's fields are all there is
    record: dict[str, Any] = {
        "action_name": action,
        "hook_id": hook_id,
        "run_id": run_id,
        "pre_run_id": "",
        "event_type": event.event_type,
        "event_time": _rfc3339(when),
        "commit_id": event.commit_id,
        "branch_id": event.branch_id,
        "source_ref": event.source_ref,
        "tag_id": event.tag_id,
        "repository_id": event.repository,
        "storage_namespace": namespace,
        "commit": commit,
    }
    if event.merge_source:
        record["merge_source"] = event.merge_source
    return record


def _manifest(run: RunRecord) -> bytes:
    doc = asdict(run)
    return json.dumps(doc, indent=2).encode()

"""The events the catalog announces around its writes, and what runs hooks on them.

lakeFS runs "actions" (pkg/actions) on its graveler events: a pre-event hook runs before the
operation takes effect and may abort it; a post-event hook runs after it and may not. The core
only describes the event (:class:`HookEvent`) and calls a :class:`Hooks` implementation;
reading action files, calling webhooks and recording runs live outside the core
(:mod:`mirror.actions`). :class:`NoHooks` is the default: nothing runs.

A failing pre-hook raises :class:`HookAbortError`, whose message is lakeFS's exactly (its web UI
and clients parse it) and which maps to 412.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, Protocol

from mirror.core.errors import LakeFSText
from mirror.errors import PreconditionFailedError

__all__ = [
    "EVENT_TYPES",
    "HookAbortError",
    "HookEvent",
    "HookRun",
    "Hooks",
    "NoHooks",
]

EVENT_TYPES = (
    "prepare-commit",
    "pre-commit",
    "post-commit",
    "pre-merge",
    "post-merge",
    "pre-create-branch",
    "post-create-branch",
    "pre-delete-branch",
    "post-delete-branch",
    "pre-create-tag",
    "post-create-tag",
    "pre-delete-tag",
    "post-delete-tag",
    "pre-revert",
    "post-revert",
    "pre-cherry-pick",
    "post-cherry-pick",
)
"""Every event type lakeFS names (pkg/graveler/graveler.go), in its order."""


@dataclass(frozen=True)
class HookEvent:
    """One event of a repository, as lakeFS's hook record describes it.

    Attributes:
        event_type: One of :data:`EVENT_TYPES`, e.g. ``"pre-commit"``.
        repository: The repository's name.
        branch_id: The branch the event is about (the destination of a merge), or ``""``.
        source_ref: The ref the action files are read at.
        tag_id: The tag of a tag event, or ``""``.
        commit_id: The commit of the event (new commit, merge commit, tagged commit), or ``""``.
        commit_message: The new commit's message (commit and merge events).
        committer: The new commit's committer (commit and merge events).
        commit_metadata: The new commit's metadata (commit and merge events).
        merge_source: The source ref of a merge as the caller wrote it, or ``""``.
    """

    event_type: str
    repository: str
    branch_id: str = ""
    source_ref: str = ""
    tag_id: str = ""
    commit_id: str = ""
    commit_message: str = ""
    committer: str = ""
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    merge_source: str = ""

    def as_post(self, **changes: str) -> HookEvent:
        """Return the matching ``post-`` event of a ``pre-`` event, with ``changes`` applied."""
        name = self.event_type.removeprefix("pre-")
        return replace(self, event_type=f"post-{name}", **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class HookRun:
    """What a pre-event call returns: the run it recorded, if any action matched.

    Attributes:
        run_id: The run's ID, or ``""`` when no action matched (nothing was recorded).
    """

    run_id: str = ""


class HookAbortError(LakeFSText, PreconditionFailedError):
    """A pre-event hook failed, so the operation was not done (412).

    The message is lakeFS's (pkg/graveler/errors.go ``HookAbortError`` over a multierror), see
    :func:`abort_message`. An operation that wraps it (a merge)
    puts its prefix before it.

    Attributes:
        event_type: The event whose hooks failed.
        run_id: The run recording the failure.
        failures: ``(hook_run_id, action name, hook id, cause)`` of each failed hook.
    """

    lakefs_text: ClassVar[str] = ""

    def __init__(
        self,
        event_type: str,
        run_id: str,
        failures: tuple[tuple[str, str, str, str], ...],
        prefix: str = "",
    ) -> None:
        super().__init__(prefix + abort_message(event_type, run_id, failures))
        self.event_type = event_type
        self.run_id = run_id
        self.failures = failures
        self.prefix = prefix

    def with_prefix(self, prefix: str) -> HookAbortError:
        """Return the same abort with ``prefix`` (e.g. ``"update branch main: "``) before it."""
        return HookAbortError(self.event_type, self.run_id, self.failures, prefix + self.prefix)

    def __reduce__(
        self,
    ) -> tuple[type[HookAbortError], tuple[str, str, tuple[tuple[str, str, str, str], ...], str]]:
        return (type(self), (self.event_type, self.run_id, self.failures, self.prefix))


def abort_message(
    event_type: str, run_id: str, failures: tuple[tuple[str, str, str, str], ...]
) -> str:
    """Return lakeFS's text for failed pre-event hooks (Go's multierror format).

    Args:
        event_type: The event, e.g. ``"pre-merge"``.
        run_id: The run recording the failure.
        failures: ``(hook_run_id, action name, hook id, cause)`` of each failed hook.
    """
    count = len(failures)
    head = "1 error occurred" if count == 1 else f"{count} errors occurred"
    lines = "".join(
        f"\t* hook run id '{hid}' failed on action '{action}' hook '{hook}': {cause}\n"
        for hid, action, hook, cause in failures
    )
    return f"{event_type} hook aborted, run id '{run_id}': {head}:\n{lines}\n"


class Hooks(Protocol):
    """Runs the hooks of the actions an event matches (lakeFS's ``actions.Service``)."""

    def pre(self, event: HookEvent) -> HookRun:
        """Run the pre-event hooks of ``event`` now and record the run.

        Raises:
            HookAbortError: a hook failed; the caller must not do the operation.
            LakeMirrorError: an action file is invalid (answered 500; no run is recorded).
        """
        ...

    def post(self, event: HookEvent, pre: HookRun | None = None) -> None:
        """Start the post-event hooks of ``event`` and return without waiting for them.

        ``pre`` is the run of the matching pre-event: a pre-commit run gets the new commit's ID.
        Failures are only recorded in the run; nothing is raised.
        """
        ...


class NoHooks:
    """Hooks that never run: the catalog's default, and what ``actions.enabled=false`` uses."""

    def pre(self, event: HookEvent) -> HookRun:
        """Return an empty run."""
        return HookRun()

    def post(self, event: HookEvent, pre: HookRun | None = None) -> None:
        """Do nothing."""

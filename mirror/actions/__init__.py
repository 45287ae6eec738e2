"""lakeFS actions: hooks that run on repository events, their run records and their outputs.

:class:`ActionsService` is the :class:`~mirror.core.hooks.Hooks` the server's catalog calls;
:mod:`mirror.actions.model` parses action files, :mod:`mirror.actions.webhook` calls hooks and
:mod:`mirror.actions.runs` keeps run records in the KV, :mod:`mirror.actions.pending` the
post-events not yet run to the end, which :mod:`mirror.actions.post_queue` runs (and takes
over from dead processes).
"""

from mirror.actions.model import Action, ActionFileError, ActionHook, parse_action
from mirror.actions.pending import PendingEvent, PendingEvents
from mirror.actions.post_queue import PostQueue
from mirror.actions.runs import HookRunRecord, RunNotFoundError, RunRecord, RunStore
from mirror.actions.service import ActionsService

__all__ = [
    "Action",
    "ActionFileError",
    "ActionHook",
    "ActionsService",
    "HookRunRecord",
    "PendingEvent",
    "PendingEvents",
    "PostQueue",
    "RunNotFoundError",
    "RunRecord",
    "RunStore",
    "parse_action",
]

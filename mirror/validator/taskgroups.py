"""Running a validation's concurrent requests, with the first failure raised as it is."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

__all__ = ["in_task_group"]


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def in_task_group(spawn: Callable[[anyio.abc.TaskGroup], Coroutine[Any, Any, None]]) -> None:
    """Run ``spawn(group)`` inside a task group; raise the first failure of a task as it is.

    Callers of the validator (the replicant) tell transient store errors apart by type, which an
    exception group would hide.
    """
    try:
        async with anyio.create_task_group() as group:
            await spawn(group)
    except BaseExceptionGroup as exc:
        if exc.subgroup(lambda e: not isinstance(e, Exception)) is not None:
            raise
        raise first_error(exc) from None

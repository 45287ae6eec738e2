"""Commit and merge through the server's asynchronous calls when it offers them.

When ``GET /config`` advertises ``capabilities_config.async_ops``, a commit or merge starts as a
task (``POST …/async``, answered at once) and its status is polled with backoff, with a spinner
on a terminal, until it completes. The result, and any error, are then exactly what the
synchronous call answers: the error is rebuilt from the status's ``status_code`` and message, as
lakectl did. A server that does not advertise them (an older one, or ``server.async_ops:
false``) gets the synchronous call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from mirror.cli.context import Context
from mirror.cli.progress import Spinner
from mirror.client.client import LakeFSClient, error_for
from mirror.client.errors import CLIError, UnavailableError

__all__ = [
    "FIRST_POLL",
    "LONGEST_POLL",
    "OWNER_GONE_STATUS",
    "UNREACHABLE_FOR",
    "advertises_async",
    "commit",
    "merge",
    "wait_for_task",
]

JSON = dict[str, Any]

FIRST_POLL = 0.05
"""Seconds before the first status request; each wait is 1.5 times the last."""
LONGEST_POLL = 1.0
"""The longest wait between two status requests."""
OWNER_GONE_STATUS = 408
"""A task's status code when the server process running it stopped."""
UNREACHABLE_FOR = 60.0
"""Seconds the status may stay unreachable (503, no connection) before the command gives up."""


def _seg(value: str) -> str:
    return quote(value, safe="")


def advertises_async(client: LakeFSClient) -> bool:
    """Return whether the server advertises asynchronous commit and merge.

    Any failure to read ``/config`` means no: the synchronous call then reports the problem as
    it always does.
    """
    try:
        config = client.get_json("/config")
    except CLIError:
        return False
    capabilities = config.get("capabilities_config") if isinstance(config, dict) else None
    return isinstance(capabilities, dict) and capabilities.get("async_ops") is True


def _task_error(status: int, message: str) -> CLIError:
    """Return the error the synchronous call would have raised for ``status`` and ``message``.

    408 means the server process running the task stopped: the synchronous call would have
    lost its connection, so it ends the same way (unreachable, exit code 7).
    """
    reason = f"{status} {httpx.codes.get_reason_phrase(status)}".strip()
    text = f"{message} ({reason})" if message else reason
    if status == OWNER_GONE_STATUS:
        return UnavailableError(text, status=status)
    return error_for(status, text)


def wait_for_task(
    client: LakeFSClient,
    status_path: str,
    spinner: Spinner,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> JSON:
    """Poll a task's status until it completes; return its result.

    Raises:
        CLIError: the task failed (the synchronous call's error, by its ``status_code``), or
            the status could not be read (unreachable for :data:`UNREACHABLE_FOR` seconds).
    """
    delay = FIRST_POLL
    unreachable_since: float | None = None
    while True:
        try:
            status = client.get_json(status_path)
        except UnavailableError:
            # a replica restarting; any other one answers the same status
            now = clock()
            unreachable_since = unreachable_since if unreachable_since is not None else now
            if now - unreachable_since >= UNREACHABLE_FOR:
                raise
        else:
            unreachable_since = None
            if status.get("completed"):
                error = status.get("error")
                if error is not None or status.get("status_code"):
                    message = error.get("message", "") if isinstance(error, dict) else ""
                    raise _task_error(int(status.get("status_code") or 500), message)
                result: JSON = status.get("result") or {}
                return result
        spinner.tick()
        sleep(delay)
        delay = min(delay * 1.5, LONGEST_POLL)


def _spinner(ctx: Context, verb: str) -> Spinner:
    return Spinner(verb, ctx.stderr, enabled=ctx.stderr.isatty() and not ctx.output.json)


def commit(
    ctx: Context,
    repo: str,
    branch: str,
    message: str,
    metadata: Mapping[str, str],
    *,
    allow_empty: bool = False,
) -> JSON:
    """Commit a branch's staged changes (asynchronously when offered); return the commit."""
    client = ctx.client
    if not advertises_async(client):
        return client.commit(repo, branch, message, metadata, allow_empty=allow_empty)
    base = f"/repositories/{_seg(repo)}/branches/{_seg(branch)}/commits/async"
    body = {"message": message, "metadata": dict(metadata), "allow_empty": allow_empty}
    task = client.request("POST", base, json=body).json()
    with _spinner(ctx, "committing") as spinner:
        return wait_for_task(client, f"{base}/{_seg(task['id'])}/status", spinner)


def merge(
    ctx: Context,
    repo: str,
    source: str,
    destination: str,
    *,
    message: str = "",
    metadata: Mapping[str, str] | None = None,
    strategy: str | None = None,
    allow_empty: bool = False,
    squash: bool = False,
) -> JSON:
    """Merge ``source`` into ``destination`` (asynchronously when offered); return the result."""
    client = ctx.client
    if not advertises_async(client):
        return client.merge(
            repo,
            source,
            destination,
            message=message,
            metadata=metadata,
            strategy=strategy,
            allow_empty=allow_empty,
            squash=squash,
        )
    body: JSON = {"allow_empty": allow_empty, "squash_merge": squash}
    if message:
        body["message"] = message
    if metadata:
        body["metadata"] = dict(metadata)
    if strategy:
        body["strategy"] = strategy
    base = f"/repositories/{_seg(repo)}/refs/{_seg(source)}/merge/{_seg(destination)}/async"
    task = client.request("POST", base, json=body).json()
    with _spinner(ctx, "merging") as spinner:
        return wait_for_task(client, f"{base}/{_seg(task['id'])}/status", spinner)

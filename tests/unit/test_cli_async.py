"""The CLI's polling of asynchronous tasks, over an in-memory HTTP transport.

What a finished task's status turns into (the synchronous call's error and exit code), the
backoff between polls, riding out a replica that is briefly unreachable, and the spinner.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mirror.cli.async_ops import (
    FIRST_POLL,
    LONGEST_POLL,
    UNREACHABLE_FOR,
    advertises_async,
    wait_for_task,
)
from mirror.cli.progress import Spinner
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig
from mirror.client.errors import (
    CLIError,
    ConflictError,
    ExitCode,
    RejectedError,
    UnavailableError,
)

STATUS = "/repositories/r/branches/main/commits/async/CA1/status"


def client_answering(answers: Iterator[httpx.Response | Exception]) -> LakeFSClient:
    def handle(request: httpx.Request) -> httpx.Response:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    config = ClientConfig("http://lake.test/api/v1", "AKIAEXAMPLE", "secret")
    return LakeFSClient(config, transport=httpx.MockTransport(handle))


def status(completed: bool, **fields: Any) -> httpx.Response:
    body = {"task_id": "CA1", "completed": completed, "update_time": "2026-01-01T00:00:00Z"}
    return httpx.Response(200, json={**body, **fields})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def wait(client: LakeFSClient, clock: Clock, spinner: Spinner | None = None) -> dict[str, Any]:
    quiet = spinner or Spinner("committing", io.StringIO(), enabled=False)
    return wait_for_task(client, STATUS, quiet, sleep=clock.sleep, clock=lambda: clock.now)


def test_polls_with_backoff_until_done_and_returns_the_result() -> None:
    clock = Clock()
    answers = iter([status(False)] * 12 + [status(True, result={"id": "c1"})])
    assert wait(client_answering(answers), clock) == {"id": "c1"}
    assert clock.slept[0] == FIRST_POLL
    assert all(b >= a for a, b in zip(clock.slept, clock.slept[1:], strict=False))
    assert max(clock.slept) == LONGEST_POLL


@pytest.mark.parametrize(
    ("code", "message", "error", "exit_code"),
    [
        (409, "conflict found: 1 path(s): 'f'", ConflictError, ExitCode.CONFLICT),
        (400, "uncommitted changes (dirty branch): x", RejectedError, ExitCode.REJECTED),
        (408, "task expired: server instance i stopped", UnavailableError, ExitCode.UNAVAILABLE),
        (500, "internal server error", CLIError, ExitCode.ERROR),
    ],
)
def test_a_failed_task_raises_the_synchronous_calls_error(
    code: int, message: str, error: type[CLIError], exit_code: ExitCode
) -> None:
    failed = status(True, error={"message": message}, status_code=code)
    with pytest.raises(CLIError) as caught:
        wait(client_answering(iter([failed])), Clock())
    assert type(caught.value) is error and caught.value.code == exit_code
    reason = httpx.codes.get_reason_phrase(code)
    assert caught.value.message == f"{message} ({code} {reason})"
    assert caught.value.status == code


def test_rides_out_an_unreachable_replica_but_not_forever() -> None:
    clock = Clock()
    refused = httpx.ConnectError("connection refused")
    answers = iter([refused, httpx.Response(503, json={"message": "busy"}), status(True)])
    assert wait(client_answering(answers), clock) == {}

    clock = Clock()
    with pytest.raises(UnavailableError):
        wait(client_answering(iter([refused] * 1000)), clock)
    assert UNREACHABLE_FOR <= clock.now < UNREACHABLE_FOR + LONGEST_POLL + 1


def test_a_missing_task_is_not_retried() -> None:
    gone = httpx.Response(404, json={"message": "not found: no task 'CA1'"})
    with pytest.raises(CLIError) as caught:
        wait(client_answering(iter([gone])), Clock())
    assert caught.value.code == ExitCode.NOT_FOUND


def test_spinner_draws_while_waiting_and_erases_its_line() -> None:
    drawn = io.StringIO()
    spinner = Spinner("merging", drawn, enabled=True, clock=iter([0.0, 0.5, 1.0]).__next__)
    with spinner:
        wait(client_answering(iter([status(False), status(False), status(True)])), Clock(), spinner)
    assert drawn.getvalue() == "\rmerging | 0.5s\x1b[K\rmerging / 1.0s\x1b[K\r\x1b[K"
    silent = io.StringIO()
    with Spinner("merging", silent, enabled=False) as off:
        wait(client_answering(iter([status(False), status(True)])), Clock(), off)
    assert silent.getvalue() == ""


@pytest.mark.parametrize(
    ("answer", "advertised"),
    [
        (httpx.Response(200, json={"capabilities_config": {"async_ops": True}}), True),
        (httpx.Response(200, json={"capabilities_config": {"async_ops": False}}), False),
        (httpx.Response(200, json={"version_config": {"version": "1.50.0"}}), False),
        (httpx.Response(401, json={"message": "error authenticating request"}), False),
    ],
)
def test_async_is_used_only_where_advertised(answer: httpx.Response, advertised: bool) -> None:
    assert advertises_async(client_answering(iter([answer]))) is advertised

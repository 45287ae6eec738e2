"""The request-ID middleware and its access events, in process."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mirror.httputil.request_log import ACCESS_EVENT, RequestLogMiddleware, note_user
from mirror.logging import REDACTED, get_logger


def signed_in(request: Request) -> PlainTextResponse:
    note_user("jane")  # a sync endpoint runs on a worker thread
    get_logger("mirror.test").info("inside", token="t0k3n")
    return PlainTextResponse("ok")


async def anonymous(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok", status_code=401, headers={"X-Request-ID": "spoofed"})


def broken(request: Request) -> PlainTextResponse:
    raise RuntimeError("boom")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def client() -> httpx.AsyncClient:
    app = Starlette(
        routes=[Route("/in", signed_in), Route("/anon", anonymous), Route("/broken", broken)]
    )
    app.add_middleware(RequestLogMiddleware)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


@pytest.mark.anyio
async def test_request_id_is_honoured_or_generated() -> None:
    with structlog.testing.capture_logs() as logs:
        async with client() as http:
            given = await http.get("/in?password=hunter2", headers={"X-Request-ID": "abc-1"})
            fresh = await http.get("/anon")
            invalid = await http.get("/anon", headers={"X-Request-ID": "x" * 129})
    assert given.headers["X-Request-ID"] == "abc-1"
    assert fresh.headers.get_list("X-Request-ID") == [fresh.headers["X-Request-ID"]]
    assert fresh.headers["X-Request-ID"] != "spoofed"
    assert len(invalid.headers["X-Request-ID"]) == 32
    inside, *access = logs
    assert inside["event"] == "inside"
    assert [e["event"] for e in access] == [ACCESS_EVENT] * 3
    first = access[0]
    assert (first["method"], first["path"], first["status"]) == ("GET", "/in", 200)
    assert first["user_id"] == "jane"
    assert "user_id" not in access[1] and access[1]["status"] == 401
    assert "hunter2" not in json.dumps(logs, default=str)


@pytest.mark.anyio
async def test_unhandled_errors_are_logged_as_500() -> None:
    with structlog.testing.capture_logs() as logs:
        async with client() as http:
            assert (await http.get("/broken")).status_code == 500
    (event,) = [e for e in logs if e["event"] == ACCESS_EVENT]
    assert event["status"] == 500 and event["path"] == "/broken"


def run_logging(fmt: str) -> str:
    script = (
        "from mirror.logging import configure_logging, get_logger\n"
        "import logging, structlog\n"
        f"configure_logging({fmt!r}, 'info')\n"
        "structlog.contextvars.bind_contextvars(request_id='r-1')\n"
        "get_logger('t').info('hello', password='p4ss', nested={'api_token': 'tk9'})\n"
        "get_logger('t').debug('hidden')\n"
        "logging.getLogger('std').warning('from stdlib %s', 'x', extra={'secret': 's3c'})\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout == ""
    return result.stderr


def test_json_lines_carry_context_and_no_secrets() -> None:
    lines = [json.loads(line) for line in run_logging("auto").splitlines()]  # stderr: a pipe
    assert [e["event"] for e in lines] == ["hello", "from stdlib x"]
    assert all(e["request_id"] == "r-1" for e in lines)
    assert lines[0]["password"] == REDACTED
    assert lines[0]["nested"] == {"api_token": REDACTED}
    assert lines[1]["logger"] == "std" and lines[1]["level"] == "warning"


def test_console_lines_are_readable_and_redacted() -> None:
    text = run_logging("console")
    assert "hello" in text and "request_id=r-1" in text
    assert not text.lstrip().startswith("{")
    for secret in ("p4ss", "tk9"):
        assert secret not in text

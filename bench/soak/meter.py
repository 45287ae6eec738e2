"""Every request the soak's load makes: its kind, its status, how long it took, and when.

The load goes through three clients (httpx on the REST API, the official ``lakefs`` SDK, boto3
on the S3 gateway). :meth:`Meter.call` runs one request of any of them and records its outcome,
reading the status from the answer or from the client's exception; a request that got no answer
(connection refused or cut, timed out) has status ``0``. A ``503`` that carries ``Retry-After``
is a deliberate refusal (the server's own "try again later"); any other ``5xx`` is a failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

__all__ = ["NO_ANSWER", "Failed", "Meter", "Request", "percentile"]

T = TypeVar("T")
NO_ANSWER = 0


@dataclass(frozen=True, slots=True)
class Request:
    """One request of the load."""

    kind: str
    """What it was, ``<client>.<operation>`` (``sdk.upload``, ``gw.put``, ``rest.merge``...)."""
    status: int
    """The HTTP status (2xx as answered or ``200`` when the client hides it); 0: no answer."""
    at: float
    """``time.monotonic()`` when it ended."""
    seconds: float
    retry_after: bool = False
    """Whether the answer carried ``Retry-After``."""

    @property
    def ok(self) -> bool:
        """Return whether it succeeded (2xx)."""
        return 200 <= self.status < 300

    @property
    def deliberate_503(self) -> bool:
        """Return whether it is a 503 the server sent on purpose (with ``Retry-After``)."""
        return self.status == 503 and self.retry_after

    @property
    def failure_5xx(self) -> bool:
        """Return whether it is a 5xx other than a deliberate 503."""
        return self.status >= 500 and not self.deliberate_503


class Failed(Exception):
    """A request of the load that did not succeed (already recorded by the :class:`Meter`)."""

    def __init__(self, request: Request, detail: str) -> None:
        super().__init__(f"{request.kind}: {request.status} {detail}")
        self.request = request
        self.detail = detail


def _lower(headers: Mapping[str, Any] | None) -> set[str]:
    return {str(k).lower() for k in (headers or {})}


def outcome(exc: BaseException) -> tuple[int, bool, str] | None:
    """Return ``(status, retry_after, detail)`` of a client's exception, ``None`` if unknown."""
    import botocore.exceptions
    import lakefs.exceptions
    import lakefs_sdk.exceptions
    import urllib3.exceptions

    if isinstance(exc, lakefs.exceptions.ServerException):
        status = int(exc.status_code or 0)
        return status, "retry-after" in _lower(exc.headers), str(exc.body)[:300]
    if isinstance(exc, lakefs_sdk.exceptions.ApiException):
        return int(exc.status or 0), "retry-after" in _lower(exc.headers), str(exc.body)[:300]
    if isinstance(exc, botocore.exceptions.ClientError):
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode", 0))
        headers = meta.get("HTTPHeaders", {})
        return status, "retry-after" in _lower(headers), str(exc)[:300]
    if isinstance(
        exc,
        httpx.TransportError
        | urllib3.exceptions.HTTPError
        | botocore.exceptions.BotoCoreError
        | ConnectionError
        | TimeoutError,
    ):
        return NO_ANSWER, False, f"{type(exc).__name__}: {exc}"[:300]
    return None


class Meter:
    """Record the load's requests (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self.failures: list[tuple[Request, str]] = []
        """Failed requests with what the answer said (its first 300 characters)."""

    def record(self, request: Request, detail: str = "") -> None:
        """Add one request (and its detail, when it failed)."""
        with self._lock:
            self.requests.append(request)
            if not request.ok:
                self.failures.append((request, detail))

    def call(self, kind: str, fn: Callable[[], T], ok_status: int = 200) -> T:
        """Run one request and record it; return its result.

        An ``httpx.Response`` result is recorded with its own status and is returned whatever
        it is; any other result is recorded with ``ok_status``. A client's exception is recorded
        with the status it carries, then raised as :class:`Failed`; an exception of no client (a
        bug) propagates as it is.
        """
        return self._measure(kind, fn, ok_status)[0]

    def http(self, kind: str, fn: Callable[[], httpx.Response], *expected: int) -> httpx.Response:
        """Run one httpx request and return its answer; raise :class:`Failed` unless it is one
        of ``expected`` (default: any 2xx)."""
        response, request = self._measure(kind, fn, 200)
        good = response.status_code in expected if expected else response.is_success
        if not good:
            raise Failed(request, response.text[:300])
        return response

    def _measure(self, kind: str, fn: Callable[[], T], ok_status: int) -> tuple[T, Request]:
        began = time.monotonic()
        try:
            result = fn()
        except Exception as exc:
            found = outcome(exc)
            if found is None:
                raise
            status, retry_after, detail = found
            ended = time.monotonic()
            request = Request(kind, status, ended, ended - began, retry_after)
            self.record(request, detail)
            raise Failed(request, detail) from exc
        ended = time.monotonic()
        if isinstance(result, httpx.Response):
            request = Request(
                kind, result.status_code, ended, ended - began, "retry-after" in result.headers
            )
            self.record(request, "" if request.ok else result.text[:300])
        else:
            request = Request(kind, ok_status, ended, ended - began)
            self.record(request)
        return result, request

    def snapshot(self) -> list[Request]:
        """Return the requests recorded so far."""
        with self._lock:
            return list(self.requests)


def percentile(values: list[float], q: float) -> float | None:
    """Return the ``q``-th percentile (0-100) of ``values`` (nearest rank), ``None`` if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]

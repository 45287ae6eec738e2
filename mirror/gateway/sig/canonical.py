"""What every signer reads from a request: its wire form, encodings, and the request time."""

from __future__ import annotations

import calendar
import functools
import hmac
import time
from dataclasses import dataclass
from email.utils import parsedate_tz
from urllib.parse import quote, unquote

from mirror.gateway.errors import S3Code, S3Error

__all__ = [
    "MAX_SKEW_SECONDS",
    "WireRequest",
    "check_skew",
    "parse_amz_date",
    "parse_http_date",
    "same_text",
    "uri_encode",
]

MAX_SKEW_SECONDS = 15 * 60
"""How far a header-signed request's time may be from the server's, either way (S3's rule)."""

_AMZ_DATE = "%Y%m%dT%H%M%SZ"
_END_OF_9999 = 253402300800.0


@dataclass(frozen=True)
class WireRequest:
    """A request as it came over the wire, before any decoding the signature does not cover.

    Attributes:
        method: The HTTP method, upper case.
        raw_path: The path exactly as sent (percent-encoded, as ASCII text).
        raw_query: The query string exactly as sent, without ``?``.
        headers: Every header as ``(lower-case name, value)``, in order, repeats kept.
    """

    method: str
    raw_path: str
    raw_query: str
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """Return the values of header ``name`` (lower case) joined by ``,``, or ``None``."""
        values = [v for k, v in self.headers if k == name]
        return ",".join(values) if values else None

    def query(self) -> list[tuple[str, str]]:
        """Return the decoded query parameters in order (a bare ``k`` has the value ``""``)."""
        pairs = []
        for part in self.raw_query.split("&"):
            if not part:
                continue
            key, _, value = part.partition("=")
            # S3 reads "+" as itself, not as a space
            pairs.append((unquote(key), unquote(value)))
        return pairs

    def query_value(self, name: str) -> str | None:
        """Return the first value of query parameter ``name``, or ``None``."""
        for key, value in self.query():
            if key == name:
                return value
        return None


def same_text(given: str, expected: str) -> bool:
    """Return whether ``given`` equals ``expected``, in a time independent of where they differ.

    Unlike :func:`hmac.compare_digest` on ``str``, which refuses non-ASCII text, any text
    compares: a signature or digest a client sends may hold any character.
    """
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def uri_encode(text: str, *, keep_slash: bool = False) -> str:
    """Return ``text`` percent-encoded as SigV4 does: only ``A-Za-z0-9-_.~`` kept (and ``/``)."""
    return quote(text, safe="-_.~/" if keep_slash else "-_.~")


def _invalid_date(value: str) -> S3Error:
    return S3Error(
        S3Code.ACCESS_DENIED, f"{S3Code.ACCESS_DENIED.description}: invalid date {value!r}"
    )


def _in_range(seconds: float, value: str) -> float:
    # before 1970 or past 9999 no request is sent, and the time could not be printed back
    if not 0 <= seconds < _END_OF_9999:
        raise _invalid_date(value)
    return seconds


def parse_amz_date(value: str) -> float:
    """Return the epoch seconds of an ISO 8601 basic time (``20130524T000000Z``).

    Raises:
        S3Error: AccessDenied, the value is not such a time (or is before 1970).
    """
    if len(value) == len("20130524T000000Z"):
        # kept per value: the requests signed in one second share it, and parsing costs more
        # than the rest of reading the signature's headers
        return _parse_amz_date_kept(value)
    return _parse_amz_date(value)


@functools.lru_cache(maxsize=1024)
def _parse_amz_date_kept(value: str) -> float:
    return _parse_amz_date(value)


def _parse_amz_date(value: str) -> float:
    try:
        seconds = float(calendar.timegm(time.strptime(value, _AMZ_DATE)))
    except ValueError as exc:
        raise _invalid_date(value) from exc
    return _in_range(seconds, value)


def parse_http_date(value: str) -> float:
    """Return the epoch seconds of an RFC 1123 ``Date`` header.

    Raises:
        S3Error: AccessDenied, the value is not such a date (or is before 1970 or after 9999,
            its zone offset included).
    """
    parsed = parsedate_tz(value)
    if parsed is None:
        raise _invalid_date(value)
    offset = parsed[9] or 0
    try:
        seconds = float(calendar.timegm((*parsed[:6], 0, 0, 0)) - offset)
    except (ValueError, OverflowError) as exc:  # a year before 1 or after 9999
        raise _invalid_date(value) from exc
    return _in_range(seconds, value)


def check_skew(request_time: float, now: float) -> None:
    """Return if ``request_time`` is within :data:`MAX_SKEW_SECONDS` of ``now``.

    Raises:
        S3Error: RequestTimeTooSkewed.
    """
    if abs(request_time - now) > MAX_SKEW_SECONDS:
        raise S3Error(
            S3Code.REQUEST_TIME_TOO_SKEWED,
            f"{S3Code.REQUEST_TIME_TOO_SKEWED.description} (request time "
            f"{time.strftime(_AMZ_DATE, time.gmtime(request_time))}, server time "
            f"{time.strftime(_AMZ_DATE, time.gmtime(now))}, at most {MAX_SKEW_SECONDS} s apart)",
        )

"""SigV4: the ``Authorization`` header and presigned ``X-Amz-*`` query parameters.

The input is a request (:mod:`tests.fuzz.targets.http_input`). :func:`parse_v4` reads its
signature; what it returns is checked in time and verified against the corpus's secret, and the
request then goes through the gateway's whole authentication. Documented refusal:
:class:`~mirror.gateway.errors.S3Error`.
"""

from __future__ import annotations

from mirror.gateway.auth import wire_request
from mirror.gateway.errors import S3Error
from mirror.gateway.sig.v4 import check_time, parse_v4, verify_v4
from tests.fuzz.harness import FUZZ_NOW
from tests.fuzz.targets.http_input import asgi_request, read_input
from tests.fuzz.targets.signed import SECRET, authenticated

__all__ = ["check"]


def check(data: bytes) -> str | None:
    """Parse, time-check and verify the SigV4 signature of ``data``, then authenticate it."""
    wire_in = read_input(data)
    wire = wire_request(asgi_request(wire_in))
    try:
        auth = parse_v4(wire)
        if auth is not None:
            check_time(auth, FUZZ_NOW)
            verify_v4(wire, auth, SECRET)
    except S3Error:
        pass
    return authenticated(wire_in)

"""SigV2: ``Authorization: AWS key:signature`` and presigned ``AWSAccessKeyId``/``Expires`` URLs.

The input is a request (:mod:`tests.fuzz.targets.http_input`). :func:`parse_v2` reads its
signature; what it returns is checked in time and verified against the corpus's secret (for the
bucket its host names, virtual-hosted style), and the request then goes through the gateway's
whole authentication. Documented refusal: :class:`~mirror.gateway.errors.S3Error`.
"""

from __future__ import annotations

from mirror.gateway.auth import _host_bucket, wire_request
from mirror.gateway.errors import S3Error
from mirror.gateway.sig.v2 import check_time_v2, parse_v2, verify_v2
from tests.fuzz.harness import FUZZ_NOW
from tests.fuzz.targets.http_input import asgi_request, read_input
from tests.fuzz.targets.signed import SECRET, SETTINGS, authenticated

__all__ = ["check"]


def check(data: bytes) -> str | None:
    """Parse, time-check and verify the SigV2 signature of ``data``, then authenticate it."""
    wire_in = read_input(data)
    wire = wire_request(asgi_request(wire_in))
    try:
        auth = parse_v2(wire)
        if auth is not None:
            check_time_v2(wire, auth, FUZZ_NOW)
            verify_v2(wire, auth, SECRET, bucket=_host_bucket(wire, SETTINGS))
    except S3Error:
        pass
    return authenticated(wire_in)

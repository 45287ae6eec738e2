"""What the S3 document targets share: one repository in an in-memory catalog, and requests to it.

Repository ``repo`` holds a few objects on ``main``; branches matching ``protected*`` are
protected. Requests are made by the corpus's key (a Writer), as the gateway hands them to an
operation after authenticating them.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator

from mirror.auth.caller import Caller
from mirror.core import Catalog, open_memory
from mirror.core.protection import set_rules
from mirror.gateway.context import GatewayState, S3Request
from tests.fuzz.targets.http_input import WireInput, asgi_request
from tests.fuzz.targets.signed import KEY_ID, SETTINGS, auth_store

__all__ = ["BUCKET", "catalog", "s3_request"]

BUCKET = "repo"


@functools.cache
def catalog() -> Catalog:
    """Return the catalog holding repository :data:`BUCKET`."""
    lake = open_memory()
    lake.create_repository(BUCKET, f"mem://{BUCKET}")
    for path in ("a.txt", "dir/b.csv", "dir/c d.json"):
        lake.upload_object(BUCKET, "main", path, path.encode())
    lake.commit(BUCKET, "main", "objects")
    lake.create_branch(BUCKET, "protected-prod", "main")
    set_rules(lake.kv, lake.get_repository(BUCKET), ["protected*"], None)
    return lake


async def _body(data: bytes) -> AsyncIterator[bytes]:
    for i in range(0, len(data), 4096):
        yield data[i : i + 4096]


def s3_request(method: str, target: str, body: bytes, key: str | None = None) -> S3Request:
    """Return ``method target`` on :data:`BUCKET` with ``body``, made by the corpus's key."""
    auth = auth_store()
    signing = auth.secret_for_signing(KEY_ID)
    wire = WireInput(method.encode(), target.encode(), ((b"host", b"127.0.0.1:8000"),), body)
    return S3Request(
        http=asgi_request(wire),
        state=GatewayState(catalog(), auth, SETTINGS),
        request_id="FUZZREQUEST",
        bucket=BUCKET,
        key=key,
        caller=Caller(auth, signing.user, signing.policies),
        body=_body(body),
        content_length=len(body),
    )

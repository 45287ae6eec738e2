"""DeleteObjects: the ``<Delete>`` document of ``POST /<bucket>?delete``.

The input is the request body. The gateway's operation reads it, checks every key (its ref, its
path, the caller's permission, branch protection) and deletes on an in-memory catalog. Documented
refusal: :class:`~mirror.gateway.errors.S3Error` (``MalformedXML`` for the document; per-key
refusals are ``<Error>`` elements of a 200 answer).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import anyio

from mirror.gateway.bulk import delete_objects
from mirror.gateway.errors import S3Error
from tests.fuzz.targets.s3_request import BUCKET, s3_request
from tests.fuzz.targets.signed import refusal

__all__ = ["check"]


async def _delete(data: bytes) -> bytes:
    response = await delete_objects(s3_request("POST", f"/{BUCKET}?delete", data))
    assert response.status_code == 200, response.status_code
    return bytes(response.body)


def check(data: bytes) -> str | None:
    """Answer DeleteObjects with body ``data``; the answer must be a ``DeleteResult``."""
    try:
        answer = anyio.run(_delete, data)
    except S3Error as err:
        return refusal(err)
    root = ET.fromstring(answer)
    assert root.tag.endswith("DeleteResult"), root.tag
    return None

"""CompleteMultipartUpload: the ``<CompleteMultipartUpload>`` document listing the parts.

The input is the request body. It is read and parsed as the gateway does
(:func:`~mirror.gateway.xml.read_xml`), its parts checked (numbers in ascending order, ETags)
and matched against an upload of two parts (part 1 of 5 MiB, part 2 of 10 bytes). Documented
refusal: :class:`~mirror.gateway.errors.S3Error`.
"""

from __future__ import annotations

import anyio

from mirror.gateway import xml
from mirror.gateway.errors import S3Error
from mirror.gateway.multipart import _chosen_parts, _requested_parts
from mirror.gateway.uploads import Part, parts_digest
from tests.fuzz.targets.s3_request import s3_request
from tests.fuzz.targets.signed import refusal

__all__ = ["PARTS", "PATH", "check"]


PATH = "data/big.bin"
PARTS = {
    1: Part(1, "0123456789abcdef0123456789abcdef", 5 << 20, "mem://repo/p1", 0.0),
    2: Part(2, "fedcba9876543210fedcba9876543210", 10, "mem://repo/p2", 0.0),
}
"""The upload's parts, by number."""


def check(data: bytes) -> str | None:
    """Parse and check a CompleteMultipartUpload body ``data`` against :data:`PARTS`."""
    req = s3_request("POST", f"/repo/main/{PATH}?uploadId=fuzz", data, key=f"main/{PATH}")
    try:
        doc = anyio.run(xml.read_xml, req, "CompleteMultipartUpload")
        wanted = _requested_parts(req, doc, PATH)
        assert len(parts_digest(wanted)) == 64
        chosen = _chosen_parts(req, wanted, PARTS, PATH)
    except S3Error as err:
        return refusal(err)
    assert [p.number for p in chosen] == [n for n, _ in wanted]
    return None

"""A `lakemirror server` process with an embedded KV whose ``s3://`` namespaces live on moto.

For tests of operations only an S3 namespace supports (presigned multipart uploads): the KV
stays SQLite, so the server starts as fast as the embedded one, while repositories created under
:attr:`Server.namespace_root` keep their objects in a fresh bucket of a moto server process.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.integration.harness import Server, running_server
from tests.integration.moto_fixtures import ACCESS_KEY, SECRET_KEY, MotoServer, create_bucket

__all__ = ["s3_namespace_server"]


@contextmanager
def s3_namespace_server(root: Path, moto: MotoServer, s3: Any) -> Iterator[Server]:
    """Run a server (SQLite KV) whose ``s3://`` namespaces reach ``moto``, in a new bucket."""
    bucket = create_bucket(moto, s3)
    env = {
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": moto.url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": moto.region,
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
        "LAKEMIRROR_BLOCKSTORE__S3__MAX_ATTEMPTS": "3",
    }
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJ" + secrets.token_hex(8).upper()[:15],
        secret_access_key=secrets.token_urlsafe(30),
        env=env,
        namespace_root=f"s3://{bucket}/",
    ) as running:
        yield running

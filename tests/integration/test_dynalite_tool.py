"""dynalite, the DynamoDB stand-in of the tests, survives a client that goes away mid-request.

Unpatched, dynalite rethrows the error of a request whose connection is reset before its body
ends, and the whole server exits: a replica killed with SIGKILL in the middle of a write took a
region's KV down with it. ``tests/tools/install.sh`` makes it drop only that request, as
DynamoDB does.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from urllib.parse import urlsplit

from tests.integration.dynalite import running_dynalite


def test_a_request_cut_short_does_not_stop_dynalite(tmp_path: Path) -> None:
    with running_dynalite(tmp_path) as server:
        address = urlsplit(server.url)
        head = (
            "POST / HTTP/1.1\r\n"
            f"Host: {address.netloc}\r\n"
            "Content-Type: application/x-amz-json-1.0\r\n"
            "X-Amz-Target: DynamoDB_20120810.ListTables\r\n"
            "Content-Length: 1000\r\n\r\n"
        )
        with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
            sock.sendall(head.encode() + b'{"Limit":')
            # close with a reset, as the kernel does for a process killed mid-request
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        tables = server.client().list_tables()  # type: ignore[attr-defined]
        assert "TableNames" in tables
        assert server.process.poll() is None

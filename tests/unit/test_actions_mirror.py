"""Post-commit hooks in a mirror's region when its branch advances (``actions.mirror_post_hooks``).

An in-memory catalog holds a source repository and a read-only mirror of it over the same
namespace; the mirror's branch is moved the way the replicant moves it (commit records imported,
then a forced compare-and-swap). A stdlib HTTP server on 127.0.0.1 receives the webhooks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from mirror.actions import ActionsService
from mirror.core import open_memory
from mirror.core.catalog import Catalog


@pytest.fixture
def received() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/ok", bodies
    finally:
        httpd.shutdown()
        httpd.server_close()


def _advance_mirror(catalog: Catalog) -> str:
    """Copy the source's history into the mirror and move its branch; return the head."""
    head = catalog.get_branch("src", "main").commit_id
    for commit in reversed(list(catalog.log("src", "main"))):
        catalog.import_commit("dst", commit, force=True)
    catalog.set_branch_head("dst", "main", head, None, force=True)
    return head


@pytest.mark.parametrize("enabled", [True, False])
def test_mirror_advance_runs_post_commit_hooks_only_when_enabled(
    enabled: bool, received: tuple[str, list[dict[str, Any]]]
) -> None:
    url, bodies = received
    catalog = open_memory()
    catalog.create_repository("src", "mem://shared")
    catalog.create_repository("dst", "mem://shared", read_only=True, mirror_of="src", bare=True)
    action = (
        "name: Arrived\non:\n  post-commit:\nhooks:\n"
        f"  - id: tell\n    type: webhook\n    properties: {{url: '{url}'}}\n"
    )
    catalog.upload_object("src", "main", "_lakefs_actions/arrived.yaml", action.encode())
    service = ActionsService(catalog, mirror_post_hooks=enabled)
    catalog.hooks = service
    commit = catalog.commit("src", "main", "actions", metadata={"k": "v"}).commit
    head = _advance_mirror(catalog)
    service.close(wait=True)
    assert head == commit.id
    mirrored = [b for b in bodies if b["repository_id"] == "dst"]
    assert [b["repository_id"] for b in bodies if b["repository_id"] == "src"] == ["src"]
    if not enabled:
        assert mirrored == []
        assert list(service.runs.list(catalog.get_repository("dst"))) == []
        return
    (body,) = mirrored
    assert (body["event_type"], body["branch_id"]) == ("post-commit", "main")
    assert (body["commit_id"], body["source_ref"]) == (head, head)
    assert (body["commit_message"], body["commit_metadata"]) == ("actions", {"k": "v"})
    (run,) = service.runs.list(catalog.get_repository("dst"))
    assert (run.event_type, run.status, run.commit_id) == ("post-commit", "completed", head)

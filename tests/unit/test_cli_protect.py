"""``lakemirror branch-protect`` writes under ``If-Match`` and never overwrites a concurrent change.

A small HTTP server on 127.0.0.1 plays the rules endpoint and lets another writer change the
rules between the command's read and its write, once.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mirror.cli.main import main


class RulesServer(ThreadingHTTPServer):
    """The rules of one repository, their ETag, and the If-Match headers PUTs carried."""

    def __init__(self, race: int, home: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.home = home  # a HOME without ~/.lakectl.yaml
        self.patterns: list[str] = []
        self.stored = False
        self.if_match: list[str | None] = []
        self.race = race  # PUTs before which another writer adds a pattern "theirs-<n>"

    def etag(self) -> str:
        if not self.stored:
            return ""
        return hashlib.sha256(json.dumps(sorted(self.patterns)).encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: RulesServer

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""

    def _send(self, status: int, body: Any = None, etag: str | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if etag is not None:
            self.send_header("ETag", etag)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        rules = [{"pattern": p} for p in self.server.patterns]
        self._send(200, rules, self.server.etag())

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        wanted = self.headers.get("If-Match")
        self.server.if_match.append(wanted)
        if self.server.race > 0:
            self.server.race -= 1
            theirs = f"theirs-{self.server.race}"
            self.server.patterns = sorted({*self.server.patterns, theirs})
            self.server.stored = True
        if wanted is not None and wanted != self.server.etag():
            self._send(412, {"message": "Precondition failed"})
            return
        self.server.patterns = sorted(r["pattern"] for r in body)
        self.server.stored = True
        self._send(204)


@pytest.fixture
def rules_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RulesServer]:
    server = RulesServer(getattr(request, "param", 0), tmp_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


def _run(server: RulesServer, monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    host, port = server.server_address[:2]
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", f"http://{host!s}:{port}")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("LAKECTL_CONFIG_FILE", raising=False)
    monkeypatch.setenv("HOME", str(server.home))
    return main(["branch-protect", *args])


def test_add_sends_the_etag_it_read(
    rules_server: RulesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(rules_server, monkeypatch, "add", "lakefs://repo", "main") == 0
    # nothing was ever stored: the ETag read was "", which writes only if that is still so
    assert rules_server.if_match == [""]
    first = rules_server.etag()
    assert _run(rules_server, monkeypatch, "add", "lakefs://repo", "dev-*") == 0
    assert rules_server.if_match == ["", first]
    assert rules_server.patterns == ["dev-*", "main"]


@pytest.mark.parametrize("rules_server", [1], indirect=True)
def test_a_concurrent_change_is_read_again_not_overwritten(
    rules_server: RulesServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run(rules_server, monkeypatch, "add", "lakefs://repo", "main") == 0
    assert rules_server.patterns == ["main", "theirs-0"]
    assert len(rules_server.if_match) == 2


@pytest.mark.parametrize("rules_server", [10], indirect=True)
def test_changes_that_keep_racing_end_with_the_conflict_exit_code(
    rules_server: RulesServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(rules_server, monkeypatch, "delete", "lakefs://repo", "theirs-9", "-y") == 4
    assert _run(rules_server, monkeypatch, "add", "lakefs://repo", "main") == 5
    assert "Precondition failed" in capsys.readouterr().err
    assert "main" not in rules_server.patterns

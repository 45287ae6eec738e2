"""The client side of the CLI without a server: configuration, errors, paging, output."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx
import pytest

from mirror.cli.output import Output, format_size
from mirror.cli.progress import Progress
from mirror.client.client import LakeFSClient, error_for
from mirror.client.config import ClientConfig, api_base_url, load_config
from mirror.client.errors import CLIError, ExitCode, NotFoundError, UnavailableError, UsageError


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/api/v1"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000/api/v1"),
        ("localhost:8000", "http://localhost:8000/api/v1"),
        ("https://lake.example/api/v1/", "https://lake.example/api/v1"),
        ("https://lake.example/behind/proxy", "https://lake.example/behind/proxy/api/v1"),
    ],
)
def test_endpoint_gets_scheme_and_api_path(endpoint: str, expected: str) -> None:
    assert api_base_url(endpoint) == expected


def test_invalid_endpoint_is_a_usage_error_without_userinfo() -> None:
    with pytest.raises(UsageError) as caught:
        api_base_url("ftp://user:hunter2@host/x")
    assert "hunter2" not in caught.value.message
    assert caught.value.code == ExitCode.USAGE


def _write(path: Path, endpoint: str, key: str, secret: str) -> Path:
    path.write_text(
        f"server:\n  endpoint_url: {endpoint}\n"
        f"credentials:\n  access_key_id: {key}\n  secret_access_key: {secret}\n"
    )
    return path


def test_config_sources_and_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert load_config(None, {}, home=home) == ClientConfig("http://127.0.0.1:8000/api/v1", "", "")

    _write(home / ".lakectl.yaml", "home:1", "HOMEKEY", "home-secret")
    from_home = load_config(None, {}, home=home)
    assert (from_home.endpoint_url, from_home.access_key_id) == ("http://home:1/api/v1", "HOMEKEY")
    assert from_home.source == home / ".lakectl.yaml"

    named = _write(tmp_path / "named.yaml", "named:2", "NAMEDKEY", "named-secret")
    flag = _write(tmp_path / "flag.yaml", "flag:3", "FLAGKEY", "flag-secret")
    env = {"LAKECTL_CONFIG_FILE": str(named)}
    assert load_config(None, env, home=home).access_key_id == "NAMEDKEY"
    assert load_config(str(flag), env, home=home).access_key_id == "FLAGKEY"

    env["LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"] = "env-secret"
    env["LAKECTL_SERVER_ENDPOINT_URL"] = "https://env:4/api/v1"
    mixed = load_config(None, env, home=home)
    assert mixed == ClientConfig("https://env:4/api/v1", "NAMEDKEY", "env-secret", named)
    assert "env-secret" not in repr(mixed)


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_config(str(tmp_path / "absent.yaml"), {})
    broken = tmp_path / "broken.yaml"
    broken.write_text("credentials:\n  secret_access_key: do-not-print\n\tx: [\n")
    with pytest.raises(UsageError) as caught:
        load_config(str(broken), {})
    assert "not valid YAML" in caught.value.message and "do-not-print" not in caught.value.message
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(UsageError, match="mapping"):
        load_config(str(listed), {})
    nested = tmp_path / "nested.yaml"
    nested.write_text("server:\n  endpoint_url:\n    nested: true\n")
    with pytest.raises(UsageError, match=r"server\.endpoint_url"):
        load_config(str(nested), {})


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, ExitCode.REJECTED),
        (401, ExitCode.AUTH),
        (403, ExitCode.AUTH),
        (404, ExitCode.NOT_FOUND),
        (409, ExitCode.CONFLICT),
        (412, ExitCode.CONFLICT),
        (416, ExitCode.REJECTED),
        (429, ExitCode.UNAVAILABLE),
        (500, ExitCode.ERROR),
        (503, ExitCode.UNAVAILABLE),
    ],
)
def test_statuses_map_to_exit_codes(status: int, code: ExitCode) -> None:
    assert error_for(status, "m").code == code


def _client(handler: httpx.MockTransport) -> LakeFSClient:
    config = ClientConfig("http://lake.test/api/v1", "AKIAJKEY", "secret")
    return LakeFSClient(config, transport=handler)


def test_paginate_follows_next_offset_and_stops_at_limit() -> None:
    ids = [f"b{i:04d}" for i in range(2500)]
    seen: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        after = request.url.params["after"]
        amount = int(request.url.params["amount"])
        seen.append((after, str(amount)))
        start = ids.index(after) + 1 if after else 0
        page = ids[start : start + amount]
        more = start + amount < len(ids)
        body = {
            "pagination": {
                "has_more": more,
                "next_offset": page[-1] if more else "",
                "results": len(page),
                "max_per_page": 1000,
            },
            "results": [{"id": i, "commit_id": "c"} for i in page],
        }
        return httpx.Response(200, json=body)

    with _client(httpx.MockTransport(handler)) as client:
        assert [b["id"] for b in client.list_branches("repo")] == ids
        assert seen == [("", "1000"), ("b0999", "1000"), ("b1999", "1000")]
        seen.clear()
        assert len(list(client.list_branches("repo", limit=1500))) == 1500
        assert seen == [("", "1000"), ("b0999", "500")]


def test_errors_carry_the_server_message_or_the_reason() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/missing"):
            return httpx.Response(404, json={"message": "repository 'missing' not found"})
        return httpx.Response(502, text="<html>bad gateway</html>")

    with _client(httpx.MockTransport(handler)) as client:
        with pytest.raises(NotFoundError) as missing:
            client.get_repository("missing")
        assert missing.value.message == "repository 'missing' not found (404 Not Found)"
        assert missing.value.status == 404
        with pytest.raises(CLIError) as failed:
            client.get_repository("other")
        assert failed.value.message == "502 Bad Gateway"
        assert failed.value.code == ExitCode.ERROR


def test_requests_are_signed_and_paths_escaped() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"].startswith("Basic ")
        assert request.url.raw_path == b"/api/v1/repositories/repo/commits/main%5E1"
        return httpx.Response(200, json={"id": "c"})

    with _client(httpx.MockTransport(handler)) as client:
        assert client.get_commit("repo", "main^1") == {"id": "c"}


def test_missing_credentials_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no credentials"):
        LakeFSClient(ClientConfig("http://lake.test/api/v1", "", ""))


def test_transport_failures_are_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with _client(httpx.MockTransport(handler)) as client:
        with pytest.raises(UnavailableError) as caught:
            client.get_repository("repo")
    assert caught.value.message.startswith("cannot reach the server at http://lake.test/api/v1")


def test_progress_draws_only_when_enabled_and_throttles() -> None:
    now = [0.0]
    stream = io.StringIO()
    bar = Progress("uploading", 2, 2048, stream, enabled=True, clock=lambda: now[0])
    bar.add_bytes(1024)
    bar.add_bytes(512)  # within the interval: not drawn
    now[0] = 1.0
    bar.file_done()
    bar.add_bytes(512)
    bar.file_done()
    bar.close()
    frames = stream.getvalue().split("\r")[1:]
    assert len(frames) == 3
    assert "50%" in frames[0] and "0/2 files" in frames[0]
    assert "75%" in frames[1] and "1/2 files" in frames[1]
    assert frames[-1].startswith("uploading [" + "#" * 24 + "] 100%  2/2 files  2.0 KiB/2.0 KiB")
    assert frames[-1].endswith("\n")

    quiet = io.StringIO()
    with Progress("downloading", 1, 10, quiet, enabled=False) as silent:
        silent.add_bytes(10)
        silent.file_done()
    assert quiet.getvalue() == ""


def test_output_tables_fields_and_json() -> None:
    out = io.StringIO()
    printer = Output("table", out)
    printer.table(["name", "size"], [("a", "1 B"), ("longer", None)])
    printer.fields([("ID", "x"), ("Longer name", 3)])
    assert out.getvalue().splitlines() == [
        "NAME    SIZE",
        "a       1 B",
        "longer",
        "ID:          x",
        "Longer name: 3",
    ]
    data = io.StringIO()
    Output("json", data).data([{"ü": 1}])
    assert json.loads(data.getvalue()) == [{"ü": 1}]
    assert [format_size(n) for n in (None, 0, 1023, 1024, 1536, 5 << 30)] == [
        "",
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 GiB",
    ]

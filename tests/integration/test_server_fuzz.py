"""A bounded schemathesis pass over /openapi.json: no request makes the server answer 5xx."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lakefs
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.integration.harness import Server, running_server

_ROUTING = itertools.count()

# lakeFS answers these with 501 by design: presigned multipart uploads on a store that cannot
# presign (this server's namespaces are local directories), and If-Match on a staging link
_LAKEFS_501 = {
    "/repositories/{repository}/branches/{branch}/staging/pmpu": (
        "presign multipart upload API is not supported"
    ),
    "/repositories/{repository}/branches/{branch}/staging/backing": "Not Implemented",
}


def lakefs_501(path: str, response: Any) -> bool:
    """Return whether ``response`` is one of lakeFS's deliberate 501s for ``path``."""
    if response.status_code != 501:
        return False
    message = response.json().get("message")
    return any(
        path.removeprefix("/api/v1").startswith(route) and message == text
        for route, text in _LAKEFS_501.items()
    )


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # a server of its own: the fuzzer deletes and creates whatever the schema allows
    root: Path = tmp_path_factory.mktemp("fuzz")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJFUZZ" + secrets.token_hex(6).upper(),
        secret_access_key=secrets.token_urlsafe(30),
    ) as server:
        client = lakefs.Client(
            host=server.url, username=server.access_key_id, password=server.secret_access_key
        )
        repo = lakefs.Repository("fuzz", client=client).create("local://fuzz")
        main = repo.branch("main")
        main.object("data/a.csv").upload(b"a\n")
        main.commit("seed")
        repo.branch("dev").create("main").object("data/b.csv").upload(b"b\n")
        yield server


@pytest.fixture(scope="module")
def api_schema(fuzz_server: Server) -> Any:
    return schemathesis.openapi.from_url(f"{fuzz_server.url}/openapi.json")


def test_no_server_errors(api_schema: Any, fuzz_server: Server) -> None:
    auth = (fuzz_server.access_key_id, fuzz_server.secret_access_key)
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) > 60

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Any) -> None:
            # two cases in three address the seeded repository, to reach past the 404s
            # deleting the seeded repository or branch would turn the rest into 404s
            keeps_seed = not (
                case.method == "DELETE" and case.path.endswith(("{repository}", "{branch}"))
            )
            if keeps_seed and next(_ROUTING) % 3:
                params = case.path_parameters or {}
                for name, value in (("repository", "fuzz"), ("branch", "dev"), ("ref", "main")):
                    if name in params:
                        params[name] = value
                if case.query and "path" in case.query and next(_ROUTING) % 2:
                    case.query["path"] = "data/a.csv"
            response = case.call(base_url=fuzz_server.url, auth=auth, timeout=30)
            if response.status_code >= 500 and not lakefs_501(case.path, response):
                failures.append(
                    f"{case.method} {case.formatted_path} {case.query or ''}: "
                    f"{response.status_code} {response.text[:200]}"
                )

        call()
    assert failures == [], "\n".join(failures)

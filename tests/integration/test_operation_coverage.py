"""Every operation of lakeFS's API is served: of its OpenAPI description and of ``lakefs_sdk``.

The operations come from two places. ``data/lakefs_operations.json`` lists the operations of
lakeFS's ``api/swagger.yml`` (method, path, operationId; where it was read from is in the file),
which has some the SDK does not generate (the group ACL calls, ``/auth/capabilities``). The SDK
itself is read too: each ``*_with_http_info`` method of ``lakefs_sdk.api.*`` calls
``call_api('<path>', '<METHOD>', …)``, and every one must be in lakeFS's list. Every operation
outside :data:`EXCLUDED` is called against a live server, on a real repository, as the
administrator.
An operation counts as served when the server's route table (``/openapi.json``) has its method
and path, and the call answers neither 405 nor 501 nor a 404 that is the router's own
``Not Found`` (a missing route) instead of a lakeFS ``{"message": …}`` about a missing resource.
Any other answer (a 400 for the placeholder body, a 404 for a placeholder ID) shows the route is
there and reached its handler.

Placeholders never destroy the shared fixtures: DELETE calls name users, groups, policies, keys
and tags that do not exist, and the repository deletion gets a repository of its own.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk.api
import pytest

from tests.integration.harness import Server, unique
from tests.integration.s3_namespace_server import s3_namespace_server

EXCLUDED: dict[tuple[str, str], str] = {
    ("POST", "/auth/users/{userId}/external/principals"): "external principals (lakeFS Enterprise)",
    (
        "DELETE",
        "/auth/users/{userId}/external/principals",
    ): "external principals (lakeFS Enterprise)",
    ("GET", "/auth/external/principals"): "external principals (lakeFS Enterprise)",
    (
        "GET",
        "/auth/users/{userId}/external/principals/ls",
    ): "external principals (lakeFS Enterprise)",
    ("POST", "/auth/external/principal/login"): "external principal login (lakeFS Enterprise)",
    ("POST", "/sts/login"): "STS / OIDC login (lakeFS Enterprise)",
    ("GET", "/usage-report/summary"): "lakeFS's usage report to Treeverse",
    ("POST", "/statistics"): "usage statistics sent to Treeverse",
    ("GET", "/oidc/callback"): "OIDC single sign-on (lakeFS Enterprise)",
}
"""Operations deliberately not served, with the reason (docs/api.md lists the same)."""

MISSING: dict[tuple[str, str], str] = {}
"""Operations still missing here; each is expected to fail (strict: serving it fails the mark)."""

_PMPU = "/repositories/{repository}/branches/{branch}/staging/pmpu"
"""Presigned multipart uploads: they reach their store on S3 namespaces only (create, complete and
abort answer lakeFS's 501 on a local one)."""

_CALL = re.compile(r"def (\w+)_with_http_info\(self.*?call_api\(\s*'([^']+)',\s*'(\w+)'", re.S)
_PARAM = re.compile(r"\{(\w+)\}")

LAKEFS_OPERATIONS = Path(__file__).parent / "data" / "lakefs_operations.json"
"""lakeFS's operations, read once from its ``api/swagger.yml`` (the file says which commit)."""
DOCS = Path(__file__).parents[2] / "docs" / "api.md"
_DOCUMENTED = re.compile(r"`((?:[A-Z]+\\?\|)*[A-Z]+) (/[^`]*)`")


@dataclass(frozen=True)
class Operation:
    """One lakeFS operation: its method, its path template, and the SDK names of it."""

    method: str
    path: str
    names: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        return (self.method, self.path)

    def __str__(self) -> str:
        return f"{self.method} {self.path} ({', '.join(self.names)})"


def sdk_calls() -> list[tuple[str, str, str, str]]:
    """Return every generated call: (API module, method name, HTTP method, path template)."""
    calls = []
    for module_name, module in inspect.getmembers(lakefs_sdk.api, inspect.ismodule):
        for name, path, method in _CALL.findall(inspect.getsource(module)):
            calls.append((module_name, name, method, path))
    return calls


def sdk_operations() -> dict[tuple[str, str], list[str]]:
    """Return the SDK's operations (distinct method and path) with the SDK's names of each."""
    found: dict[tuple[str, str], list[str]] = {}
    for _, name, method, path in sdk_calls():
        names = found.setdefault((method, path), [])
        if name not in names:
            names.append(name)
    return found


def lakefs_operations() -> dict[tuple[str, str], str]:
    """Return lakeFS's operations, (method, path) to operationId, from its OpenAPI description."""
    listed = json.loads(LAKEFS_OPERATIONS.read_text())["operations"]
    return {(o["method"], o["path"]): o["operationId"] for o in listed}


def all_operations() -> list[Operation]:
    """Return every operation of lakeFS's list or of the SDK, named by both."""
    sdk = sdk_operations()
    lakefs = lakefs_operations()
    keys = sorted(set(sdk) | set(lakefs))
    return [
        Operation(m, p, tuple(([lakefs[(m, p)]] if (m, p) in lakefs else []) + sdk.get((m, p), [])))
        for m, p in keys
    ]


OPERATIONS = all_operations()


def _shape(path: str) -> str:
    return _PARAM.sub("{}", path)


def documented_exclusions() -> set[tuple[str, str]]:
    """Return the operations docs/api.md lists as not served, with nameless path parameters."""
    text = DOCS.read_text()
    start = text.index("Not served, on purpose")
    table = text[start : text.index("\n\n", text.index("|", start))]
    found = set()
    for methods, path in _DOCUMENTED.findall(table):
        for method in methods.replace("\\", "").split("|"):
            found.add((method, _shape(path)))
    return found


def _params() -> list[Any]:
    params = []
    for op in OPERATIONS:
        if op.key in EXCLUDED:
            continue
        marks = []
        if op.key in MISSING:
            reason = f"not served yet ({MISSING[op.key]}): {op}"
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        if op.path.startswith(_PMPU):
            marks.append(pytest.mark.s3)
        params.append(pytest.param(op, id=f"{op.method} {op.path}", marks=marks))
    return params


def test_the_sdk_and_lakefs_list_the_operations() -> None:
    # 146 generated methods; some operations sit under two tags (experimental, external)
    assert len(sdk_calls()) == 146
    sdk, lakefs = sdk_operations(), lakefs_operations()
    assert len(sdk) == 130
    assert len(lakefs) == 134
    # the list is the SDK's own description: every generated operation is in it
    assert set(sdk) <= set(lakefs)
    assert sorted(set(lakefs) - set(sdk)) == [
        ("GET", "/auth/capabilities"),
        ("GET", "/auth/groups/{groupId}/acl"),
        ("GET", "/oidc/callback"),
        ("POST", "/auth/groups/{groupId}/acl"),
    ]
    assert len(OPERATIONS) == 134
    assert set(EXCLUDED) <= {op.key for op in OPERATIONS}


def test_exclusions_are_the_documented_ones() -> None:
    assert documented_exclusions() == {(m, _shape(p)) for m, p in EXCLUDED}


@dataclass(frozen=True)
class Fixtures:
    """The real things the placeholders name."""

    repository: str
    doomed_repository: str
    commit: str
    metarange: str


@pytest.fixture(scope="module")
def real(server: Server, client: lakefs.Client) -> Iterator[Fixtures]:
    name = unique("coverage")
    repo = lakefs.Repository(name, client=client).create(server.namespace(name))
    main = repo.branch("main")
    main.object("coverage/object").upload(data=b"coverage")
    head = main.commit(message="coverage").get_commit()
    doomed = unique("coverage-doomed")
    lakefs.Repository(doomed, client=client).create(server.namespace(doomed))
    yield Fixtures(name, doomed, head.id, head.meta_range_id)
    repo.delete()
    try:
        lakefs.Repository(doomed, client=client).delete()
    except lakefs.exceptions.NotFoundException:
        pass


@dataclass(frozen=True)
class S3Target:
    """A repository on an S3 namespace, and a client of the server holding it."""

    http: httpx.Client
    repository: str


@pytest.fixture(scope="module")
def s3_target(
    server: Server,
    http: httpx.Client,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[S3Target]:
    """The session's server when its namespaces are on S3, else one more whose are (on moto)."""
    name = unique("coverage-s3")
    with ExitStack() as stack:
        target_http, target = http, server
        if not server.namespace_root.startswith("s3://"):
            moto = request.getfixturevalue("moto_region")
            s3 = request.getfixturevalue("s3_client")
            root = tmp_path_factory.mktemp("coverage-s3")
            target = stack.enter_context(s3_namespace_server(root, moto, s3))
            target_http = stack.enter_context(
                httpx.Client(
                    base_url=f"{target.url}/api/v1",
                    auth=(target.access_key_id, target.secret_access_key),
                    timeout=30.0,
                )
            )
        made = target_http.post(
            "/repositories", json={"name": name, "storage_namespace": target.namespace(name)}
        )
        assert made.status_code == 201, made.text
        yield S3Target(target_http, name)
        target_http.delete(f"/repositories/{name}", params={"force": "true"})


@pytest.fixture(scope="module")
def routes(http: httpx.Client) -> set[tuple[str, str]]:
    """Return the server's routes as (METHOD, path with nameless parameters)."""
    spec = httpx.get(str(http.base_url).removesuffix("/").removesuffix("/api/v1") + "/openapi.json")
    assert spec.status_code == 200, spec.text
    served = set()
    for path, methods in spec.json()["paths"].items():
        for method in methods:
            served.add((method.upper(), _shape(path.removeprefix("/api/v1"))))
    return served


def _value(op: Operation, param: str, real: Fixtures) -> str:
    if param == "repository":
        if op.method == "DELETE" and op.path == "/repositories/{repository}":
            return real.doomed_repository
        return real.repository
    values = {
        "branch": "main",
        "ref": "main",
        "sourceRef": "main",
        "destinationBranch": "main",
        "leftRef": "main",
        "rightRef": "main",
        "commitId": real.commit,
        "meta_range": real.metarange,
        "range": real.metarange,
        "type": "meta_range",
        "object_id": real.metarange,
        "tag": "coverage-no-such-tag",
        "userId": "coverage-no-such-user",
        "groupId": "coverage-no-such-group",
        "policyId": "coverage-no-such-policy",
        "accessKeyId": "AKIACOVERAGENOSUCH",
        "pull_request": "cv0000000000000000aa",
        "run_id": "coverage-no-such-run",
        "hook_run_id": "0000_0000",
        "uploadId": "coverage-no-such-upload",
        "partNumber": "1",
    }
    return values[param]


def _message(answer: httpx.Response) -> str | None:
    try:
        body = answer.json()
    except ValueError:
        return None
    return body.get("message") if isinstance(body, dict) else None


@pytest.mark.parametrize("op", _params())
def test_operation_is_served(
    op: Operation,
    real: Fixtures,
    http: httpx.Client,
    routes: set[tuple[str, str]],
    request: pytest.FixtureRequest,
) -> None:
    assert (op.method, _shape(op.path)) in routes, f"no route for {op}"
    url = _PARAM.sub(lambda m: _value(op, m.group(1), real), op.path)
    if op.path.startswith(_PMPU):
        target: S3Target = request.getfixturevalue("s3_target")
        http = target.http
        url = url.replace(
            f"/repositories/{real.repository}/", f"/repositories/{target.repository}/"
        )
    body = {} if op.method in ("POST", "PUT", "PATCH", "DELETE") else None
    answer = http.request(op.method, url, params={"path": "coverage/object"}, json=body)
    assert answer.status_code not in (405, 501), f"{op}: {answer.status_code} {answer.text}"
    if answer.status_code == 404 and op.method != "HEAD":
        message = _message(answer)
        assert message is not None and message != "Not Found", f"{op}: route not found"

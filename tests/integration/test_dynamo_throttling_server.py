"""The server on S3 + DynamoDB while DynamoDB throttles for a stretch, through a proxy.

The server is a separate process; its DynamoDB endpoint is the fault proxy of
:mod:`tests.integration.test_server_s3_faults` in front of the moto server, answering the
requests it is told to fail with DynamoDB's own throttling error: ``400``, the JSON body and the
``x-amzn-ErrorType`` header of ``ProvisionedThroughputExceededException``. botocore retries those
(2 attempts here); what outlasts the retries must reach the client as a 503, never a 500.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest

from tests.integration.harness import Server, running_server, unique
from tests.integration.moto_fixtures import MotoServer, aws_backend_env, create_bucket, unique_name
from tests.integration.test_server_s3_faults import Fault, FaultyProxy, running_proxy

pytestmark = pytest.mark.s3

THROTTLED: Fault = (
    400,
    {
        "Content-Type": "application/x-amz-json-1.0",
        "x-amzn-ErrorType": "ProvisionedThroughputExceededException",
    },
    json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "The level of configured provisioned throughput for the table was "
            "exceeded. Consider increasing your provisioning level with the UpdateTable API.",
        }
    ).encode(),
)
ATTEMPTS = 2


@pytest.fixture
def dynamo_proxy(moto_region: MotoServer) -> Iterator[FaultyProxy]:
    with running_proxy(moto_region.url, THROTTLED) as proxy:
        yield proxy


@pytest.fixture
def throttled_server(
    tmp_path: Path, moto_region: MotoServer, s3_client: Any, dynamo_proxy: FaultyProxy
) -> Iterator[Server]:
    bucket = create_bucket(moto_region, s3_client)
    env = aws_backend_env(moto_region, unique_name("throttled"))
    env["LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL"] = dynamo_proxy.url
    env["LAKEMIRROR_KV__DYNAMODB__MAX_ATTEMPTS"] = str(ATTEMPTS)
    with running_server(
        tmp_path / "data",
        tmp_path / "server.log",
        access_key_id="AKIAJTHROT" + secrets.token_hex(5).upper(),
        secret_access_key=secrets.token_urlsafe(30),
        env=env,
        namespace_root=f"s3://{bucket}/",
    ) as server:
        yield server


def _client(server: Server) -> lakefs.Client:
    return lakefs.Client(
        host=server.url, username=server.access_key_id, password=server.secret_access_key
    )


@pytest.fixture
def raw(throttled_server: Server) -> Iterator[httpx.Client]:
    """A plain HTTP client: it shows each answer as is (the SDK retries 503s of GETs itself)."""
    with httpx.Client(
        base_url=f"{throttled_server.url}/api/v1",
        auth=(throttled_server.access_key_id, throttled_server.secret_access_key),
        timeout=60.0,
    ) as client:
        yield client


def _assert_throttling_503(answer: httpx.Response) -> None:
    assert answer.status_code == 503, (answer.status_code, answer.text)
    assert answer.headers.get("Retry-After") == "1"
    message = answer.json()["message"]
    assert "ProvisionedThroughputExceeded" in message, message


def test_throttling_is_retried_or_reported_as_503_and_nothing_acknowledged_is_lost(
    throttled_server: Server, dynamo_proxy: FaultyProxy, raw: httpx.Client
) -> None:
    client = _client(throttled_server)
    name = unique("throttled")
    repo = lakefs.Repository(name, client=client).create(throttled_server.namespace(name))
    main = repo.branch("main")
    staged: dict[str, bytes] = {}
    commits: dict[str, dict[str, bytes]] = {}

    def upload(path: str, data: bytes) -> None:
        main.object(path).upload(data, pre_sign=False)
        staged[path] = data

    def commit(message: str) -> str:
        commit_id: str = main.commit(message).get_commit().id
        commits[commit_id] = dict(staged)
        return commit_id

    upload("before.txt", b"written before the throttling")
    commit("before")
    assert dynamo_proxy.forwarded > 0  # the server's DynamoDB traffic does go through the proxy

    # a short stretch: fewer throttled answers than attempts, botocore rides it out
    dynamo_proxy.fail_next(ATTEMPTS - 1)
    upload("short/upload.bin", secrets.token_bytes(5_000))
    dynamo_proxy.fail_next(ATTEMPTS - 1)
    commit("through a short stretch")
    assert dynamo_proxy.failed == 2 * (ATTEMPTS - 1)

    # a stretch longer than the retries: a clear 503 with Retry-After, not a 500, not a hang
    dynamo_proxy.fail_next(10_000)
    forwarded = dynamo_proxy.forwarded
    branch = f"/repositories/{name}/branches/main"
    for answer in (
        raw.post(f"{branch}/objects", params={"path": "long/upload.bin"}, content=b"refused"),
        raw.post(f"{branch}/commits", json={"message": "refused"}),
        raw.get(f"/repositories/{name}/refs/main/objects", params={"path": "before.txt"}),
        raw.get(branch),
    ):
        _assert_throttling_503(answer)
    assert dynamo_proxy.forwarded == forwarded  # nothing got through during the stretch
    dynamo_proxy.fail_next(0)

    # afterwards every acknowledged upload and commit is readable
    upload("after.txt", b"written after the throttling")
    final = commit("after")
    for path, data in staged.items():
        assert main.object(path).reader().read() == data, path
    for commit_id, objects in commits.items():
        for path, data in objects.items():
            assert repo.ref(commit_id).object(path).reader().read() == data, (commit_id, path)
    assert {o.path for o in repo.ref(final).objects()} >= set(staged)
    assert dynamo_proxy.failed >= 2 * (ATTEMPTS - 1) + 4 * ATTEMPTS
    assert "Traceback" not in throttled_server.log()


@pytest.mark.slow
def test_bursts_of_throttling_never_give_a_500_and_lose_no_acknowledged_write(
    throttled_server: Server, dynamo_proxy: FaultyProxy, raw: httpx.Client
) -> None:
    client = _client(throttled_server)
    name = unique("bursts")
    repo = lakefs.Repository(name, client=client).create(throttled_server.namespace(name))
    main = repo.branch("main")
    acknowledged: dict[str, bytes] = {}
    commits: dict[str, dict[str, bytes]] = {}
    outcomes = {"ok": 0, "503": 0}
    rng = random.Random(4)

    branch = f"/repositories/{name}/branches/main"

    def attempt(url: str, **request: Any) -> httpx.Response | None:
        # bursts around the retry limit: some ride out the retries, some outlast them
        dynamo_proxy.fail_next(rng.choice([0, 1, ATTEMPTS - 1, ATTEMPTS, 2 * ATTEMPTS]))
        try:
            answer = raw.post(url, **request)
        finally:
            dynamo_proxy.fail_next(0)
        if answer.status_code in (200, 201):
            outcomes["ok"] += 1
            return answer
        _assert_throttling_503(answer)
        outcomes["503"] += 1
        return None

    for i in range(12):
        path, data = f"burst/{i:02d}.bin", secrets.token_bytes(2_000 + i)
        if attempt(f"{branch}/objects", params={"path": path}, content=data):
            acknowledged[path] = data
        if i % 3 == 2:
            answer = attempt(f"{branch}/commits", json={"message": f"burst {i}"})
            if answer is not None:
                commits[answer.json()["id"]] = dict(acknowledged)

    assert outcomes["ok"] > 0 and outcomes["503"] > 0, outcomes
    for path, data in acknowledged.items():
        assert main.object(path).reader().read() == data, path
    for commit_id, objects in commits.items():
        for path, data in objects.items():
            assert repo.ref(commit_id).object(path).reader().read() == data, (commit_id, path)
    assert "Traceback" not in throttled_server.log()

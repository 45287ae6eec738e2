"""Repeated failed sign-ins against a live server: refused for a while, for that address only.

One server with low limits (3 failures of a key from an address, 6 from an address, refusals
of up to 10 minutes, so none ends during a test). Clients bind to different loopback addresses
(127.0.0.2, 127.0.0.3, ...), which the server sees as different clients; the administrator's
own clients stay on 127.0.0.1. A refusal is recognised by what it answers (a right secret
refused, ``Retry-After``, the detail), never by how long anything took.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from tests.integration.harness import Server, running_server

MAX_DELAY = 600
DEADLINE = 10.0
REFUSED = "sign-in attempts refused for a while"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("throttle")
    env = {
        "LAKEMIRROR_AUTH__THROTTLE__THRESHOLD": "3",
        "LAKEMIRROR_AUTH__THROTTLE__ADDRESS_THRESHOLD": "6",
        "LAKEMIRROR_AUTH__THROTTLE__MAX_DELAY": str(MAX_DELAY),
        "LAKEMIRROR_LOGGING__FORMAT": "json",
    }
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJTHROTTLE" + secrets.token_hex(4).upper(),
        secret_access_key=secrets.token_urlsafe(30),
        env=env,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=30.0,
    ) as client:
        yield client


def new_key(admin: httpx.Client) -> tuple[str, str]:
    """Create a user with a key; return the key."""
    user = f"user-{secrets.token_hex(5)}"
    assert admin.post("/auth/users", json={"id": user}).status_code == 201
    made = admin.post(f"/auth/users/{user}/credentials")
    assert made.status_code == 201, made.text
    body = made.json()
    return body["access_key_id"], body["secret_access_key"]


def client_from(server: Server, address: str) -> httpx.Client:
    """An HTTP client whose connections come from ``address`` (a loopback address)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.url, transport=transport, timeout=30.0)


def log_events(server: Server, **match: Any) -> list[dict[str, Any]]:
    """Wait for the server's throttle warnings holding ``match``; return them."""
    deadline = time.monotonic() + DEADLINE
    while True:
        found = []
        for line in server.log().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if event.get("event") == REFUSED and all(event.get(k) == v for k, v in match.items()):
                found.append(event)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def retry_after(answer: httpx.Response) -> int:
    value = int(answer.headers["Retry-After"])
    assert 1 <= value <= MAX_DELAY
    return value


def test_basic_failures_refuse_the_key_from_that_address_only(
    server: Server, admin: httpx.Client
) -> None:
    key, secret = new_key(admin)
    wrong = "wrong-" + secrets.token_hex(8)
    with client_from(server, "127.0.0.2") as guesser, client_from(server, "127.0.0.3") as owner:
        answers = [guesser.get("/api/v1/user", auth=(key, wrong)) for _ in range(3)]
        assert [a.status_code for a in answers] == [401, 401, 401]
        assert all(a.json()["message"] == "error authenticating request" for a in answers)
        assert "Retry-After" not in answers[0].headers
        retry_after(answers[2])  # the failure that starts the refusal says how long it lasts
        # now even the right secret is refused from there, before it is looked at
        refused = guesser.get("/api/v1/user", auth=(key, secret))
        assert refused.status_code == 401
        assert refused.json() == {
            "message": "error authenticating request",
            "detail": "too many failed sign-ins for this access key from this address; "
            f"retry after {retry_after(refused)} seconds",
        }
        # the key's owner, elsewhere, signs in at once
        mine = owner.get("/api/v1/user", auth=(key, secret))
        assert mine.status_code == 200, mine.text
        assert "Retry-After" not in mine.headers
    (event,) = log_events(server, access_key_id=key)
    assert (event["client"], event["door"], event["scope"]) == ("127.0.0.2", "api", "key")
    assert event["failures"] == 3 and event["level"] == "warning"
    assert wrong not in server.log() and secret not in server.log()


def test_login_failures_refuse_the_key_from_that_address_only(
    server: Server, admin: httpx.Client
) -> None:
    key, secret = new_key(admin)
    with client_from(server, "127.0.0.4") as guesser, client_from(server, "127.0.0.5") as owner:
        for _ in range(3):
            wrong = {"access_key_id": key, "secret_access_key": secrets.token_hex(8)}
            answer = guesser.post("/api/v1/auth/login", json=wrong)
            assert answer.status_code == 401
        retry_after(answer)
        right = {"access_key_id": key, "secret_access_key": secret}
        refused = guesser.post("/api/v1/auth/login", json=right)
        assert refused.status_code == 401 and "token" not in refused.json()
        retry_after(refused)
        signed_in = owner.post("/api/v1/auth/login", json=right)
        assert signed_in.status_code == 200 and signed_in.json()["token"]
    (event,) = log_events(server, access_key_id=key)
    assert (event["client"], event["door"]) == ("127.0.0.4", "login")
    assert secret not in server.log()


def signed(server: Server, key: str, secret: str) -> dict[str, str]:
    """Return the headers of a SigV4-signed ListBuckets (``GET /``)."""
    request = AWSRequest(method="GET", url=f"{server.url}/")
    S3SigV4Auth(Credentials(key, secret), "s3", "us-east-1").add_auth(request)
    return dict(request.headers.items())


def s3_code(answer: httpx.Response) -> str:
    return answer.text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def test_gateway_signature_failures_refuse_the_key_from_that_address_only(
    server: Server, admin: httpx.Client
) -> None:
    key, secret = new_key(admin)
    with client_from(server, "127.0.0.6") as guesser, client_from(server, "127.0.0.7") as owner:
        answers = [guesser.get("/", headers=signed(server, key, secret[::-1])) for _ in range(3)]
        assert [(a.status_code, s3_code(a)) for a in answers] == [
            (403, "SignatureDoesNotMatch")
        ] * 3
        retry_after(answers[2])
        refused = guesser.get("/", headers=signed(server, key, secret))
        assert (refused.status_code, s3_code(refused)) == (403, "AccessDenied")
        assert f"retry after {retry_after(refused)} seconds" in refused.text
        listed = owner.get("/", headers=signed(server, key, secret))
        assert listed.status_code == 200, listed.text
        assert "<ListAllMyBucketsResult" in listed.text
    (event,) = log_events(server, access_key_id=key)
    assert (event["client"], event["door"]) == ("127.0.0.6", "gateway")
    assert secret not in server.log() and secret[::-1] not in server.log()


def test_an_address_trying_many_keys_is_refused_but_keys_in_use_there_go_on(
    server: Server, admin: httpx.Client
) -> None:
    regular, regular_secret = new_key(admin)
    newcomer, newcomer_secret = new_key(admin)
    with client_from(server, "127.0.0.8") as shared, client_from(server, "127.0.0.9") as other:
        assert shared.get("/api/v1/user", auth=(regular, regular_secret)).status_code == 200
        for i in range(6):
            guess = shared.get("/api/v1/user", auth=(f"AKIAGUESS{i:012d}", "x" * 40))
            assert guess.status_code == 401
        retry_after(guess)
        refused = shared.get("/api/v1/user", auth=(newcomer, newcomer_secret))
        assert refused.status_code == 401
        assert refused.json()["detail"] == (
            f"too many failed sign-ins for this address; retry after {retry_after(refused)} seconds"
        )
        # a key already signed in from that address is not locked out by the others' guesses
        assert shared.get("/api/v1/user", auth=(regular, regular_secret)).status_code == 200
        assert other.get("/api/v1/user", auth=(newcomer, newcomer_secret)).status_code == 200
    (event,) = log_events(server, client="127.0.0.8", scope="address")
    assert event["failures"] == 6 and event["access_key_id"] == "AKIAGUESS000000000005"


def test_x_forwarded_for_names_the_client_only_behind_a_trusted_proxy(server: Server) -> None:
    # uvicorn trusts proxy headers from 127.0.0.1 alone (FORWARDED_ALLOW_IPS); from another
    # peer the header is ignored and the peer's address is the client
    host = urlsplit(server.url).netloc
    for source, forwarded, seen in (
        ("127.0.0.1", "203.0.113.50, 198.51.100.7", "198.51.100.7"),
        ("127.0.0.10", "198.51.100.8", "127.0.0.10"),
    ):
        key = "AKIAFWD" + secrets.token_hex(6).upper()
        with client_from(server, source) as client:
            for _ in range(3):
                answer = client.get(
                    "/api/v1/user",
                    auth=(key, "x" * 40),
                    headers={"X-Forwarded-For": forwarded, "Host": host},
                )
                assert answer.status_code == 401
        (event,) = log_events(server, access_key_id=key)
        assert event["client"] == seen

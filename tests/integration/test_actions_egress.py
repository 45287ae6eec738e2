"""Hooks' outgoing requests under ``actions.deny_private_networks`` and ``actions.allowed_hosts``.

One live server with both settings on (through ``LAKEMIRROR_ACTIONS__*`` variables): private
networks denied, and ``127.0.0.2`` (an address entry, exempt) and ``localhost`` (a name entry,
not exempt) allowed. Two webhook receivers listen, on 127.0.0.1 and on 127.0.0.2; a refused hook
must fail with the host and the rule, and its receiver must get nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from lakefs_sdk.exceptions import ApiException

from tests.integration.harness import Server, running_server
from tests.integration.test_actions import KEY, Repo, http, repo, sdk
from tests.webhooks import Receiver, webhook_receiver

__all__ = ["http", "repo", "sdk"]  # the fixtures this module uses


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("egress") / "data"
    env = {
        "LAKEMIRROR_ACTIONS__DENY_PRIVATE_NETWORKS": "true",
        "LAKEMIRROR_ACTIONS__ALLOWED_HOSTS": "127.0.0.2,localhost",
    }
    with running_server(
        data, data.parent / "server.log", access_key_id=KEY[0], secret_access_key=KEY[1], env=env
    ) as found:
        yield found


@pytest.fixture(scope="module")
def denied() -> Iterator[Receiver]:
    with webhook_receiver("127.0.0.1") as received:
        yield received


@pytest.fixture(scope="module")
def allowed() -> Iterator[Receiver]:
    with webhook_receiver("127.0.0.2") as received:
        yield received


def _hooked_commit(repo: Repo, url: str) -> tuple[int, str, bytes]:
    """Commit under a pre-commit webhook to ``url``: the status, message and the hook's log."""
    action = (
        "name: Notify\non:\n  pre-commit:\n    branches: [main]\nhooks:\n"
        f"  - id: tell\n    type: webhook\n    properties:\n      url: {url}\n"
        "      timeout: 5s\n"
    )
    repo.put("main", "_lakefs_actions/notify.yaml", action)
    try:
        repo.commit("main", "notified")
        status, message = 201, ""
    except ApiException as exc:
        status, message = exc.status or 0, json.loads(exc.body)["message"]
    run = repo.runs()[0]
    log = repo.actions.get_run_hook_output(repo.name, run.run_id, "0000_0000")
    return status, message, log


def test_a_hook_to_loopback_is_refused_and_nothing_is_sent(repo: Repo, denied: Receiver) -> None:
    url = f"{denied.url}/ok"
    status, message, log = _hooked_commit(repo, url)
    reason = (
        f'action failed: Post "{url}": refused by actions.deny_private_networks: '
        "127.0.0.1 is a loopback address"
    )
    assert status == 412
    assert message.endswith(f"hook 'tell': {reason}\n\n")
    assert log.endswith(f"Error: {reason}\n".encode())
    assert denied.of(repo.name) == []
    assert repo.http.get("/healthcheck").status_code == 204


def test_a_name_entry_does_not_exempt_its_address(repo: Repo, denied: Receiver) -> None:
    port = urlsplit(denied.url).port
    status, message, _ = _hooked_commit(repo, f"http://localhost:{port}/ok")
    assert status == 412
    assert "refused by actions.deny_private_networks: localhost (" in message
    assert "is a loopback address" in message
    assert denied.of(repo.name) == []


def test_an_allowed_address_is_reached(repo: Repo, allowed: Receiver) -> None:
    status, message, log = _hooked_commit(repo, f"{allowed.url}/ok")
    assert (status, message) == (201, "")
    (call,) = allowed.of(repo.name)
    assert call.body["event_type"] == "pre-commit"
    assert call.headers["Host"] == urlsplit(allowed.url).netloc
    assert log.startswith(f"Request:\nPOST {allowed.url}/ok\n".encode())
    assert b"\n200 OK\n" in log

"""``lakemirror pr`` run as a subprocess against a live server: open, list, show, update, merge."""

from __future__ import annotations

import lakefs
import pytest

from tests.integration.harness import Server
from tests.integration.test_cli import CLI, assert_one_line_error


@pytest.fixture(scope="module")
def pr_cli(server: Server, tmp_path_factory: pytest.TempPathFactory) -> CLI:
    return CLI(
        tmp_path_factory.mktemp("pr-home"),
        {
            "LAKECTL_SERVER_ENDPOINT_URL": server.url,
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": server.access_key_id,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": server.secret_access_key,
        },
    )


def test_pull_request_round_trip(pr_cli: CLI, repo: lakefs.Repository) -> None:
    feature = repo.branch("feature").create(source_reference="main")
    feature.object("f.txt").upload(data=b"f")
    feature.commit(message="f")
    uri = f"lakefs://{repo.id}"

    opened = pr_cli.ok(
        "pr", "create", f"{uri}/feature", "main", "-t", "add f", "-d", "adds f", "-o", "json"
    ).json()
    pull_id = opened["id"]
    listed = pr_cli.ok("pr", "list", uri, "-o", "json").json()
    assert [p["id"] for p in listed] == [pull_id]
    table = pr_cli.ok("pr", "list", uri).out
    assert pull_id in table and "add f" in table

    shown = pr_cli.ok("pr", "get", uri, pull_id).out
    assert "adds f" in shown and f"{uri}/feature" in shown

    updated = pr_cli.ok("pr", "update", uri, pull_id, "-t", "add f.txt", "-o", "json").json()
    assert updated["title"] == "add f.txt"

    merged = pr_cli.ok("pr", "merge", uri, pull_id, "-o", "json").json()
    assert merged["reference"] == repo.branch("main").get_commit().id
    assert pr_cli.ok("pr", "list", uri, "-o", "json").json() == []
    closed = pr_cli.ok("pr", "list", uri, "--status", "closed", "-o", "json").json()
    assert [(p["id"], p["status"]) for p in closed] == [(pull_id, "merged")]

    assert_one_line_error(pr_cli("pr", "merge", uri, pull_id), 6, "bad pull request status")
    assert_one_line_error(
        pr_cli("pr", "get", uri, "cv0000000000000000aa"), 4, "pull request not found"
    )

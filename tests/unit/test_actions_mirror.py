"""Post-commit hooks in a mirror's region when its branch advances (``actions.mirror_post_hooks``).

An in-memory catalog holds a source repository and a read-only mirror of it over the same
namespace; the mirror's branch is moved the way the replicant moves it (commit records imported,
then a forced compare-and-swap). A stdlib HTTP server on 127.0.0.1 receives the webhooks.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mirror.actions import ActionsService
from mirror.core import open_memory
from mirror.core.catalog import Catalog
from tests.webhooks import Receiver, webhook_receiver


def _advance_mirror(catalog: Catalog) -> str:
    """Copy the source's history into the mirror and move its branch; return the head."""
    head = catalog.get_branch("src", "main").commit_id
    for commit in reversed(list(catalog.log("src", "main"))):
        catalog.import_commit("dst", commit, force=True)
    catalog.set_branch_head("dst", "main", head, None, force=True)
    return head


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as received:
        yield received


@pytest.mark.parametrize("enabled", [True, False])
def test_mirror_advance_runs_post_commit_hooks_only_when_enabled(
    enabled: bool, receiver: Receiver
) -> None:
    url = f"{receiver.url}/ok"
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
    bodies = [c.body for c in receiver.calls]
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

"""The core's hook events and lakeFS's text for an aborted operation."""

from __future__ import annotations

import pickle

from mirror.core.hooks import HookAbortError, HookEvent, HookRun, NoHooks
from mirror.httputil.errors import message_for, status_for


def test_abort_message_is_lakefs_text() -> None:
    err = HookAbortError(
        "pre-commit",
        "run1",
        (("0000_0000", "Check", "h1", "action failed: webhook request failed (status code: 500)"),),
    )
    assert str(err) == (
        "pre-commit hook aborted, run id 'run1': 1 error occurred:\n"
        "\t* hook run id '0000_0000' failed on action 'Check' hook 'h1': action failed: "
        "webhook request failed (status code: 500)\n\n"
    )
    assert status_for(err) == 412
    assert message_for(err) == str(err)


def test_abort_prefix_and_several_failures() -> None:
    err = HookAbortError(
        "pre-merge", "r", (("0000_0000", "A", "x", "boom"), ("0001_0000", "B", "y", "bang"))
    ).with_prefix("update branch main: ")
    assert str(err).startswith("update branch main: pre-merge hook aborted, run id 'r': 2 errors")
    assert "\t* hook run id '0001_0000' failed on action 'B' hook 'y': bang\n" in str(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_as_post_and_no_hooks() -> None:
    pre = HookEvent("pre-commit", "repo", branch_id="main", source_ref="main")
    post = pre.as_post(commit_id="c1", source_ref="c1")
    assert (post.event_type, post.commit_id, post.source_ref) == ("post-commit", "c1", "c1")
    assert NoHooks().pre(pre) == HookRun()
    NoHooks().post(post)

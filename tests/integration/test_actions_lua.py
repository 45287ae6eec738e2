"""Lua hooks against a live server process, through the official SDK.

The server, the SDK client and the per-test repositories are those of
:mod:`tests.integration.test_actions`.
"""

from __future__ import annotations

import json

import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.integration.test_actions import Repo, http, repo, sdk, server

__all__ = ["http", "repo", "sdk", "server"]  # the fixtures this module uses

# lakeFS's documented example (docs/howto/hooks/lua.md): commits to main need metadata
REQUIRE_METADATA = """name: pre commit metadata field check
on:
  pre-commit:
    branches:
    - main
    - dev
hooks:
  - id: ensure_commit_metadata
    type: lua
    properties:
      args:
        notebook_url: {"pattern": "my-jupyter.example.com/.*"}
        spark_version:  {}
      script: |
        regexp = require("regexp")
        for k, props in pairs(args) do
          current_value = action.commit.metadata[k]
          if current_value == nil then
            error("missing mandatory metadata field: " .. k)
          end
          if props.pattern and not regexp.match(props.pattern, current_value) then
            error("current value for commit metadata field " .. k
                  .. " does not match pattern: " .. props.pattern .. " - got: " .. current_value)
          end
        end
        print("commit metadata checked on " .. action.branch_id)
"""


def test_pre_commit_lua_hook_requires_metadata(repo: Repo) -> None:
    repo.put("main", "_lakefs_actions/metadata.yaml", REQUIRE_METADATA)
    repo.put("main", "data/a.csv", "x\n1\n")
    before = repo.head("main")
    with pytest.raises(ApiException) as caught:
        repo.commit("main", "no metadata")
    assert caught.value.status == 412
    message = json.loads(caught.value.body)["message"]
    run_id = repo.runs()[0].run_id
    # pairs() visits the args in no fixed order: either field is reported
    field = "spark_version" if "field: spark_version" in message else "notebook_url"
    assert message == (
        f"pre-commit hook aborted, run id '{run_id}': 1 error occurred:\n"
        "\t* hook run id '0000_0000' failed on action 'pre commit metadata field check' hook "
        "'ensure_commit_metadata': runtime error: [string \"lua\"]:5: missing mandatory "
        f"metadata field: {field}\n\n"
    )
    assert repo.head("main") == before
    with pytest.raises(ApiException) as mismatch:
        repo.commit("main", "bad url", notebook_url="elsewhere", spark_version="3.5")
    assert mismatch.value.status == 412
    assert "does not match pattern" in json.loads(mismatch.value.body)["message"]
    assert repo.head("main") == before
    done = repo.commit(
        "main", "with metadata", notebook_url="my-jupyter.example.com/n/1", spark_version="3.5"
    )
    assert repo.head("main") == done.id
    runs = repo.runs()
    assert [r.status for r in runs] == ["completed", "failed", "failed"]
    assert runs[0].commit_id == done.id
    hooks = repo.actions.list_run_hooks(repo.name, runs[0].run_id).results
    assert [(h.hook_id, h.status) for h in hooks] == [("ensure_commit_metadata", "completed")]
    output = repo.actions.get_run_hook_output(repo.name, runs[0].run_id, "0000_0000")
    assert output == b"commit metadata checked on main\n"
    failed = repo.actions.get_run_hook_output(repo.name, runs[2].run_id, "0000_0000")
    assert b"missing mandatory metadata field" in failed


POST_COMMIT = """name: Count rows
on:
  post-commit:
    branches: [main]
hooks:
  - id: count
    type: lua
    properties:
      args:
        path: data/stats.json
      script: |
        local lakefs = require("lakefs")
        local json = require("encoding/json")
        local code, body = lakefs.get_object(action.repository_id, action.commit_id, args.path)
        if code ~= 200 then
          error("could not read " .. args.path .. ": " .. code)
        end
        local stats = json.unmarshal(body)
        print(action.event_type, action.commit.message, stats.rows)
        local listed, page = lakefs.list_objects(
          action.repository_id, action.commit_id, "", "data/")
        print(listed, #page.results, page.pagination.has_more)
        local tag = "checked-" .. action.commit.metadata.batch
        local tagged = lakefs.create_tag(action.repository_id, action.commit_id, tag)
        print("tag", tagged)
        local missing, err = lakefs.stat_object(action.repository_id, action.commit_id, "none")
        print(missing, json.unmarshal(err).message)
"""


def test_post_commit_lua_hook_reads_objects_and_tags(repo: Repo) -> None:
    repo.put("main", "_lakefs_actions/count.yaml", POST_COMMIT)
    repo.put("main", "data/stats.json", json.dumps({"rows": 42}))
    done = repo.commit("main", "stats", batch="7")
    (run,) = repo.wait_runs(1)
    assert (run.event_type, run.commit_id) == ("post-commit", done.id)
    assert run.status == "completed"
    output = repo.actions.get_run_hook_output(repo.name, run.run_id, "0000_0000")
    # errors answer the API's status and lakeFS's message text
    assert output.startswith(
        b"post-commit\tstats\t42\n200\t1\tfalse\ntag\t201\n404\tnot found: object 'none' at "
    )
    tag = repo.tags.get_tag(repo.name, "checked-7")
    assert tag.commit_id == done.id


def test_script_file_hook_reads_the_script_at_the_source_ref(repo: Repo) -> None:
    action = """name: From a file
on:
  pre-create-branch:
hooks:
  - id: named
    type: lua
    properties:
      script_file: scripts/branch_names.lua
      args:
        prefix: feature-
"""
    script = """local strings = require("strings")
if not strings.has_prefix(action.branch_id, args.prefix) then
  error("branch " .. action.branch_id .. " must start with " .. args.prefix)
end
print("ok " .. action.branch_id .. " from " .. action.source_ref)
"""
    repo.put("main", "_lakefs_actions/names.yaml", action)
    repo.put("main", "scripts/branch_names.lua", script)
    repo.commit("main", "branch rules")
    repo.branches.create_branch(
        repo.name, lakefs_sdk.BranchCreation(name="feature-a", source="main")
    )
    with pytest.raises(ApiException) as caught:
        repo.branches.create_branch(repo.name, lakefs_sdk.BranchCreation(name="wip", source="main"))
    assert caught.value.status == 412
    assert "branch wip must start with feature-" in json.loads(caught.value.body)["message"]
    names = [b.id for b in repo.branches.list_branches(repo.name).results]
    assert "wip" not in names and "feature-a" in names
    runs = repo.runs()
    assert [r.status for r in runs] == ["failed", "completed"]
    output = repo.actions.get_run_hook_output(repo.name, runs[1].run_id, "0000_0000")
    assert output == b"ok feature-a from main\n"


# the sandbox under a live server: bombs and escape attempts fail the hook, never the server

BOMB = """name: Bomb
on:
  pre-commit:
    branches: [main]
hooks:
  - id: bomb
    type: lua
    properties:
      timeout: 1s
      script: |
{script}
"""


def _bomb(repo: Repo, script: str) -> tuple[int, str, bytes]:
    """Commit under a pre-commit hook running ``script``: the status, message and hook log."""
    indented = "\n".join(" " * 8 + line for line in script.splitlines())
    repo.put("main", "_lakefs_actions/bomb.yaml", BOMB.format(script=indented))
    try:
        repo.commit("main", "under a bomb")
        status, message = 201, ""
    except ApiException as exc:
        status, message = exc.status or 0, json.loads(exc.body)["message"]
    run = repo.runs()[0]
    log = repo.actions.get_run_hook_output(repo.name, run.run_id, "0000_0000")
    return status, message, log


def _healthy(repo: Repo) -> None:
    """The server still answers: its health check, and an ordinary read of the repository."""
    assert repo.http.get("/healthcheck").status_code == 204
    assert repo.branches.get_branch(repo.name, "main").id == "main"


@pytest.mark.parametrize(
    ("script", "error"),
    [
        # a time bomb: a loop that catches the error each time round
        (
            "while true do pcall(function() while true do end end) end",
            "runtime error: lua hook timed out after 1s",
        ),
        # a time bomb in one library call: backtracking C would run for hours
        (
            'local s = string.rep("a", 1e5)\nprint(s:find(".-.-.-.-b"))',
            "runtime error: lua hook timed out after 1s",
        ),
        # a memory bomb: the VM's allocator refuses past its limit
        (
            "local t = {}\nfor i = 1, 1e9 do t[i] = string.rep('x', 1e6) .. i end",
            "runtime error: not enough memory",
        ),
    ],
)
def test_bombs_fail_the_hook_and_the_server_keeps_serving(
    repo: Repo, script: str, error: str
) -> None:
    status, message, log = _bomb(repo, script)
    assert status == 412
    assert message.endswith(f"hook 'bomb': {error}\n\n")
    assert log.endswith(f"Error: {error}\n".encode())
    _healthy(repo)


def test_an_endless_finalizer_never_runs_and_the_commit_goes_through(repo: Repo) -> None:
    # Lua runs finalizers with hooks off: one that never ends would hold a server thread (and
    # the whole process when the VM closes) for good
    status, message, log = _bomb(
        repo,
        "setmetatable({}, {__gc = function() while true do end end})\n"
        "collectgarbage()\nprint('collected')",
    )
    assert (status, message, log) == (201, "", b"collected\n")
    _healthy(repo)


def test_a_timeout_caught_in_a_coroutine_still_fails_the_hook(repo: Repo) -> None:
    status, message, log = _bomb(
        repo,
        "local co = coroutine.create(function() while true do end end)\n"
        "print(coroutine.resume(co))",
    )
    assert status == 412
    assert message.endswith("hook 'bomb': runtime error: lua hook timed out after 1s\n\n")
    assert log == (
        b"false\tlua hook timed out after 1s\nError: runtime error: lua hook timed out after 1s\n"
    )
    _healthy(repo)

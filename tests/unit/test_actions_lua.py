"""Lua hooks: the sandboxed runtime, its libraries, and the service running them on a catalog."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mirror.actions import ActionsService
from mirror.actions.lua import ScriptNotFoundError, call_lua_hook, run_lua
from mirror.actions.lua_libs import CatalogClient, libraries
from mirror.actions.model import ActionHook
from mirror.actions.service import LOG_PREFIX
from mirror.core import open_memory
from mirror.core.catalog import Catalog
from mirror.core.hooks import HookAbortError
from mirror.errors import NotFoundError
from mirror.httputil.errors import answer_for

ACTION = {
    "event_type": "pre-commit",
    "repository_id": "repo",
    "branch_id": "main",
    "commit": {"message": "m", "metadata": {"owner": "data"}},
}


def run(script: str, *, timeout: float = 5.0, **kwargs: Any) -> tuple[str, str]:
    found = run_lua(
        script,
        action=kwargs.pop("action", ACTION),
        args=kwargs.pop("args", {}),
        username="alice",
        libraries=kwargs.pop("libraries", libraries(None)),
        timeout=timeout,
        **kwargs,
    )
    return found.error, found.log


def out(script: str, **kwargs: Any) -> str:
    error, log = run(script, **kwargs)
    assert error == "", log
    return log


# the sandbox


@pytest.mark.parametrize(
    "name",
    ["os", "io", "debug", "dofile", "loadfile", "python", "string.dump", "package.loadlib"],
)
def test_unsafe_globals_are_absent(name: str) -> None:
    assert out(f"print({name} == nil)") == "true\n"


def test_require_answers_only_the_libraries() -> None:
    error, _ = run('require("os")')
    assert error == "runtime error: [string \"lua\"]:1: module 'os' not found"
    assert out('print(require("string") == string, require("strings").trim(" x "))') == "true\tx\n"


def test_load_refuses_bytecode() -> None:
    log = out('print(load("return 1 + 1")(), load(string.char(27) .. "Lua"))')
    assert log == "2\tnil\tattempt to load a binary chunk (mode is 't')\n"


def test_python_objects_are_out_of_reach() -> None:
    error, _ = run('local f = require("strings").split\nreturn f.__globals__')
    assert "attempt to index" in error


def test_an_endless_loop_fails_within_the_limit() -> None:
    for script in (
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "local co = coroutine.wrap(function() while true do end end) co()",
    ):
        start = time.monotonic()
        error, log = run(script, timeout=0.3)
        assert time.monotonic() - start < 3
        assert error == "runtime error: lua hook timed out after 0.3s"
        assert log.endswith(f"Error: {error}\n")


def test_the_memory_limit_fails_the_hook() -> None:
    error, _ = run(
        "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end",
        max_memory=16 * 1024 * 1024,
    )
    assert error == "runtime error: not enough memory"


# globals, print and errors


def test_action_args_and_username_globals() -> None:
    log = out(
        "print(action.event_type, action.commit.metadata.owner, args.k.pattern, #args.l, username)",
        args={"k": {"pattern": "a.*"}, "l": [1, 2]},
    )
    assert log == "pre-commit\tdata\ta.*\t2\talice\n"


def test_print_writes_the_log() -> None:
    assert out("print('a', 1, nil, true, 2.5)\nprint()") == "a\t1\tnil\ttrue\t2.5\n\n"


def test_error_fails_with_the_position() -> None:
    error, log = run("print('before')\nerror('missing mandatory metadata field: owner')")
    assert error == ('runtime error: [string "lua"]:2: missing mandatory metadata field: owner')
    assert log == f"before\nError: {error}\n"


def test_runtime_and_syntax_errors() -> None:
    assert run("local x = nil\nx.y = 1")[0].startswith('runtime error: [string "lua"]:2: attempt')
    assert run("x = ")[0].startswith('syntax error: [string "lua"]:1:')


# the libraries


def test_json() -> None:
    log = out(
        'local json = require("encoding/json")\n'
        'print(json.marshal({b = {1, 2, 3}, a = "<x>", c = 1.5, d = array({})}))\n'
        'local t = json.unmarshal(\'{"k": [1, "a", {"z": null}]}\')\n'
        "print(t.k[2], #t.k)"
    )
    assert log == '{"a":"\\u003cx\\u003e","b":[1,2,3],"c":1.5,"d":[]}\n\na\t3\n'
    assert out('print(require("encoding/json").marshal({a = 1}, {indent = "  "}))') == (
        '{\n  "a": 1\n}\n\n'
    )
    assert "invalid character" in run('require("encoding/json").unmarshal("{")')[0]


def test_encodings_and_digests() -> None:
    log = out(
        'local hex = require("encoding/hex")\n'
        'local b64 = require("encoding/base64")\n'
        'print(hex.encode(require("crypto/sha256").digest("abc")))\n'
        'print(require("crypto/md5").digest("abc"))\n'
        'print(hex.encode(require("crypto/hmac").sign_sha256("msg", "key")))\n'
        'print(hex.encode(require("crypto/hmac").sign_sha1("msg", "key")))\n'
        'print(b64.encode("hi?>"), b64.url_encode("hi?>"), b64.url_decode("aGk_Pg"))\n'
        'print(b64.decode(b64.encode("\\255\\0")) == "\\255\\0", hex.decode("6869"))'
    )
    assert log.splitlines() == [
        hashlib.sha256(b"abc").hexdigest(),
        hashlib.md5(b"abc").hexdigest(),
        hmac.new(b"key", b"msg", "sha256").hexdigest(),
        hmac.new(b"key", b"msg", "sha1").hexdigest(),
        "aGk/Pg==\taGk_Pg\thi?>",
        "true\thi",
    ]
    assert "illegal base64 data" in run('require("encoding/base64").decode("!")')[0]


def test_strings() -> None:
    log = out(
        'local s = require("strings")\n'
        'local parts = s.split("a,b,c", ",")\n'
        'print(#parts, parts[3], s.trim("  x \\n"), s.replace("aaa", "a", "b", 2))\n'
        'print(s.has_prefix("abc", "ab"), s.has_suffix("abc", "bc"), s.contains("abc", "z"))'
    )
    assert log == "3\tc\tx\tbba\ntrue\ttrue\tfalse\n"


def test_path() -> None:
    log = out(
        'local p = require("path")\n'
        'local x = p.parse("a/b/c")\n'
        'print(x.parent, x.base_name, p.parse("c").parent == "")\n'
        'print(p.join("/", "a/", "/b", "c"), p.is_hidden("a/_b/c"), p.is_hidden("a/b"))\n'
        "print(p.default_separator())"
    )
    assert log == "a/b/\tc\ttrue\na/b/c\ttrue\tfalse\n/\n"


def test_regexp() -> None:
    log = out(
        'local re = require("regexp")\n'
        'print(re.match("^a.c$", "abc"), re.match("^a.c$", "abcd"), re.quote_meta("a.b*"))\n'
        'local c = re.compile("a(b)?")\n'
        'print(c.find("xab"), c.find("z") == "", #c.find_all("aaa", -1), #c.find_all("aaa", 2))\n'
        'local m = c.find_submatch("xa")\n'
        'print(#m, m[1], m[2] == "", #c.find_all_submatch("abab", -1), #c.find_submatch("z"))'
    )
    assert log == "true\tfalse\ta\\.b\\*\nab\ttrue\t3\t2\n2\ta\ttrue\t2\t0\n"
    error, _ = run('print(pcall(require("regexp").compile, "("))')
    assert error == ""


# the lakefs library and the service


@pytest.fixture
def catalog() -> Iterator[Catalog]:
    found = open_memory()
    found.create_repository("repo", "mem://repo")
    found.upload_object("repo", "main", "data/a.json", b'{"rows": 3}')
    found.upload_object("repo", "main", "data/sub/b.csv", b"x")
    found.upload_object("repo", "main", "top", b"t")
    found.commit("repo", "main", "first")
    yield found


def test_lakefs_library(catalog: Catalog) -> None:
    libs = libraries(CatalogClient(catalog, "repo", answer_for))
    log = out(
        'local lakefs = require("lakefs")\n'
        'local json = require("encoding/json")\n'
        'local code, body = lakefs.get_object("repo", "main", "data/a.json")\n'
        "print(code, json.unmarshal(body).rows)\n"
        'local missing, err = lakefs.get_object("repo", "main", "nope")\n'
        "print(missing, json.unmarshal(err).message ~= nil)\n"
        'code, body = lakefs.list_objects("repo", "main", "", "data/", "/")\n'
        "print(code, #body.results, body.results[1].path, body.results[2].path_type,"
        " body.pagination.has_more)\n"
        'code, body = lakefs.list_objects("repo", "main", "", "", "", 1)\n'
        "print(#body.results, body.pagination.has_more, body.pagination.next_offset)\n"
        'code, body = lakefs.stat_object("repo", "main", "top")\n'
        "print(code, json.unmarshal(body).size_bytes)\n"
        'print(lakefs.create_tag("repo", "main", "v1"))\n'
        'print((lakefs.create_tag("repo", "main", "v1")))',
        libraries=libs,
    )
    lines = log.splitlines()
    assert lines[0] == "200\t3"
    assert lines[1] == "404\ttrue"
    assert lines[2] == "200\t2\tdata/a.json\tcommon_prefix\tfalse"
    assert lines[3] == "1\ttrue\tdata/a.json"
    assert lines[4] == "200\t1"
    assert lines[5].startswith("201\ttable")
    assert lines[6] == "409"
    assert catalog.get_tag("repo", "v1") == catalog.get_branch("repo", "main").commit_id


def test_lakefs_diff_refs(catalog: Catalog) -> None:
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "data/c.txt", b"c")
    catalog.upload_object("repo", "dev", "new/d", b"d")
    catalog.commit("repo", "dev", "more")
    log = out(
        'local lakefs = require("lakefs")\n'
        'local code, body = lakefs.diff_refs("repo", "main", "dev")\n'
        "print(code, #body.results, body.results[1].path, body.results[1].type)\n"
        'code, body = lakefs.diff_refs("repo", "main", "dev", "", "", "/")\n'
        "print(#body.results, body.results[2].path, body.results[2].type)\n"
        'print((lakefs.diff_refs("repo", "main", "nope")))',
        libraries=libraries(CatalogClient(catalog, "repo", answer_for)),
    )
    assert log == "200\t2\tdata/c.txt\tadded\n2\tnew/\tprefix_changed\n404\n"


def _lua_action(name: str, event: str, properties: str) -> bytes:
    return (
        f"name: {name}\non:\n  {event}:\nhooks:\n  - id: check\n    type: lua\n"
        f"    properties:\n{properties}"
    ).encode()


REQUIRE_METADATA = """      args:
        notebook_url: {"pattern": "my-jupyter.example.com/.*"}
        spark_version: {}
      script: |
        regexp = require("regexp")
        for k, props in pairs(args) do
          current_value = action.commit.metadata[k]
          if current_value == nil then
            error("missing mandatory metadata field: " .. k)
          end
          if props.pattern and not regexp.match(props.pattern, current_value) then
            error("current value for commit metadata field " .. k .. " does not match pattern")
          end
        end
        print("metadata ok for " .. action.branch_id)
"""


def test_a_pre_commit_lua_hook_blocks_and_logs(catalog: Catalog) -> None:
    service = ActionsService(catalog)
    catalog.hooks = service
    try:
        catalog.upload_object(
            "repo",
            "main",
            "_lakefs_actions/meta.yaml",
            _lua_action("Metadata", "pre-commit", REQUIRE_METADATA),
        )
        head = catalog.get_branch("repo", "main").commit_id
        with pytest.raises(HookAbortError) as caught:
            catalog.commit("repo", "main", "no metadata", metadata={"spark_version": "3"})
        assert "missing mandatory metadata field: notebook_url" in str(caught.value)
        assert catalog.get_branch("repo", "main").commit_id == head
        metadata = {"spark_version": "3", "notebook_url": "my-jupyter.example.com/x"}
        done = catalog.commit("repo", "main", "with metadata", metadata=metadata).commit
        repo = catalog.get_repository("repo")
        runs = list(service.runs.list(repo))
        assert [r.status for r in runs] == ["completed", "failed"]
        log = catalog.block_store(repo).get(f"{LOG_PREFIX}{runs[0].run_id}/0000_0000.log")
        assert log == b"metadata ok for main\n"
        assert runs[0].commit_id == done.id
    finally:
        service.close()


def test_the_action_global_of_a_post_commit(catalog: Catalog) -> None:
    service = ActionsService(catalog)
    catalog.hooks = service
    script = "      script: |\n        print(require('encoding/json').marshal(action))\n"
    try:
        catalog.upload_object(
            "repo", "main", "_lakefs_actions/dump.yaml", _lua_action("Dump", "post-commit", script)
        )
        done = catalog.commit("repo", "main", "dump", committer="bob", metadata={"k": "v"}).commit
        service.close()
        repo = catalog.get_repository("repo")
        [run_record] = service.runs.list(repo)
        log = catalog.block_store(repo).get(f"{LOG_PREFIX}{run_record.run_id}/0000_0000.log")
        action = json.loads(log)
        assert action["event_type"] == "post-commit"
        assert action["commit_id"] == action["source_ref"] == done.id
        assert (action["repository_id"], action["branch_id"], action["tag_id"]) == (
            "repo",
            "main",
            "",
        )
        assert action["run_id"] == run_record.run_id
        assert action["storage_namespace"] == "mem://repo"
        assert action["commit"]["message"] == "dump"
        assert action["commit"]["committer"] == "bob"
        assert action["commit"]["metadata"] == {"k": "v"}
        assert action["commit"]["parents"] == list(done.parents)
        assert action["commit"]["meta_range_id"] == done.metarange_id
    finally:
        service.close()


def test_a_script_file_is_read_at_the_source_ref() -> None:
    hook = ActionHook("h", "lua", {"script_path": "scripts/a.lua", "args": {"n": 2}})
    scripts = {"scripts/a.lua": "print(args.n * 21)"}

    def read(path: str) -> str:
        if path not in scripts:
            raise ScriptNotFoundError(404)
        return scripts[path]

    found = call_lua_hook(hook, ACTION, read_script=read, libraries={})
    assert (found.error, found.log) == ("", "42\n")
    missing = ActionHook("h", "lua", {"script_file": "scripts/b.lua"})
    found = call_lua_hook(missing, ACTION, read_script=read, libraries={})
    assert found.error == "could not load script_file scripts/b.lua: HTTP 404: invalid action"
    bad = ActionHook("h", "lua", {"script": "x()", "timeout": "soon"})
    assert call_lua_hook(bad, ACTION, read_script=read, libraries={}).error.startswith(
        "action failed: time: invalid duration"
    )


def test_catalog_errors_keep_their_status(catalog: Catalog) -> None:
    client = CatalogClient(catalog, "repo", answer_for)
    assert client.list_objects("repo", "nope")[0] == 404
    assert client.create_tag("repo", "nope", "v2")[0] == 404
    with pytest.raises(NotFoundError):
        catalog.get_tag("repo", "v2")


def test_a_hook_reaches_only_its_own_repository(catalog: Catalog) -> None:
    catalog.create_repository("other", "mem://other")
    catalog.upload_object("other", "main", "secret", b"s")
    catalog.commit("other", "main", "secret")
    client = CatalogClient(catalog, "repo", answer_for)
    status, body = client.get_object("other", "main", "secret")
    assert status == 403 and "insufficient permissions" in body
    assert client.stat_object("other", "main", "secret")[0] == 403
    assert client.list_objects("other", "main")[0] == 403
    assert client.diff_refs("other", "main", "main")[0] == 403
    assert client.create_tag("other", "main", "v9")[0] == 403
    with pytest.raises(NotFoundError):
        catalog.get_tag("other", "v9")
    assert client.get_object("repo", "main", "top") == (200, b"t")


def test_args_take_prefixed_environment_variables_masked_in_the_log() -> None:
    hook = ActionHook(
        "h",
        "lua",
        {
            "script": "print(args.token .. '!')\nerror(args.token)",
            "args": {"token": "{{ ENV.LAKEFSACTION_TOKEN }}"},
        },
    )
    environ = {"LAKEFSACTION_TOKEN": "t0ps3cret", "OTHER": "x"}

    def read(path: str) -> str:
        raise ScriptNotFoundError(404)

    found = call_lua_hook(hook, ACTION, read_script=read, libraries={}, environ=environ)
    assert found.log.startswith("******!\n")
    assert found.error == 'runtime error: [string "lua"]:2: ******'
    assert "t0ps3cret" not in found.log
    other = ActionHook("h", "lua", {"script": "print(1)", "args": {"a": ["{{ ENV.OTHER }}"]}})
    refused = call_lua_hook(other, ACTION, read_script=read, libraries={}, environ=environ)
    assert refused.error == (
        "action failed: environment variable 'OTHER' is not allowed (prefix 'LAKEFSACTION_')"
    )

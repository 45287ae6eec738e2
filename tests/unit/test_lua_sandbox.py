"""Known ways out of a Lua sandbox, each tried against a lua hook's VM: every one fails cleanly.

``tests/unit/test_actions_lua.py`` covers the absent globals, ``require`` of a missing module,
bytecode through ``load``, Python attributes, endless loops and the memory limit; here are the
other routes: bytecode by other doors, metatables, hidden modules, coroutines that swallow the
timeout, finalizers, the garbage collector, memory and time bombs in library calls. Each runs
in a fresh VM with a short deadline; none may take much longer than that deadline.
"""

from __future__ import annotations

import re
import time

import pytest

from mirror.actions.lua import run_lua
from mirror.actions.lua_libs import libraries

TIMEOUT = 0.5
TIMED_OUT = "runtime error: lua hook timed out after 0.5s"
MEMORY = "runtime error: not enough memory"


def run(script: str, *, max_memory: int = 32 * 1024 * 1024) -> tuple[str, str]:
    """Run ``script`` as a hook; return its error and log, checking it ended near the deadline."""
    start = time.monotonic()
    outcome = run_lua(
        script,
        action={},
        args={},
        username="u",
        libraries=libraries(None),
        timeout=TIMEOUT,
        max_memory=max_memory,
    )
    assert time.monotonic() - start < TIMEOUT + 4, script
    return outcome.error, outcome.log


def out(script: str) -> str:
    error, log = run(script)
    assert error == "", log
    return log


# bytecode


def test_no_dump_by_any_name() -> None:
    assert out('print(string.dump, getmetatable("").__index.dump, ("").dump)') == "nil\tnil\tnil\n"


@pytest.mark.parametrize(
    "call",
    [
        'load(string.char(27) .. "Lua", "x", "b")',
        'load(string.char(27) .. "Lua", "x", "bt")',
        'load(string.char(27) .. "Lua", "x", "b", {})',
        'load(function() local c = chunks; chunks = nil; return c end, "x", "b")',
    ],
)
def test_load_never_takes_a_binary_chunk(call: str) -> None:
    log = out(f'chunks = string.char(27) .. "LuaR"\nprint({call})')
    assert log == "nil\tattempt to load a binary chunk (mode is 't')\n"


def test_load_in_text_mode_still_runs_source_with_its_own_environment() -> None:
    assert out('print(load("return x", "s", "b", {x = 7})())') == "7\n"


# metatables and hidden modules


def test_the_strings_metatable_changes_only_this_run() -> None:
    changed = out(
        'local mt = getmetatable("")\n'
        "mt.__index = function(s, k) return k end\n"
        'print(("x").anything, pcall(getmetatable, ""))'
    )
    assert changed.startswith("anything\ttrue\t")
    assert out('print(("x"):upper(), ("x").anything)') == "X\tnil\n"


def test_hidden_modules_stay_hidden_from_raw_access() -> None:
    log = out(
        'for _, name in ipairs({"os", "io", "debug", "python", "dofile", "loadfile"}) do\n'
        "  io_ = rawget(_G, name)\n"
        "  if io_ ~= nil then print(name) end\n"
        "end\n"
        "for name in pairs(package.loaded) do\n"
        '  if name == "os" or name == "io" or name == "debug" then print(name) end\n'
        "end\n"
        'print(package.loadlib, package.searchers, package.path, package.cpath, "done")'
    )
    assert log == "nil\tnil\tnil\tnil\tdone\n"


@pytest.mark.parametrize("name", ["os", "io", "debug", "package", "ffi", "lupa", "_G.os"])
def test_require_of_a_system_module_fails(name: str) -> None:
    assert out(f'print(pcall(require, "{name}"))') == f"false\tmodule '{name}' not found\n"


def test_a_metatable_on_the_globals_reaches_nothing_hidden() -> None:
    log = out(
        "setmetatable(_G, {__index = function(t, k) return rawget(t, k) end})\n"
        "print(os, io, debug)\n"
        "setmetatable(_G, nil)\n"
        'print(getmetatable(_G), pcall(setmetatable, "", {}))'
    )
    assert log == (
        "nil\tnil\tnil\n"
        "nil\tfalse\tbad argument #1 to 'setmetatable' (table expected, got string)\n"
    )


# time: coroutines, finalizers, library calls


@pytest.mark.parametrize(
    "script",
    [
        # a loop in a coroutine whose timeout the script catches, then ends
        "local co = coroutine.create(function() while true do end end)\n"
        "print(coroutine.resume(co))",
        "print(pcall(coroutine.wrap(function() while true do end end)))",
        "local co = coroutine.create(function()\n"
        "  local inner = coroutine.create(function() while true do end end)\n"
        "  coroutine.resume(inner)\n"
        "end)\n"
        "print(coroutine.resume(co))",
        # yielding out of the loop every time round
        "local co = coroutine.wrap(function() while true do coroutine.yield() end end)\n"
        "while true do co() end",
        "while true do xpcall(function() while true do end end, function(e) return e end) end",
        # a comparator, a __tostring and a gsub callback that never return
        "local t = {} for i = 1, 50 do t[i] = i end\n"
        "table.sort(t, function(a, b) while true do end end)",
        "print(setmetatable({}, {__tostring = function() while true do end end}))",
        'string.rep("a", 10):gsub("a", function() while true do end end)',
    ],
)
def test_time_bombs_fail_at_the_deadline(script: str) -> None:
    assert run(script)[0] == TIMED_OUT


@pytest.mark.parametrize(
    "script",
    [
        "setmetatable({}, {__gc = function() while true do end end})\ncollectgarbage()",
        # set on a metatable after the fact: Lua never marks the object either
        "local mt = {} setmetatable({}, mt) mt.__gc = function() while true do end end\n"
        "collectgarbage()",
        # left for the VM's close
        "t = setmetatable({}, {__gc = function() while true do end end})",
    ],
)
def test_finalizers_never_run(script: str) -> None:
    error, log = run(script + '\nprint("ended")')
    assert (error, log) == ("", "ended\n")


def test_setmetatable_keeps_the_gc_field_and_its_own_errors() -> None:
    log = out(
        "local mt = {__gc = print, __index = {x = 1}}\n"
        "local t = setmetatable({}, mt)\n"
        "print(t.x, rawget(mt, '__gc') == print, getmetatable(t) == mt)\n"
        "local locked = setmetatable({}, {__metatable = 'locked'})\n"
        "print(pcall(setmetatable, locked, {__gc = print}))"
    )
    assert log == "1\ttrue\ttrue\nfalse\tcannot change a protected metatable\n"


@pytest.mark.parametrize(
    "pattern",
    [
        "(a+)+$",
        "(a|aa)+$",
        "(.*a){25}b",
        "(a*)*b",
    ],
)
def test_the_regexp_library_has_no_catastrophic_backtracking(pattern: str) -> None:
    log = out(
        f'local re = require("regexp")\nprint(re.match("{pattern}", string.rep("a", 1e5) .. "!"))'
    )
    assert log == "false\n"


def test_a_bad_regexp_is_a_clear_error() -> None:
    error, _ = run('require("regexp").match("(", "x")')
    assert error == "runtime error: error parsing regexp: missing ): ("


# memory and the garbage collector


@pytest.mark.parametrize(
    "script",
    [
        'local s = string.rep("x", 2^30)',
        'local s = string.rep("x", 1e6, string.rep("y", 1e3))',
        "local t = {} local i = 0 while true do i = i + 1 t[i] = i end",
        "local t = {} while true do t[#t + 1] = {} end",
        'local s = "x" while true do s = s .. s end',
        'collectgarbage("stop") local t = {} for i = 1, 1e9 do t[i] = ("x"):rep(100) .. i end',
        'collectgarbage("setpause", 1e6) local t = {} while true do t[#t + 1] = {1, 2, 3} end',
        'local t = {} for i = 1, 1e6 do t[i] = ("x"):rep(100) end print(#table.concat(t))',
    ],
)
def test_memory_bombs_fail_with_not_enough_memory(script: str) -> None:
    assert run(script, max_memory=16 * 1024 * 1024)[0] == MEMORY


@pytest.mark.parametrize(
    "call",
    [
        # results that would be built in the server's memory before the VM could refuse them
        'require("strings").split(string.rep("x", 2e6), "")',
        'require("strings").replace(string.rep("x", 1e6), "x", string.rep("y", 1e3), -1)',
    ],
)
def test_library_results_are_bounded_before_they_are_built(call: str) -> None:
    assert run(f"local r = {call}")[0] == MEMORY


def test_find_all_returns_a_bounded_number_of_matches() -> None:
    error, _ = run('local r = require("regexp").compile("").find_all(string.rep("x", 2e6), -1)')
    assert error == "runtime error: regexp: more than 100000 matches"
    assert out('print(#require("regexp").compile("x").find_all(string.rep("x", 1e5), -1))') == (
        "100000\n"
    )


def test_collectgarbage_answers_without_escaping() -> None:
    log = out(
        'print(type(collectgarbage("count")), collectgarbage("step", 1e9), '
        'pcall(collectgarbage, "no such option"))'
    )
    # Lua names the function by a search of the loaded modules, in table order: with or
    # without the "_G." of the table it was found in
    assert re.fullmatch(
        r"number\ttrue\tfalse\tbad argument #1 to '(_G\.)?collectgarbage' "
        r"\(invalid option 'no such option'\)\n",
        log,
    ), log


@pytest.mark.parametrize(
    ("script", "error"),
    [
        ("error({})", "runtime error: (error object is not a string)"),
        ("error()", "runtime error: (error object is not a string)"),
        (
            "error(setmetatable({}, {__tostring = function() while true do end end}))",
            "runtime error: (error object is not a string)",
        ),
        ("local function f() return 1 + f() end f()", MEMORY),
    ],
)
def test_odd_errors_fail_the_hook_with_a_message(script: str, error: str) -> None:
    assert run(script, max_memory=16 * 1024 * 1024)[0] == error

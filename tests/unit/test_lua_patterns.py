"""Lua hooks' interruptible pattern matching: the same answers as Lua's C functions.

:mod:`mirror.actions.lua_patterns` matches in Lua when C's matcher could run long. Hypothesis
draws patterns, subjects and replacements and checks that its matcher (forced with a budget of
zero) answers each call exactly as C does, errors included; the subjects are short, so C is
quick on every pattern drawn.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lupa import lua52

from mirror.actions.lua import run_lua
from mirror.actions.lua_libs import libraries
from mirror.actions.lua_patterns import NATIVE_BUDGET, SOURCE

# calls both implementations of one function and returns both answers, as flat lists
_COMPARE = b"""
local c_find, c_match, c_gmatch, c_gsub = string.find, string.match, string.gmatch, string.gsub
local budget = ...
local lua_fns = {}
do
  local saved = {string.find, string.match, string.gmatch, string.gsub}
  load(SOURCE)(budget)
  lua_fns.find, lua_fns.match, lua_fns.gmatch, lua_fns.gsub =
    string.find, string.match, string.gmatch, string.gsub
  string.find, string.match, string.gmatch, string.gsub = saved[1], saved[2], saved[3], saved[4]
end
local c_fns = {find = c_find, match = c_match, gmatch = c_gmatch, gsub = c_gsub}

local function run(fns, name, s, p, a, b)
  if name == "gmatch" then
    return pcall(function()
      local out = {}
      for x, y in fns.gmatch(s, p) do
        out[#out + 1] = tostring(x)
        out[#out + 1] = tostring(y)
      end
      return table.concat(out, "|")
    end)
  end
  if name == "gsub_table" then
    return pcall(fns.gsub, s, p, {a = "A", b = false, ["1"] = 7, ["("] = {}}, b)
  end
  if name == "gsub_function" then
    return pcall(fns.gsub, s, p, function(x, y) return y and (x .. "/" .. tostring(y)) end, b)
  end
  return pcall(fns[name], s, p, a, b)
end

return function(name, s, p, a, b)
  local mine = table.pack(run(lua_fns, name, s, p, a, b))
  local theirs = table.pack(run(c_fns, name, s, p, a, b))
  local one, two = {}, {}
  for i = 1, mine.n do one[i] = tostring(mine[i]) end
  for i = 1, theirs.n do two[i] = tostring(theirs[i]) end
  return table.concat(one, "\\0"), table.concat(two, "\\0")
end
"""


def _comparer(budget: int) -> Any:
    runtime = lua52.LuaRuntime(encoding=None, register_eval=False)
    runtime.globals()[b"SOURCE"] = SOURCE
    return runtime.execute(_COMPARE, budget)


COMPARE = _comparer(-1)  # every call takes the Lua matcher

PATTERN_CHARS = "ab()%.[]^$*+-?dswbfx1209"
patterns = st.text(PATTERN_CHARS, max_size=8).map(str.encode)
subjects = st.text("ab()x1 %", max_size=10).map(str.encode)
replacements = st.text("aA%01239()", max_size=5).map(str.encode)
inits = st.one_of(st.none(), st.integers(-12, 12))


def same(name: str, s: bytes, p: bytes, a: Any = None, b: Any = None) -> None:
    mine, theirs = COMPARE(name, s, p, a, b)
    assert mine == theirs, (name, s, p, a, b)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(s=subjects, p=patterns, init=inits, plain=st.sampled_from([None, True, False]))
def test_find_and_match_answer_as_c_does(s: bytes, p: bytes, init: int | None, plain: Any) -> None:
    same("find", s, p, init, plain)
    same("match", s, p, init)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(s=subjects, p=patterns)
def test_gmatch_answers_as_c_does(s: bytes, p: bytes) -> None:
    same("gmatch", s, p)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(s=subjects, p=patterns, repl=replacements, limit=st.one_of(st.none(), st.integers(-1, 3)))
def test_gsub_answers_as_c_does(s: bytes, p: bytes, repl: bytes, limit: int | None) -> None:
    same("gsub", s, p, repl, limit)
    same("gsub_table", s, p, None, limit)
    same("gsub_function", s, p, None, limit)


@pytest.mark.parametrize(
    ("name", "s", "p", "a", "b"),
    [
        ("find", b"x = [a(b)c] y", b"%b()", None, None),
        ("find", b"THE (quick) fox", b"%f[%a]%a+", 5, None),
        ("match", b"key=value", b"^(%w+)=(%w*)$", None, None),
        ("match", b"hello", b"()ll()", None, None),
        ("match", b"abcabc", b"(a(b)c)%1", None, None),
        ("gsub", b"hello world", b"(%w+)", b"<%1>", None),
        ("gsub", b"abc", b"%w", b"%0%0", 2),
        ("gsub", b"abc", b"", b"-", None),
        ("gsub", b"abc", b"^", b">", None),
        ("gmatch", b"one two  three", b"%a+", None, None),
        ("gmatch", b"k1=v1, k2=v2", b"(%w+)=(%w+)", None, None),
        ("find", b"a.b", b".", 1, True),
        ("find", b"aaa", b"a-b", None, None),
        ("find", b"x", b"[%", None, None),
        ("find", b"x", b"(()", None, None),
        ("gsub", b"x", b"x", b"%2", None),
        ("find", b"x", b"%g+%G*%c?%p?%u?%l?%x?%X?%z?", None, None),
        ("find", b"\x00a", b"[%z]", None, None),
        ("find", b"a]b", b"[]]", None, None),
        ("find", b"a-b", b"[a%-]+", None, None),
        ("find", b"abc", b"[^%a]", None, None),
        ("find", b"a" * 300, b"(" * 40 + b"a" + b")" * 40, None, None),
        ("find", b"a" * 250, b"a?" * 250, None, None),
    ],
)
def test_chosen_calls_answer_as_c_does(name: str, s: bytes, p: bytes, a: Any, b: Any) -> None:
    same(name, s, p, a, b)


def test_cheap_calls_take_c_and_errors_name_the_callers_line() -> None:
    runtime = lua52.LuaRuntime(encoding=None, register_eval=False)
    runtime.execute(SOURCE, NATIVE_BUDGET)
    lua_only = lua52.LuaRuntime(encoding=None, register_eval=False)
    lua_only.execute(SOURCE, -1)
    script = (
        b'local ok, err = pcall(function()\n  local at = ("x"):find("[a") return at\nend)\n'
        b"return err"
    )
    assert runtime.execute(script) == lua_only.execute(script)
    assert lua_only.execute(script) == b"[string \"<python>\"]:2: malformed pattern (missing ']')"


def hook(script: str, timeout: float = 0.5) -> tuple[str, float]:
    start = time.monotonic()
    outcome = run_lua(
        script, action={}, args={}, username="u", libraries=libraries(None), timeout=timeout
    )
    return outcome.error, time.monotonic() - start


@pytest.mark.parametrize(
    "script",
    [
        # backtracking that C would run for hours: the hook's deadline stops it
        'local s = string.rep("a", 1e5) return s:find(".-.-.-.-b")',
        'local s = string.rep("a", 3e5) return s:match("a.*b")',
        'local s = string.rep("a", 40) return s:find(string.rep("a*", 30) .. "b")',
        'local s = string.rep("(", 3e5) return s:gsub("%b()", "")',
        'local s = string.rep("a", 3e5) for x in s:gmatch("a-a-a-b") do end',
        # a plain search for a long needle that almost matches everywhere
        'local s = string.rep("a", 1e7) return s:find(string.rep("a", 1e4) .. "b", 1, true)',
    ],
)
def test_pattern_bombs_end_at_the_deadline(script: str) -> None:
    error, took = hook(script)
    assert error == "runtime error: lua hook timed out after 0.5s"
    assert took < 5


def test_long_subjects_match_as_c_does() -> None:
    script = (
        'local s = string.rep("word ", 2e5)\n'
        'local n = select(2, s:gsub("%s+", ""))\n'
        'local count = 0 for _ in s:gmatch("%a+") do count = count + 1 end\n'
        'local json = "{" .. string.rep(" ", 1e5) .. \'"rows": 42}\'\n'
        'print(n, count, s:find("word", 1e6 - 4, true), json:match(\'"rows":%s*(%d+)\'))'
    )
    outcome = run_lua(
        script, action={}, args={}, username="u", libraries=libraries(None), timeout=5.0
    )
    assert (outcome.error, outcome.log) == ("", "200000\t200000\t999996\t42\n")

"""Lua hooks: a script run in a sandboxed Lua 5.2 VM (lupa), as lakeFS runs them (go-lua, 5.2).

The script sees the globals ``action`` (the event), ``args`` (the hook's ``args`` property) and
``username``, and may ``require`` the libraries of :mod:`mirror.actions.lua_libs`. ``print``
writes to the hook's output log. A Lua error fails the hook with lakeFS's text (``runtime
error: [string "lua"]:3: ...``).

The sandbox: no ``os``, ``io``, ``debug``, ``dofile``, ``loadfile``, ``string.dump`` nor
``package`` loaders; ``load`` takes source text only (never bytecode); ``require`` answers only
the provided libraries. Python objects never reach the script: library functions are Lua
closures over them, and a Python attribute is never readable from Lua. A count hook checks the
deadline every few thousand VM instructions (in every coroutine) and, once it has passed, fails
every instruction, so a loop inside ``pcall`` cannot outlive it; a script that catches the
timeout (in a coroutine) and ends fails all the same. The VM's allocator refuses memory past
``max_memory``.

What the count hook cannot reach is closed off: C's pattern matching, which runs as one step,
is replaced where it could run long (:mod:`mirror.actions.lua_patterns`); ``__gc`` metamethods
never run (Lua calls finalizers with hooks off, and at the VM's close, so an endless one would
hold the thread for good; lakeFS's go-lua never runs them either): ``setmetatable`` does not
mark an object for finalization. The ``regexp`` library is RE2's, linear in its input.

lupa is imported when a lua hook runs, never by processes that do not run one.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from mirror.actions.lua_libs import Library, LuaLibError, raw, text
from mirror.actions.lua_patterns import NATIVE_BUDGET
from mirror.actions.lua_patterns import SOURCE as PATTERNS
from mirror.actions.model import LUA_SCRIPT_PATHS, ActionHook
from mirror.actions.webhook import (
    DEFAULT_TIMEOUT,
    HookConfigError,
    HookOutcome,
    Secrets,
    parse_duration,
)

__all__ = ["DEFAULT_MAX_MEMORY", "MAX_OUTPUT", "ScriptNotFoundError", "call_lua_hook", "run_lua"]

DEFAULT_MAX_MEMORY = 128 * 1024 * 1024
"""The memory a hook's Lua VM may allocate."""

MAX_OUTPUT = 4 * 1024 * 1024
"""The bytes of ``print`` output kept in a hook's log; more is dropped."""

_CHECK_EVERY = 2000
_MAX_DEPTH = 64

# Runs first, with the Python callbacks as arguments; returns the helpers Python needs. Kept
# locals (sethook, setmetatable, ...) are reachable only from these closures.
_SANDBOX = b"""
local write, expired, timeout_message, check_every = ...
local G = _G
local sethook, setmetatable, getmetatable = debug.sethook, setmetatable, getmetatable
local raw_getmetatable = debug.getmetatable
local rawget = rawget
local type, next, select, error, tostring = type, next, select, error, tostring
local pack, unpack, concat = table.pack, table.unpack, table.concat
local real_load = load

local function deny()
  sethook(function() error(timeout_message, 0) end, "", 1)
  error(timeout_message, 0)
end
local function check() if expired() then deny() end end
sethook(check, "", check_every)

-- a hook belongs to one coroutine: each new one gets the deadline check too
local co_create, co_resume = coroutine.create, coroutine.resume
coroutine.create = function(f)
  local co = co_create(f)
  sethook(co, check, "", check_every)
  return co
end
coroutine.wrap = function(f)
  local co = coroutine.create(f)
  return function(...)
    local r = pack(co_resume(co, ...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

for _, name in ipairs({"os", "io", "debug", "dofile", "loadfile", "loadstring", "module",
                        "python", "require", "package", "warn", "newproxy", "gcinfo"}) do
  G[name] = nil
end
string.dump = nil

-- a finalizer runs with hooks off, so nothing could stop an endless one: setmetatable never
-- marks an object for finalization (the metatable keeps its __gc field, unused); it checks its
-- arguments itself, so that its errors read as the real one's
local real_setmetatable, rawset = setmetatable, rawset
G.setmetatable = function(...)
  local t, mt = ...
  if type(t) ~= "table" then
    local got = select("#", ...) == 0 and "no value" or type(t)
    error("bad argument #1 to 'setmetatable' (table expected, got " .. got .. ")", 2)
  end
  if mt ~= nil and type(mt) ~= "table" then
    error("bad argument #2 to 'setmetatable' (nil or table expected)", 2)
  end
  local current = raw_getmetatable(t)
  if current ~= nil and rawget(current, "__metatable") ~= nil then
    error("cannot change a protected metatable", 2)
  end
  local gc = mt ~= nil and rawget(mt, "__gc") or nil
  if gc == nil then
    real_setmetatable(t, mt)
    return t
  end
  rawset(mt, "__gc", nil)
  real_setmetatable(t, mt)
  rawset(mt, "__gc", gc)
  return t
end

G.load = function(chunk, name, mode, ...)
  if select("#", ...) > 0 then return real_load(chunk, name, "t", ...) end
  return real_load(chunk, name, "t")
end

G.print = function(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  write(concat(parts, "\\t") .. "\\n")
end

local array_mt = {_is_array = true}
G.array = function(t)
  t = t or {}
  setmetatable(t, array_mt)
  return t
end

local loaded = {string = string, table = table, math = math, bit32 = bit32,
                coroutine = coroutine, _G = G}
G.require = function(name)
  local found = loaded[name]
  if found == nil then error("module '" .. tostring(name) .. "' not found", 2) end
  return found
end
G.package = {loaded = loaded}

local function wrap(f)
  return function(...)
    local r = pack(f(...))
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, r.n)
  end
end

local function is_array(t)
  local mt = getmetatable(t)
  if type(mt) == "table" and rawget(mt, "_is_array") then return true end
  local n = 0
  for k in next, t do
    if type(k) ~= "number" then return false end
    n = n + 1
  end
  return n > 0 and n == #t
end

local function mark_array(t) setmetatable(t, array_mt) return t end

return wrap, is_array, mark_array, loaded
"""


class ScriptNotFoundError(Exception):
    """A hook's script file could not be read; ``status`` is the HTTP status the API answers."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def call_lua_hook(
    hook: ActionHook,
    action: Mapping[str, Any],
    *,
    read_script: Callable[[str], str],
    libraries: Mapping[str, Library],
    username: str = "",
    env_prefix: str = "LAKEFSACTION_",
    environ: Mapping[str, str] | None = None,
    max_memory: int = DEFAULT_MAX_MEMORY,
) -> HookOutcome:
    """Run a lua hook for an event; never raises.

    Strings in ``args`` take ``{{ ENV.X }}`` as webhook properties do (lakeFS's secure
    strings); the values are masked in the log and the error.

    Args:
        hook: A hook of type ``lua`` (validated by :func:`~mirror.actions.model.parse_action`).
        action: The event, the script's global ``action``.
        read_script: Returns the text of a repository path at the event's source ref; raises
            :class:`ScriptNotFoundError` when it cannot.
        libraries: What ``require`` answers.
        username: The script's global ``username``.
        env_prefix: Only environment variables starting with it may be substituted.
        environ: The environment (the process's by default).
        max_memory: Bytes the VM may allocate.
    """
    props = hook.properties
    secrets = Secrets(env_prefix, os.environ if environ is None else environ)
    try:
        timeout = parse_duration(str(props.get("timeout") or "")) or DEFAULT_TIMEOUT
        args = _expand(secrets, dict(props.get("args") or {}))
    except HookConfigError as exc:
        return HookOutcome(f"action failed: {exc}", f"Configuration error: {exc}\n")
    script = props.get("script")
    if not isinstance(script, str):
        key = next(k for k in LUA_SCRIPT_PATHS if k in props)
        path = str(props[key])
        try:
            script = read_script(path)
        except ScriptNotFoundError as exc:
            error = f"could not load {key} {path}: HTTP {exc.status}: invalid action"
            return HookOutcome(error, f"Error: {error}\n")
    outcome = run_lua(
        script,
        action=action,
        args=args,
        username=username,
        libraries=libraries,
        timeout=timeout,
        max_memory=max_memory,
    )
    return HookOutcome(secrets.mask(outcome.error), secrets.mask(outcome.log))


def _expand(secrets: Secrets, value: Any) -> Any:
    if isinstance(value, str):
        return secrets.expand(value)
    if isinstance(value, dict):
        return {k: _expand(secrets, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(secrets, v) for v in value]
    return value


def _deny_attributes(obj: object, name: object, is_setting: bool) -> object:
    raise AttributeError("Python attributes are not accessible from lua hooks")


class _Bridge:
    """Converts values between Python and one Lua runtime (lupa's untyped objects stay here)."""

    def __init__(self, runtime: Any, lua_type: Callable[[Any], Any], helpers: Any) -> None:
        self.runtime = runtime
        self.lua_type = lua_type
        self.wrap, self.is_array, self.mark_array, self.loaded = helpers

    def to_lua(self, value: Any, depth: int = 0) -> Any:
        """Return ``value`` for Lua: str as bytes, dicts and lists as tables, callables wrapped."""
        if depth > _MAX_DEPTH:
            raise LuaLibError("value nested too deeply")
        if isinstance(value, str):
            return raw(value)
        if value is None or isinstance(value, bool | int | float | bytes):
            return value
        if isinstance(value, Mapping):
            table = self.runtime.table()
            for key, item in value.items():
                table[self.to_lua(key, depth + 1)] = self.to_lua(item, depth + 1)
            return table
        if isinstance(value, list | tuple):
            table = self.runtime.table()
            for i, item in enumerate(value, 1):
                table[i] = self.to_lua(item, depth + 1)
            return self.mark_array(table)
        if callable(value):
            return self.function(value)
        raise LuaLibError(f"cannot pass a {type(value).__name__} to lua")

    def from_lua(self, value: Any, depth: int = 0) -> Any:
        """Return a Lua value as Python (strings as ``str``, tables as dicts or lists)."""
        if depth > _MAX_DEPTH:
            raise LuaLibError("table nested too deeply")
        if isinstance(value, bytes):
            return text(value)
        if value is None or isinstance(value, bool | int | float):
            return value
        kind = self.lua_type(value)
        if kind != "table":
            raise LuaLibError(f"unsupported type {kind}")
        if self.is_array(value):
            return [self.from_lua(value[i], depth + 1) for i in range(1, len(value) + 1)]
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = key if isinstance(key, bytes) else str(key).encode()
            out[text(name)] = self.from_lua(item, depth + 1)
        return out

    def function(self, fn: Callable[..., Any]) -> Any:
        """Return ``fn`` as a Lua function: arguments and results converted, errors raised."""

        def call(*args: Any) -> tuple[Any, ...]:
            try:
                result = fn(*(self.from_lua(a) for a in args))
                results = result if isinstance(result, tuple) else (result,)
                return (True, *(self.to_lua(r) for r in results))
            except LuaLibError as exc:
                return (False, raw(str(exc)))
            except Exception as exc:  # a library bug must fail the hook, not the server
                return (False, raw(f"{type(exc).__name__}: {exc}"))

        return self.wrap(call)


def _strip_traceback(message: str) -> str:
    message = ("\n" + message).split("\nstack traceback:", 1)[0][1:]
    message = message.removeprefix("error loading code: ")
    # error() with a table or nil: what the Lua interpreter prints for those
    return message or "(error object is not a string)"


def run_lua(
    script: str,
    *,
    action: Mapping[str, Any],
    args: Mapping[str, Any],
    username: str,
    libraries: Mapping[str, Library],
    timeout: float,
    max_memory: int = DEFAULT_MAX_MEMORY,
) -> HookOutcome:
    """Run ``script`` in a fresh sandboxed VM; never raises.

    Args:
        script: The Lua source.
        action: The global ``action`` (the event).
        args: The global ``args``.
        username: The global ``username``.
        libraries: What ``require`` answers, by name (see :func:`lua_libs.libraries`).
        timeout: Seconds the script may run.
        max_memory: Bytes the VM may allocate.

    Returns:
        The outcome: ``error`` empty on success, the log holds what ``print`` wrote.
    """
    from lupa import lua52

    output: list[str] = []
    size = 0
    deadline = time.monotonic() + timeout
    timed_out = False

    def write(line: bytes) -> None:
        nonlocal size
        if size >= MAX_OUTPUT:
            return
        if size + len(line) >= MAX_OUTPUT:
            line = line[: MAX_OUTPUT - size] + b"\n[output truncated]\n"
        size += len(line)
        output.append(text(line))

    def expired() -> bool:
        nonlocal timed_out
        timed_out = timed_out or time.monotonic() > deadline
        return timed_out

    timeout_message = f"lua hook timed out after {timeout:g}s"
    error = ""
    try:
        runtime = lua52.LuaRuntime(
            encoding=None,
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_deny_attributes,
            max_memory=max_memory,
        )
        runtime.execute(PATTERNS, NATIVE_BUDGET, name="patterns")
        helpers = runtime.execute(
            _SANDBOX, write, expired, timeout_message.encode(), _CHECK_EVERY, name="sandbox"
        )
        bridge = _Bridge(runtime, lua52.lua_type, helpers)
        for name, library in libraries.items():
            bridge.loaded[raw(name)] = bridge.to_lua(
                {fn_name: fn for fn_name, fn in library.items()}
            )
        g = runtime.globals()
        g[b"action"] = bridge.to_lua(dict(action))
        g[b"args"] = bridge.to_lua(dict(args))
        g[b"username"] = raw(username)
        runtime.execute(raw(script), name="lua", mode="t")
        if timed_out:
            # the script caught the timeout (in a coroutine, say) and ended: it failed all the same
            error = f"runtime error: {timeout_message}"
    except lua52.LuaSyntaxError as exc:
        error = f"syntax error: {_strip_traceback(str(exc))}"
    except lua52.LuaMemoryError:
        error = "runtime error: not enough memory"
    except lua52.LuaError as exc:
        if timed_out:
            error = f"runtime error: {timeout_message}"
        else:
            error = f"runtime error: {_strip_traceback(str(exc))}"
    except LuaLibError as exc:
        error = f"runtime error: {exc}"
    log = "".join(output)
    if error:
        log += f"Error: {error}\n"
    return HookOutcome(error, log)

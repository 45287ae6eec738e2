"""Action files: the YAML under ``_lakefs_actions/``, parsed and validated as lakeFS does.

An action names the events it runs ``on`` (with optional branch patterns) and the hooks it
runs, in order (pkg/actions/action.go). Webhook, airflow and lua hooks are supported; a lua
hook's properties are checked here, its script only when it runs (:mod:`mirror.actions.lua`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from mirror.actions.glob import BadPatternError, path_match, validate_pattern
from mirror.core.hooks import EVENT_TYPES, HookEvent
from mirror.errors import LakeMirrorError

__all__ = [
    "ACTIONS_PREFIX",
    "LUA_SCRIPT_PATHS",
    "Action",
    "ActionFileError",
    "ActionHook",
    "parse_action",
]

ACTIONS_PREFIX = "_lakefs_actions/"
"""Where a ref's action files are: every object directly under it."""

_NAME = re.compile(r"^\w[\w\-. ]+$")
_HOOK_ID = re.compile(r"^[_a-zA-Z][\-_a-zA-Z0-9]{1,255}$")
_TAG_EVENTS = frozenset(e for e in EVENT_TYPES if e.endswith("-tag"))
_IFS = {"": "success()", "success()": "success()", "failure()": "failure()"}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "webhook": ("url",),
    "airflow": ("url", "dag_id", "username", "password"),
    "lua": (),
}
_MAX_DEPTH = 64
_MAX_NODES = 100_000
"""A document's bounds: how deep it nests, how many nodes it has with its aliases expanded."""
LUA_SCRIPT_PATHS = ("script_path", "script_file")
"""A lua hook's script in the repository: lakeFS reads ``script_path`` (its docs said
``script_file``); both are accepted."""


class _Loader(yaml.SafeLoader):
    """YAML 1.2's booleans (only ``true``/``false``), as Go reads them: ``on`` is a key."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """Construct ``node``; a scalar its tag cannot read is a YAML error.

        PyYAML's constructors raise what they meet: ValueError for ``2001-13-01`` or
        ``!!int x``, IndexError, KeyError or AttributeError for an empty ``!!int``, ``!!bool``
        or ``!!timestamp``.
        """
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError) as exc:
            what = repr(node.value)[:60] if isinstance(node, yaml.ScalarNode) else "a node"
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {what} as {node.tag}: {exc}", node.start_mark
            ) from exc


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class ActionFileError(LakeMirrorError):
    """An action file is invalid: the operation fails (500) and no run is recorded."""


@dataclass(frozen=True)
class ActionHook:
    """One hook of an action.

    Attributes:
        id: Unique within its action.
        type: ``webhook``, ``airflow`` or ``lua``.
        properties: The hook's settings as written (``url``, ``timeout``, ...).
        condition: ``success()`` (run if no earlier hook of the action failed) or ``failure()``.
        description: Free text.
    """

    id: str
    type: str
    properties: Mapping[str, Any]
    condition: str = "success()"
    description: str = ""


@dataclass(frozen=True)
class Action:
    """One action file.

    Attributes:
        name: Unique among a ref's actions.
        on: Event type → branch patterns (empty: every branch).
        hooks: Run in order.
        source: The file's path.
        description: Free text.
    """

    name: str
    on: Mapping[str, tuple[str, ...]]
    hooks: tuple[ActionHook, ...]
    source: str = ""
    description: str = field(default="")

    def matches(self, event: HookEvent) -> bool:
        """Return whether ``event`` triggers this action (its type and branch filters)."""
        if event.event_type not in self.on:
            return False
        patterns = self.on[event.event_type]
        return not patterns or any(path_match(p, event.branch_id) for p in patterns)


def parse_action(source: str, data: bytes) -> Action:
    """Parse and validate one action file.

    Args:
        source: The file's path (named in errors).
        data: The file's YAML.

    Raises:
        ActionFileError: the YAML is malformed or breaks one of lakeFS's rules.
    """

    def fail(why: str) -> ActionFileError:
        return ActionFileError(f"action file {source!r}: {why}")

    try:
        # _Loader is a yaml.SafeLoader
        doc = yaml.load(data, Loader=_Loader)  # nosec B506
    except yaml.YAMLError as exc:
        raise fail(f"invalid YAML: {exc}") from None
    except RecursionError:
        raise fail("invalid YAML: nested too deeply") from None
    if not isinstance(doc, dict):
        raise fail("not a YAML mapping")
    _check_shape(doc, fail)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise fail("'name' is required")
    if not _NAME.match(name):
        raise fail(f"invalid action name {name!r}: must match {_NAME.pattern}")
    on = _parse_on(doc.get("on"), fail)
    raw_hooks = doc.get("hooks")
    if not isinstance(raw_hooks, list) or not raw_hooks:
        raise fail("'hooks' is required")
    hooks: list[ActionHook] = []
    seen: set[str] = set()
    for raw in raw_hooks:
        hook = _parse_hook(raw, fail)
        if hook.id in seen:
            raise fail(f"hook id {hook.id!r} is not unique")
        seen.add(hook.id)
        hooks.append(hook)
    return Action(name, on, tuple(hooks), source, _text(doc, "description", fail))


def _check_shape(doc: object, fail: Any) -> None:
    """Refuse a document too deep, repeated or looping through its aliases, or not Unicode.

    Aliases share one Python object, so the document is small in memory; but whatever walks it
    as a tree (``str``, JSON for a hook's payload, a Lua table) would walk every repetition. Not
    Unicode: a lone surrogate, which a YAML escape of one gives.
    """
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[object, int, bool]] = [(doc, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else node
        assert isinstance(children, list)
        if done:
            size = 1 + sum(sizes.get(id(c), 1) for c in children)
            if size > _MAX_NODES:
                raise fail("yaml: document contains excessive aliasing")
            sizes[id(node)] = size
            entered.discard(id(node))
            continue
        if id(node) in sizes:
            continue
        if id(node) in entered:
            raise fail("yaml: an alias refers to a node that contains it")
        if depth > _MAX_DEPTH:
            raise fail(f"yaml: nested more than {_MAX_DEPTH} levels deep")
        texts = [*node, *children] if isinstance(node, dict) else children
        if not all(_is_unicode(t) for t in texts if isinstance(t, str)):
            raise fail("yaml: found invalid Unicode character escape code")
        entered.add(id(node))
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if isinstance(c, (dict, list)))


def _is_unicode(text: str) -> bool:
    # a "\ud800" escape gives a lone surrogate, which libyaml (and so lakeFS) refuses
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _text(raw: Mapping[str, Any], key: str, fail: Any) -> str:
    """Return the scalar at ``key`` as text (``""`` when absent); a collection is refused."""
    value = raw.get(key)
    if isinstance(value, (dict, list)):
        raise fail(f"{key!r} must be a string")
    return str(value or "")


def _parse_on(raw: object, fail: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(raw, dict) or not raw:
        raise fail("'on' is required")
    on: dict[str, tuple[str, ...]] = {}
    for event, spec in raw.items():
        if event not in EVENT_TYPES:
            raise fail(f"event {event!r} is not supported")
        branches: list[Any] = []
        if isinstance(spec, dict):
            found = spec.get("branches") or []
            if not isinstance(found, list):
                raise fail(f"'on.{event}.branches' must be a list")
            branches = found
        elif spec is not None:
            raise fail(f"'on.{event}' must be a mapping")
        if branches and event in _TAG_EVENTS:
            raise fail(f"'on.{event}' takes no branches (a tag event has none)")
        for pattern in branches:
            if not isinstance(pattern, str):
                raise fail(f"'on.{event}.branches' holds a non-string")
            try:
                validate_pattern(pattern)
            except BadPatternError as exc:
                raise fail(str(exc)) from None
        on[str(event)] = tuple(branches)
    return on


def _parse_hook(raw: object, fail: Any) -> ActionHook:
    if not isinstance(raw, dict):
        raise fail("a hook must be a mapping")
    hook_id = raw.get("id")
    if not isinstance(hook_id, str) or not _HOOK_ID.match(hook_id):
        raise fail(f"invalid hook id {hook_id!r}: must match {_HOOK_ID.pattern}")
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in _REQUIRED:
        raise fail(f"hook {hook_id!r}: unknown hook type {kind!r} (webhook, airflow or lua)")
    props = raw.get("properties") or {}
    if not isinstance(props, dict):
        raise fail(f"hook {hook_id!r}: 'properties' must be a mapping")
    for key in _REQUIRED[kind]:
        if not isinstance(props.get(key), str) or not props[key]:
            raise fail(f"hook {hook_id!r}: property {key!r} is required")
    if kind == "lua":
        _check_lua(hook_id, props, fail)
    condition = _IFS.get(_text(raw, "if", fail).strip())
    if condition is None:
        raise fail(f"hook {hook_id!r}: 'if' must be success() or failure()")
    return ActionHook(hook_id, kind, props, condition, _text(raw, "description", fail))


def _check_lua(hook_id: str, props: Mapping[str, Any], fail: Any) -> None:
    """Check a lua hook's properties: one script (inline or a path), ``args`` a mapping."""
    if "args" in props and not isinstance(props["args"], dict):
        raise fail(f"hook {hook_id!r}: 'args' should be a map: wrong value type")
    given = [key for key in ("script", *LUA_SCRIPT_PATHS) if key in props]
    if not given:
        raise fail(f"hook {hook_id!r}: 'script' or 'script_path' must be supplied")
    if len(given) > 1:
        raise fail(f"hook {hook_id!r}: only one of {' and '.join(map(repr, given))} may be given")
    value = props[given[0]]
    if not isinstance(value, str) or not value.strip():
        raise fail(f"hook {hook_id!r}: property {given[0]!r} must be a non-empty string")

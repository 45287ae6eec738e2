"""The branch patterns of an action's ``on`` filters (Go's ``path.Match``).

The input is a pattern and branch names (:mod:`tests.fuzz.targets.glob_input`). The pattern is
validated and matched against each name by :mod:`mirror.actions.glob`, and written in an action
file's ``branches`` list, which must refuse it exactly when the matcher does and otherwise run
the action for the branches it matches (a pattern that is not Unicode, a lone surrogate, the
file refuses whatever the matcher says). Each name, escaped, must match itself. ``*``, ``?`` and
classes never match ``/``, so a name matches only with as many ``/`` as the pattern spells.
Documented refusals: :class:`BadPatternError`; :class:`ActionFileError` for the action file.
"""

from __future__ import annotations

import yaml

from mirror.actions.glob import BadPatternError, path_match, validate_pattern
from mirror.actions.model import ActionFileError, parse_action
from mirror.core.hooks import HookEvent
from tests.fuzz.targets.glob_input import escaped, read_glob_input

__all__ = ["SPECIAL", "check"]

SPECIAL = "*?[]^-\\"
"""The characters an actions pattern gives a meaning to."""


def _action_file(pattern: str) -> bytes:
    # PyYAML's emitter quotes and escapes the pattern as its loader reads it back (JSON's
    # surrogate-pair escapes, say, it would read as two lone surrogates)
    doc = {
        "name": "fuzzed pattern",
        "on": {"pre-commit": {"branches": [pattern]}},
        "hooks": [{"id": "hook", "type": "webhook", "properties": {"url": "http://h/x"}}],
    }
    return yaml.safe_dump(doc).encode()


def check(data: bytes) -> str | None:
    """Validate and match the pattern of ``data``, also inside an action file."""
    pattern, names = read_glob_input(data)
    for name in names:
        assert path_match(escaped(name, SPECIAL), name), (name, escaped(name, SPECIAL))
    try:
        action = parse_action("_lakefs_actions/fuzz.yaml", _action_file(pattern))
    except ActionFileError:
        action = None
    try:
        validate_pattern(pattern)
    except BadPatternError:
        assert action is None, f"the action file accepted the invalid pattern {pattern!r}"
        return "BadPatternError"
    # an action file holds Unicode only (a lone surrogate is refused, as libyaml refuses it)
    unicode = _is_unicode(pattern)
    assert (action is not None) == unicode, f"the action file refused the valid {pattern!r}"
    for name in names:
        matched = path_match(pattern, name)
        if matched:
            assert name.count("/") <= pattern.count("/"), (pattern, name)
        if action is not None:
            assert action.matches(HookEvent("pre-commit", "repo", branch_id=name)) == matched
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True

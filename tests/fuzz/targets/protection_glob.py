"""Branch protection patterns (gobwas/glob compiled without separators).

The input is a pattern and branch names (:mod:`tests.fuzz.targets.glob_input`). The pattern is
compiled by :func:`compile_pattern` and matched against each name; stored as the rules of a
repository it must read back as written and protect exactly the names it matches. Each name,
escaped, must compile to a pattern matching that name alone. Where the pattern uses only the
syntax both glob dialects share (literals, ``*``, ``?``, escapes) and a name has no ``/``, the
actions' matcher (Go's ``path.Match``) must agree. Documented refusal:
:class:`InvalidPatternError`.
"""

from __future__ import annotations

import functools

from mirror.actions.glob import BadPatternError, path_match
from mirror.core import Catalog, open_memory
from mirror.core.errors import ProtectedBranchWriteError
from mirror.core.protection import (
    InvalidPatternError,
    check_staging_write,
    compile_pattern,
    get_rules,
    set_rules,
)
from tests.fuzz.targets.glob_input import escaped, read_glob_input

__all__ = ["SPECIAL", "check"]

SPECIAL = "*?[]{},!\\"
"""The characters a protection pattern gives a meaning to."""


@functools.cache
def _catalog() -> Catalog:
    lake = open_memory()
    lake.create_repository("repo", "mem://repo")
    return lake


def _protected(name: str) -> bool:
    lake = _catalog()
    try:
        check_staging_write(lake.kv, lake.get_repository("repo"), name)
    except ProtectedBranchWriteError:
        return True
    return False


def check(data: bytes) -> str | None:
    """Compile the pattern of ``data``, match its names, store it as a rule (see the module)."""
    pattern, names = read_glob_input(data)
    for name in names:
        exact = compile_pattern(escaped(name, SPECIAL))
        assert exact.fullmatch(name), (name, escaped(name, SPECIAL))
    lake = _catalog()
    repo = lake.get_repository("repo")
    try:
        matcher = compile_pattern(pattern)
    except InvalidPatternError:
        try:
            set_rules(lake.kv, repo, [pattern], None)
        except InvalidPatternError:
            return "InvalidPatternError"
        raise AssertionError(f"set_rules stored the invalid pattern {pattern!r}") from None
    set_rules(lake.kv, repo, [pattern], None)
    assert get_rules(lake.kv, repo).patterns == (pattern,)
    shared = not any(c in pattern for c in "[]{}")
    for name in names:
        matched = matcher.fullmatch(name) is not None
        assert _protected(name) == matched, (pattern, name)
        if shared and "/" not in name:
            try:
                theirs = path_match(pattern, name)
            except BadPatternError:
                continue  # a trailing "\": gobwas drops it, Go refuses it
            assert theirs == matched, (pattern, name, matched)
    return None

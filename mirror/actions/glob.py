"""Go's ``path.Match``: the branch patterns of an action's ``on`` filters.

The pattern becomes a regular expression matched as Go's algorithm matches: the text between
two runs of ``*`` (a chunk, of fixed width) is taken at its leftmost place and never tried
elsewhere, so the time is linear in the name for each chunk, whatever the number of stars (a
regular expression left to backtrack over several ``[^/]*`` takes exponential time).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["BadPatternError", "path_match", "validate_pattern"]


class BadPatternError(ValueError):
    """The pattern is malformed (Go's ``path.ErrBadPattern``)."""


_STAR = "[^/]*"


@lru_cache(maxsize=512)
def _compile(pattern: str) -> re.Pattern[str]:
    # the chunks between runs of stars, each a list of single-character regular expressions
    chunks: list[list[str]] = [[]]
    out = chunks[0]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if out or len(chunks) == 1:
                out = []
                chunks.append(out)
        elif c == "?":
            out.append("[^/]")
        elif c == "\\":
            i += 1
            if i >= n:
                raise BadPatternError(f"syntax error in pattern {pattern!r}")
            out.append(re.escape(pattern[i]))
        elif c == "[":
            i, cls = _char_class(pattern, i + 1)
            out.append(cls)
            continue
        else:
            out.append(re.escape(c))
        i += 1
    first, starred = "".join(chunks[0]), ["".join(c) for c in chunks[1:]]
    # a middle chunk at its leftmost place, atomically; the last one must end the name
    middle = "".join(f"(?>{_STAR}?{chunk})" for chunk in starred[:-1])
    last = f"{_STAR}?{starred[-1]}" if starred else ""
    return re.compile(first + middle + last, re.DOTALL)


def _char_class(pattern: str, i: int) -> tuple[int, str]:
    """Translate ``[...]`` starting after ``[``; return the index after ``]`` and the regex."""
    n = len(pattern)
    negate = i < n and pattern[i] == "^"
    if negate:
        i += 1
    parts: list[str] = []
    first = True
    while True:
        if i >= n:
            raise BadPatternError(f"syntax error in pattern {pattern!r}")
        if pattern[i] == "]" and not first:
            i += 1
            break
        first = False
        lo, i = _class_char(pattern, i)
        if i < n and pattern[i] == "-":
            hi, i = _class_char(pattern, i + 1)
            if hi < lo:
                raise BadPatternError(f"syntax error in pattern {pattern!r}")
            parts.append(f"{re.escape(lo)}-{re.escape(hi)}")
        else:
            parts.append(re.escape(lo))
    body = "".join(parts)
    # Go's classes never match '/' (path.Match), negated ones included
    return i, f"(?!/)[^{body}]" if negate else f"(?!/)[{body}]"


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    n = len(pattern)
    if i >= n or pattern[i] in "-]":
        raise BadPatternError(f"syntax error in pattern {pattern!r}")
    if pattern[i] == "\\":
        i += 1
        if i >= n:
            raise BadPatternError(f"syntax error in pattern {pattern!r}")
    return pattern[i], i + 1


def validate_pattern(pattern: str) -> None:
    """Raise :class:`BadPatternError` if ``pattern`` is not a valid Go ``path.Match`` pattern."""
    _compile(pattern)


def path_match(pattern: str, name: str) -> bool:
    """Return whether ``name`` matches ``pattern`` as Go's ``path.Match`` decides.

    ``*`` and ``?`` never match ``/``; ``[...]`` classes (``^`` negates, ``a-z`` ranges) and
    backslash escapes are supported.

    Raises:
        BadPatternError: the pattern is malformed.
    """
    return _compile(pattern).fullmatch(name) is not None

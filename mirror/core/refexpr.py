"""Ref expressions: a branch, tag or commit followed by ``~N``, ``^N``, ``@`` or ``$``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from mirror.core.errors import InvalidRefError

__all__ = ["Modifier", "RefExpr", "parse_ref"]

_PART = re.compile(r"(^|[~^@$])([^~^@$]*)")
# beyond this, int() refuses the string and no history is that deep anyway
_MAX_DIGITS = 18


class Modifier(StrEnum):
    """One step applied to a resolved ref."""

    FIRST_PARENT = "~"
    """``~N``: follow the first parent N times."""
    PARENT = "^"
    """``^N``: the N-th parent (``^0`` is the commit itself)."""
    COMMITTED = "@"
    """``@``: a branch's head commit without its staging area."""
    STAGING = "$"
    """``$``: a branch including its staging area, explicitly."""


@dataclass(frozen=True, slots=True)
class RefExpr:
    """A parsed ref expression."""

    base: str
    steps: tuple[tuple[Modifier, int], ...] = ()

    @property
    def branch_modifier(self) -> Modifier | None:
        """Return ``@`` or ``$`` if that is the (sole) modifier."""
        if len(self.steps) == 1 and self.steps[0][0] in (Modifier.COMMITTED, Modifier.STAGING):
            return self.steps[0][0]
        return None


def parse_ref(ref: str) -> RefExpr:
    """Parse ``ref`` into its base and its modifiers.

    Raises:
        InvalidRefError: empty, containing whitespace or text that is not UTF-8, a modifier
            with a bad number, or ``@`` / ``$`` combined with other modifiers; the message
            names ``ref``.
    """
    if not isinstance(ref, str) or not ref:
        raise InvalidRefError(f"invalid ref {ref!r}: must not be empty")
    if any(c.isspace() for c in ref) or "\x00" in ref:
        raise InvalidRefError(f"invalid ref {ref!r}: must not contain whitespace")
    if not ref.isascii():
        try:
            ref.encode()
        except UnicodeEncodeError:
            # a lone surrogate (text decoded with surrogateescape): no branch or tag has one
            raise InvalidRefError(f"invalid ref {ref!r}: not valid UTF-8") from None
    parts = _PART.findall(ref)
    base = parts[0][1]
    if not base:
        raise InvalidRefError(f"invalid ref {ref!r}: no branch, tag or commit before modifiers")
    steps: list[tuple[Modifier, int]] = []
    for sym, arg in parts[1:]:
        if not sym:
            continue
        mod = Modifier(sym)
        if mod in (Modifier.COMMITTED, Modifier.STAGING):
            if arg:
                raise InvalidRefError(f"invalid ref {ref!r}: {sym!r} takes no argument")
            steps.append((mod, 0))
        elif not arg:
            steps.append((mod, 1))
        elif arg.isdigit() and arg.isascii():
            if len(arg) > _MAX_DIGITS:
                raise InvalidRefError(f"invalid ref {ref!r}: {sym!r} number is too large")
            steps.append((mod, int(arg)))
        else:
            raise InvalidRefError(f"invalid ref {ref!r}: {sym!r} must be followed by a number")
    if any(m in (Modifier.COMMITTED, Modifier.STAGING) for m, _ in steps) and len(steps) != 1:
        raise InvalidRefError(f"invalid ref {ref!r}: '@' and '$' must be the only modifier")
    return RefExpr(base, tuple(steps))

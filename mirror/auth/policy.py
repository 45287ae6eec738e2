"""Policy evaluation: wildcard matching of actions and resources, deny beats allow."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from mirror.auth.errors import InvalidAuthValueError
from mirror.auth.model import Effect, Policy, Statement
from mirror.auth.permissions import Permission

__all__ = ["is_allowed", "matches", "validate_statement"]

_ACTION = re.compile(r"\*|[a-z]+:[A-Za-z*?]+")
_USER_VARIABLE = "${user}"


@lru_cache(maxsize=4096)
def _pattern(pattern: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.DOTALL)


def matches(pattern: str, value: str) -> bool:
    """Return whether ``value`` matches ``pattern`` (``*``: any run, ``?``: one character)."""
    if pattern == "*":
        return True
    return _pattern(pattern).fullmatch(value) is not None


def _applies(statement: Statement, permission: Permission, user_id: str) -> bool:
    resource = statement.resource.replace(_USER_VARIABLE, user_id)
    return matches(resource, permission.resource) and any(
        matches(a, permission.action) for a in statement.actions
    )


def is_allowed(policies: Iterable[Policy], permissions: Iterable[Permission], user_id: str) -> bool:
    """Return whether ``policies`` allow every one of ``permissions`` for ``user_id``.

    A permission is granted when some statement allows it and no statement denies it.
    ``${user}`` in a statement's resource stands for ``user_id``.
    """
    statements = [s for p in policies for s in p.statements]
    for permission in permissions:
        allowed = False
        for s in statements:
            if _applies(s, permission, user_id):
                if s.effect is Effect.DENY:
                    return False
                allowed = True
        if not allowed:
            return False
    return True


def validate_statement(effect: str, actions: Iterable[str], resource: str) -> Statement:
    """Return a checked :class:`Statement`.

    Raises:
        InvalidAuthValueError: unknown effect, malformed action, no actions or no resource.
    """
    if effect not in (Effect.ALLOW.value, Effect.DENY.value):
        raise InvalidAuthValueError(f"invalid effect {effect!r}: use 'allow' or 'deny'")
    acts = tuple(actions)
    if not acts:
        raise InvalidAuthValueError("a statement needs at least one action")
    for a in acts:
        if not isinstance(a, str) or not _ACTION.fullmatch(a):
            raise InvalidAuthValueError(
                f"invalid action {a!r}: use 'service:Action' (wildcards * and ? allowed)"
            )
    if not isinstance(resource, str) or not resource:
        raise InvalidAuthValueError("a statement needs a resource")
    return Statement(Effect(effect), acts, resource)

"""Branch protection: per-repository branch-name patterns that refuse direct writes and commits.

As in lakeFS (pkg/graveler/branch/protection_manager.go), a protected branch refuses staging
writes (uploads, links, copies, metadata updates, deletions, resets of uncommitted changes) and
commits; changes reach it by merge, revert or cherry-pick. Patterns are gobwas/glob patterns
compiled without separators, so ``*`` also crosses ``/``; ``?``, ``[…]``, ``[!…]``, ``[a-z]`` and
``{a,b}`` work as there. A pattern becomes a regular expression with one alternative per
pattern its ``{…}`` stand for, in which the text between two stars is taken at its leftmost
place and never tried again: the same names match as with backtracking, in a time linear in the
name for each such text, where backtracking over several stars takes exponential time.

The rules of a repository are one KV record beside its refs, ``refs/<repo>:<instance>/settings/
branch_protection`` (the layout of :mod:`mirror.core.refs`, so deleting the repository deletes
them, and a repository re-created under the same name starts without rules). Every check reads
the record: a change is seen by every server process sharing the KV at once (lakeFS caches the
rules for about 3 s; LakeMirror does not, at the price of one KV read per write). The ETag of the
rules is the hex SHA-256 of the stored record, empty while no rules were ever stored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias

from mirror.core.errors import (
    LakeFSText,
    ProtectedBranchCommitError,
    ProtectedBranchError,
    ProtectedBranchWriteError,
)
from mirror.core.model import Repository
from mirror.errors import (
    AlreadyExistsError,
    InvalidValueError,
    NotFoundError,
    PreconditionFailedError,
)
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = [
    "InvalidPatternError",
    "ProtectionRules",
    "RuleExistsError",
    "RuleNotFoundError",
    "RulesChangedError",
    "add_rule",
    "check_commit",
    "check_hard_reset",
    "check_staging_write",
    "compile_pattern",
    "delete_rule",
    "get_rules",
    "protecting_pattern",
    "set_rules",
]

_MAX_TRIES = 10
_MAX_NESTING = 32
_MAX_EXPANSIONS = 256
_VERSION = 1


class InvalidPatternError(LakeFSText, InvalidValueError):
    """A branch pattern is not a valid glob (an unclosed ``[`` or ``{``, say)."""

    lakefs_text = "invalid branch pattern syntax"


class RulesChangedError(LakeFSText, PreconditionFailedError):
    """The rules were not those the caller's ``If-Match`` ETag names."""

    lakefs_text = "Precondition failed"


class RuleExistsError(LakeFSText, AlreadyExistsError):
    """The pattern to add is protected already."""

    lakefs_text = "branch protection rule already exists: not unique"


class RuleNotFoundError(LakeFSText, NotFoundError):
    """The pattern to delete is not protected."""

    lakefs_text = "branch protection rule does not exist: not found"


@dataclass(frozen=True, slots=True)
class ProtectionRules:
    """The protected branch patterns of a repository.

    Attributes:
        patterns: The patterns, sorted, each once.
        etag: The hex SHA-256 of the stored record; empty when none was ever stored.
    """

    patterns: tuple[str, ...] = ()
    etag: str = ""


_Item: TypeAlias = "str | list[list[_Item]] | None"
"""A pattern's part: one character's regular expression, alternatives (``{…}``), or a star."""


class _Parser:
    """Parse one gobwas/glob pattern (no separators) into its parts."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0
        self.depth = 0

    def fail(self, why: str) -> InvalidPatternError:
        return InvalidPatternError(f"{self.pattern!r}: {why}")

    def peek(self) -> str:
        return self.pattern[self.pos] if self.pos < len(self.pattern) else ""

    def take(self) -> str:
        c = self.peek()
        self.pos += len(c)
        return c

    def sequence(self, in_terms: bool) -> list[_Item]:
        out: list[_Item] = []
        while True:
            c = self.peek()
            if not c or (in_terms and c in ",}"):
                return out
            self.take()
            if c == "*":
                while self.peek() == "*":  # "**" (super-asterisk) is "*" without separators
                    self.take()
                out.append(None)
            elif c == "?":
                out.append(".")
            elif c == "[":
                out.append(self.char_class())
            elif c == "{":
                out.append(self.terms())
            elif c == "\\":
                # an escape at the very end escapes nothing (gobwas drops it)
                escaped = self.take()
                if escaped:
                    out.append(re.escape(escaped))
            else:
                out.append(re.escape(c))

    def terms(self) -> list[list[_Item]]:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.fail(f"'{{' nested more than {_MAX_NESTING} deep")
        alternatives = [self.sequence(in_terms=True)]
        while self.peek() == ",":
            self.take()
            alternatives.append(self.sequence(in_terms=True))
        if self.take() != "}":
            raise self.fail("'{' is not closed")
        self.depth -= 1
        return alternatives

    def char_class(self) -> str:
        negate = self.peek() == "!"
        if negate:
            self.take()
        first = self.take()
        if not first:
            raise self.fail("'[' is not closed")
        if self.peek() == "-":
            # one range "lo-hi", as gobwas reads it: the two characters are taken as they are
            self.take()
            hi = self.take()
            if not hi or self.take() != "]":
                raise self.fail("a range must be '[lo-hi]' or '[!lo-hi]'")
            if first > hi:
                return "." if negate else "(?!)"
            body = f"{re.escape(first)}-{re.escape(hi)}"
        else:
            self.pos -= len(first)
            chars: list[str] = []
            while True:
                c = self.take()
                if not c:
                    raise self.fail("'[' is not closed")
                if c == "]":
                    break
                if c == "\\":
                    c = self.take()
                    if not c:
                        raise self.fail("'[' is not closed")
                chars.append(c)
            if not chars:
                return "." if negate else "(?!)"
            body = "".join(re.escape(c) for c in chars)
        return f"[{'^' if negate else ''}{body}]"


def _expanded(parser: _Parser, items: list[_Item]) -> list[list[str | None]]:
    """Return the patterns without ``{…}`` that ``items`` stands for (``a{b,c}``: ab, ac)."""
    out: list[list[str | None]] = [[]]
    for item in items:
        if isinstance(item, list):
            options: list[list[str | None]] = []
            for alternative in item:
                options += _expanded(parser, alternative)
                _bound(parser, len(options))
            _bound(parser, len(out) * len(options))
            out = [head + option for head in out for option in options]
        else:
            out = [[*head, item] for head in out]
    return out


def _bound(parser: _Parser, count: int) -> None:
    if count > _MAX_EXPANSIONS:
        raise parser.fail(f"its '{{…}}' stand for more than {_MAX_EXPANSIONS} patterns")


def _leftmost(pieces: list[str | None]) -> str:
    """Return the regular expression of a pattern without ``{…}``, matching in linear time.

    The text between two stars, single characters only, is taken at its leftmost place and
    never tried elsewhere (an atomic group): no match is lost, since the star after it takes
    whatever a later place would have left, and no star backtracks over another.
    """
    chunks: list[list[str]] = [[]]
    for piece in pieces:
        if piece is None:
            chunks.append([])
        else:
            chunks[-1].append(piece)
    out = "".join(chunks[0])
    for i, chunk in enumerate(chunks[1:], start=2):
        text = "".join(chunk)
        out += f"(?>.*?{text})" if i < len(chunks) else f".*?{text}"
    return out


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Return the compiled matcher of a branch pattern (the whole name must match).

    Raises:
        InvalidPatternError: the pattern is not a valid glob (or nests ``{`` more than 32 deep,
            or its ``{…}`` stand for more than 256 patterns).
    """
    parser = _Parser(pattern)
    expanded = _expanded(parser, parser.sequence(in_terms=False))
    alternatives = dict.fromkeys(_leftmost(pieces) for pieces in expanded)
    return re.compile("|".join(f"(?:{a})" for a in alternatives), re.DOTALL)


def _key(repo: Repository) -> bytes:
    # beside the repository's refs (see mirror.core.refs), so it goes with the repository
    return f"refs/{repo.id}:{repo.instance_uid}/settings/branch_protection".encode()


def _encode(patterns: Iterable[str]) -> bytes:
    record = {"version": _VERSION, "patterns": sorted(set(patterns))}
    return json.dumps(record, separators=(",", ":"), sort_keys=True).encode()


def _decode(raw: bytes) -> tuple[str, ...]:
    record = json.loads(raw)
    return tuple(str(p) for p in record.get("patterns", ()))


def _etag(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def _read(kv: KV, repo: Repository) -> bytes | None:
    try:
        return kv.get(_key(repo))
    except KeyNotFoundError:
        return None


def get_rules(kv: KV, repo: Repository) -> ProtectionRules:
    """Return the protection rules of ``repo`` and their ETag."""
    raw = _read(kv, repo)
    if raw is None:
        return ProtectionRules()
    return ProtectionRules(_decode(raw), _etag(raw))


def _validated(patterns: Iterable[str]) -> list[str]:
    out = list(patterns)
    for p in out:
        compile_pattern(p)
    return out


def set_rules(kv: KV, repo: Repository, patterns: Iterable[str], if_match: str | None) -> str:
    """Replace the protection rules of ``repo``; return their new ETag.

    ``if_match`` is lakeFS's ``If-Match``: ``None`` writes unconditionally, ``""`` only if no
    rules were ever stored, any other value only if it is the current ETag.

    Raises:
        InvalidPatternError: a pattern is not a valid glob.
        RulesChangedError: the current rules do not match ``if_match``.
    """
    raw = _encode(_validated(patterns))
    key = _key(repo)
    if if_match is None:
        kv.set(key, raw)
        return _etag(raw)
    current = _read(kv, repo)
    if if_match == "":
        if current is not None:
            raise RulesChangedError("rules exist already")
    elif current is None or _etag(current) != if_match:
        raise RulesChangedError(f"the rules' ETag is not {if_match!r}")
    try:
        kv.set_if(key, raw, current)
    except KVPreconditionFailedError as exc:
        raise RulesChangedError("the rules changed meanwhile") from exc
    return _etag(raw)


def _update(kv: KV, repo: Repository, change: Callable[[tuple[str, ...]], list[str]]) -> None:
    """Apply ``change`` to the stored patterns by compare-and-swap, retrying lost races."""
    for _ in range(_MAX_TRIES):
        current = _read(kv, repo)
        patterns = _decode(current) if current is not None else ()
        try:
            kv.set_if(_key(repo), _encode(change(patterns)), current)
        except KVPreconditionFailedError:
            continue
        return
    raise RulesChangedError("the rules kept changing")


def add_rule(kv: KV, repo: Repository, pattern: str) -> None:
    """Protect the branches ``pattern`` matches (lakeFS's deprecated single-rule call).

    Raises:
        InvalidPatternError: the pattern is not a valid glob.
        RuleExistsError: the pattern is protected already.
    """
    compile_pattern(pattern)

    def change(patterns: tuple[str, ...]) -> list[str]:
        if pattern in patterns:
            raise RuleExistsError(repr(pattern))
        return [*patterns, pattern]

    _update(kv, repo, change)


def delete_rule(kv: KV, repo: Repository, pattern: str) -> None:
    """Stop protecting ``pattern`` (lakeFS's deprecated single-rule call).

    Raises:
        RuleNotFoundError: the pattern is not protected.
    """

    def change(patterns: tuple[str, ...]) -> list[str]:
        if pattern not in patterns:
            raise RuleNotFoundError(repr(pattern))
        return [p for p in patterns if p != pattern]

    _update(kv, repo, change)


def protecting_pattern(kv: KV, repo: Repository, branch: str) -> str | None:
    """Return the first pattern of ``repo``'s rules that protects ``branch``, or ``None``."""
    raw = _read(kv, repo)
    if raw is None:
        return None
    for pattern in _decode(raw):
        try:
            matcher = compile_pattern(pattern)
        except InvalidPatternError:
            continue  # never stored by set_rules or add_rule
        if matcher.fullmatch(branch):
            return pattern
    return None


def _refuse(kv: KV, repo: Repository, branch: str, error: type[ProtectedBranchError]) -> None:
    pattern = protecting_pattern(kv, repo, branch)
    if pattern is not None:
        raise error(f"branch {branch!r} matches the protection rule {pattern!r}")


def check_staging_write(kv: KV, repo: Repository, branch: str) -> None:
    """Refuse a write to ``branch``'s staging area if a rule protects it.

    Raises:
        ProtectedBranchWriteError: a rule protects the branch.
    """
    _refuse(kv, repo, branch, ProtectedBranchWriteError)


def check_commit(kv: KV, repo: Repository, branch: str) -> None:
    """Refuse a commit on ``branch`` if a rule protects it.

    Raises:
        ProtectedBranchCommitError: a rule protects the branch.
    """
    _refuse(kv, repo, branch, ProtectedBranchCommitError)


def check_hard_reset(kv: KV, repo: Repository, branch: str) -> None:
    """Refuse to move ``branch``'s head by a hard reset if a rule protects it.

    Raises:
        ProtectedBranchError: a rule protects the branch.
    """
    _refuse(kv, repo, branch, ProtectedBranchError)

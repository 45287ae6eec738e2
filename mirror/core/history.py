"""Commit graph walks: first-parent and time-ordered history, and git's merge base."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from mirror.core.errors import NoMergeBaseError
from mirror.core.ids import CommitID
from mirror.core.model import Commit

__all__ = [
    "ancestors",
    "first_parent_history",
    "is_ancestor",
    "merge_bases",
    "time_ordered_history",
]

GetCommit = Callable[[CommitID], Commit]

_LEFT, _RIGHT, _STALE, _RESULT = 1, 2, 4, 8


def first_parent_history(get: GetCommit, head: CommitID) -> Iterator[Commit]:
    """Yield ``head`` and its first parents, back to the initial commit."""
    cid: CommitID | None = head
    while cid is not None:
        commit = get(cid)
        yield commit
        cid = commit.parents[0] if commit.parents else None


def time_ordered_history(get: GetCommit, head: CommitID) -> Iterator[Commit]:
    """Yield every ancestor of ``head`` (itself included), newest first.

    Ties on creation time go to the higher generation, then to the larger ID, so the order is
    deterministic and, as long as no commit is dated before its parent, children come before
    their parents.
    """
    first = get(head)
    heap: list[tuple[int, int, str, Commit]] = [
        (-first.creation_date, -first.generation, _neg(first.id), first)
    ]
    seen = {head}
    while heap:
        _, _, _, commit = heapq.heappop(heap)
        yield commit
        for p in commit.parents:
            if p not in seen:
                seen.add(p)
                parent = get(p)
                heapq.heappush(
                    heap, (-parent.creation_date, -parent.generation, _neg(parent.id), parent)
                )


def _neg(commit_id: str) -> str:
    # invert hex digits so that a min-heap pops the larger ID first
    return commit_id.translate(str.maketrans("0123456789abcdef", "fedcba9876543210"))


def ancestors(get: GetCommit, head: CommitID) -> set[CommitID]:
    """Return the IDs of ``head`` and all its ancestors."""
    out = {head}
    stack = [head]
    while stack:
        for p in get(stack.pop()).parents:
            if p not in out:
                out.add(p)
                stack.append(p)
    return out


def is_ancestor(get: GetCommit, ancestor: Commit, descendant: CommitID) -> bool:
    """Return whether ``ancestor`` is ``descendant`` or one of its ancestors.

    The walk never descends below ``ancestor``'s generation, so it stays short when the two
    are close.
    """
    seen = {descendant}
    stack = [descendant]
    while stack:
        cid = stack.pop()
        if cid == ancestor.id:
            return True
        commit = get(cid)
        if commit.generation <= ancestor.generation:
            continue
        for p in commit.parents:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return False


def _paint(get: GetCommit, left: Commit, right: Commit) -> list[Commit]:
    """Return common ancestors of ``left`` and ``right`` that no later common ancestor hides.

    This is git's paint-down-to-common: walk both histories by generation, highest first,
    marking which side reached each commit; a commit reached from both sides is a candidate and
    marks its own ancestors stale.
    """
    flags: dict[CommitID, int] = {left.id: _LEFT, right.id: _RIGHT}
    heap: list[tuple[int, int, str, Commit]] = []

    def push(c: Commit) -> None:
        heapq.heappush(heap, (-c.generation, -c.creation_date, c.id, c))

    push(left)
    push(right)
    found: list[Commit] = []
    while heap and any(not flags[c.id] & _STALE for *_, c in heap):
        *_, commit = heapq.heappop(heap)
        f = flags[commit.id] & (_LEFT | _RIGHT | _STALE)
        if f & (_LEFT | _RIGHT) == _LEFT | _RIGHT and not f & _STALE:
            if not flags[commit.id] & _RESULT:
                flags[commit.id] |= _RESULT
                found.append(commit)
            f |= _STALE
        for p in commit.parents:
            have = flags.get(p, 0)
            if have & f == f:
                continue
            flags[p] = have | f
            push(get(p))
    return found


def merge_bases(get: GetCommit, left: CommitID, right: CommitID) -> list[Commit]:
    """Return the best common ancestors of two commits, best first (as ``git merge-base --all``).

    A best common ancestor is a common ancestor that is not an ancestor of another one.
    Criss-cross histories have several; they are ordered by generation, then creation time,
    then ID, all descending, and the first is the merge base.

    Raises:
        NoMergeBaseError: the commits share no ancestor.
    """
    if left == right:
        return [get(left)]
    candidates = _paint(get, get(left), get(right))
    if not candidates:
        raise NoMergeBaseError(f"commits {left} and {right} have no common ancestor")
    best = [
        c
        for c in candidates
        if not any(o.id != c.id and is_ancestor(get, c, o.id) for o in candidates)
    ]
    best.sort(key=lambda c: (c.generation, c.creation_date, c.id), reverse=True)
    return best

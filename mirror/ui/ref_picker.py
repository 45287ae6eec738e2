"""The ref a repository page shows, and the picker that changes it.

As lakeFS's UI resolves ``?ref=``: as a branch, then a tag, then anything a commit can be named
by (a commit ID or a ref expression such as ``main~2``), each one call to the API. The picker
offers the first page of branches and of tags (lakeFS's page of 100), and a field for any other
ref; a repository with more branches than one page is still reachable through that field.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import urlpart

__all__ = [
    "PICKER_SIZE",
    "RefChoices",
    "ShownRef",
    "ref_choices",
    "resolve_ref",
    "shown_ref",
]

PICKER_SIZE = 100
"""Branches, and tags, the picker lists."""

_NOT_THIS_KIND = (400, 404)
"""A lookup answering these means "not a ref of this kind": the next kind is tried."""


@dataclass(frozen=True, slots=True)
class ShownRef:
    """A ref as asked for, and what it turned out to be.

    Attributes:
        ref: The ref as asked for.
        kind: ``branch``, ``tag`` or ``commit`` (an ID or an expression); ``""`` if unresolved.
        commit_id: The commit it names (``""`` if unresolved).
        error: The API's message when the ref names nothing.
    """

    ref: str
    kind: str
    commit_id: str
    error: str

    @property
    def is_branch(self) -> bool:
        """Return whether changes can be made at this ref (it is a branch)."""
        return self.kind == "branch"


@dataclass(frozen=True, slots=True)
class RefChoices:
    """What the picker offers: the first branches and tags, each with its commit ID."""

    branches: dict[str, str]
    tags: dict[str, str]


async def resolve_ref(
    page: Page, repository: str, ref: str, known: RefChoices | None = None
) -> ShownRef:
    """Return what ``ref`` names in ``repository``: a branch, a tag, or a commit.

    A branch or tag among the ``known`` choices costs no call.

    Raises:
        ApiError: the API refused a lookup otherwise than by not finding the ref.
    """
    if known is not None:
        for kind, names in (("branch", known.branches), ("tag", known.tags)):
            if ref in names:
                return ShownRef(ref, kind, names[ref], "")
    base = f"/repositories/{urlpart(repository)}"
    for kind, path in (("branch", "branches"), ("tag", "tags")):
        try:
            found: dict[str, Any] = await page.get(f"{base}/{path}/{urlpart(ref)}")
        except ApiError as missing:
            if missing.status not in _NOT_THIS_KIND:
                raise
            continue
        return ShownRef(ref, kind, str(found.get("commit_id") or ""), "")
    try:
        commit: dict[str, Any] = await page.get(f"{base}/commits/{urlpart(ref)}")
    except ApiError as missing:
        if missing.status not in _NOT_THIS_KIND:
            raise
        return ShownRef(ref, "", "", missing.message)
    return ShownRef(ref, "commit", str(commit["id"]), "")


async def _refs(page: Page, path: str) -> dict[str, str]:
    try:
        listing: dict[str, Any] = await page.get(path, amount=PICKER_SIZE)
    except ApiError:
        return {}  # the picker's field still takes any ref
    return {str(r["id"]): str(r.get("commit_id") or "") for r in listing["results"]}


async def ref_choices(page: Page, repository: str) -> RefChoices:
    """Return the first page of the repository's branches and of its tags."""
    base = f"/repositories/{urlpart(repository)}"
    branches, tags = await asyncio.gather(
        _refs(page, f"{base}/branches"), _refs(page, f"{base}/tags")
    )
    return RefChoices(branches, tags)


async def shown_ref(page: Page, repository: str, ref: str) -> tuple[ShownRef, RefChoices]:
    """Return what ``ref`` names and the picker's choices, looked up together."""
    choices = await ref_choices(page, repository)
    return await resolve_ref(page, repository, ref, choices), choices

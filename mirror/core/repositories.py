"""Repository creation: the record, its initial commit and its default branch, at once.

A bare repository (a mirror's) gets the record alone: its branches appear only when someone
points them at commits imported into it, so it never shows a commit of its own making.
"""

from __future__ import annotations

import uuid

from mirror.block.resolver import split_namespace
from mirror.core.commits import new_commit
from mirror.core.context import CatalogContext
from mirror.core.ids import MetaRangeID
from mirror.core.model import Branch, Repository
from mirror.core.staging import StagingStore
from mirror.core.validate import validate_branch_id, validate_repository_id

__all__ = ["FIRST_COMMIT_MESSAGE", "create_repository"]

FIRST_COMMIT_MESSAGE = "Repository created"


def create_repository(
    ctx: CatalogContext,
    name: str,
    storage_namespace: str,
    default_branch: str,
    *,
    read_only: bool,
    mirror_of: str | None,
    bare: bool = False,
) -> Repository:
    """Create a repository with an initial commit (:data:`FIRST_COMMIT_MESSAGE`) on its branch.

    A ``bare`` repository gets neither: no commit and no branch, not even the default branch
    it names (which a later compare-and-swap from "absent" creates).

    Raises:
        InvalidNameError: bad repository or branch name.
        InvalidNamespaceError: the namespace URI is malformed or unsupported.
        RepositoryExistsError: the name is taken.
    """
    repo_id = validate_repository_id(name)
    branch_id = validate_branch_id(default_branch)
    split_namespace(storage_namespace)
    ctx.blocks.open(storage_namespace)
    now = ctx.now()
    repo = Repository(
        id=repo_id,
        storage_namespace=storage_namespace.rstrip("/"),
        default_branch=branch_id,
        creation_date=now,
        instance_uid=uuid.uuid4().hex[:16],
        read_only=read_only,
        mirror_of=mirror_of,
    )
    if bare:
        ctx.refs.create_repository(repo)
        return repo
    initial = new_commit("", FIRST_COMMIT_MESSAGE, MetaRangeID(""), now, {}, ())
    branch = Branch(branch_id, initial.id, StagingStore.new_token())
    ctx.refs.create_repository(repo, initial, branch)
    return repo

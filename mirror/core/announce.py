"""The hook events of the catalog's writes: what each write announces, before and after it.

:class:`~mirror.core.catalog.Catalog` calls these around its writes (see the table in
``docs/actions.md``). A pre-event runs its hooks and may abort the write
(:class:`~mirror.core.hooks.HookAbortError`); the matching post-event is handed to the hooks
once the write is done. Hooks never run on read-only (mirror) repositories; an event that cannot
be described (no such branch, a tag that exists already) is left to the write itself to report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mirror.core.context import CatalogContext
from mirror.core.hooks import HookEvent, HookRun, Hooks, NoHooks
from mirror.core.model import Branch, Commit, Repository
from mirror.core.protection import check_commit
from mirror.core.resolve import require_commit_ref, resolve_ref
from mirror.core.validate import validate_branch_id, validate_tag_id
from mirror.errors import LakeMirrorError, NotFoundError

__all__ = [
    "Pre",
    "before_merge",
    "create_branch",
    "create_tag",
    "delete_branch",
    "delete_tag",
    "mirror_advanced",
    "on_branch",
    "on_commit",
    "post",
    "post_commit",
    "pre",
]

Pre = tuple[HookEvent, HookRun] | None
"""A pre-event that ran and its run, or ``None`` when no hooks apply."""


def pre(
    ctx: CatalogContext,
    hooks: Hooks,
    repository: str,
    event: Callable[[Repository], HookEvent | None],
) -> Pre:
    """Run the pre-event hooks of the event ``event`` describes; ``None`` if none apply."""
    if isinstance(hooks, NoHooks):
        return None
    try:
        repo = ctx.repository(repository)
        found = None if repo.read_only else event(repo)
    except LakeMirrorError:
        return None
    if found is None:
        return None
    return found, hooks.pre(found)


def post(hooks: Hooks, ran: Pre, **changes: str) -> None:
    """Start the post-event hooks matching the pre-event ``ran`` (in the background)."""
    if ran is not None:
        event, run = ran
        hooks.post(event.as_post(**changes), run)


def post_commit(hooks: Hooks, ran: Pre, commit: Commit) -> None:
    """Start the post-event hooks of a write that made ``commit`` (commit, merge, ...)."""
    if ran is None:
        return
    event, run = ran
    hooks.post(_commit_event(event.event_type.replace("pre-", "post-", 1), event, commit), run)


def _commit_event(event_type: str, base: HookEvent, commit: Commit) -> HookEvent:
    return HookEvent(
        event_type,
        base.repository,
        branch_id=base.branch_id,
        source_ref=commit.id,
        commit_id=commit.id,
        commit_message=commit.message,
        committer=commit.committer,
        commit_metadata=dict(commit.metadata),
        merge_source=base.merge_source,
    )


def create_branch(
    ctx: CatalogContext, hooks: Hooks, repository: str, name: str, source: str
) -> Pre:
    """Run pre-create-branch (``source_ref``: the source as given; ``commit_id``: its commit)."""

    def event(repo: Repository) -> HookEvent | None:
        try:
            ctx.refs.get_branch(repo, validate_branch_id(name))
            return None  # the write reports the existing branch
        except NotFoundError:
            pass
        cid = resolve_ref(ctx, repo, source).commit_id
        return HookEvent(
            "pre-create-branch", repo.id, branch_id=name, source_ref=source, commit_id=cid
        )

    return pre(ctx, hooks, repository, event)


def delete_branch(
    ctx: CatalogContext, hooks: Hooks, repository: str, name: str, *, force: bool
) -> Pre:
    """Run pre-delete-branch (``source_ref``: the branch's head commit)."""

    def event(repo: Repository) -> HookEvent | None:
        if force or name == repo.default_branch:
            return None
        head = ctx.refs.get_branch(repo, validate_branch_id(name)).commit_id
        return HookEvent("pre-delete-branch", repo.id, branch_id=name, source_ref=head)

    return pre(ctx, hooks, repository, event)


def create_tag(
    ctx: CatalogContext, hooks: Hooks, repository: str, name: str, ref: str, *, force: bool
) -> Pre:
    """Run pre-create-tag (``source_ref`` and ``commit_id``: the commit to tag)."""

    def event(repo: Repository) -> HookEvent | None:
        if force:
            return None
        try:
            ctx.refs.get_tag(repo, validate_tag_id(name))
            return None  # the write reports the existing tag
        except NotFoundError:
            pass
        require_commit_ref(ref)
        cid = resolve_ref(ctx, repo, ref).commit_id
        return HookEvent("pre-create-tag", repo.id, source_ref=cid, tag_id=name, commit_id=cid)

    return pre(ctx, hooks, repository, event)


def delete_tag(
    ctx: CatalogContext, hooks: Hooks, repository: str, name: str, *, force: bool
) -> Pre:
    """Run pre-delete-tag (``source_ref`` and ``commit_id``: the tagged commit)."""

    def event(repo: Repository) -> HookEvent | None:
        if force:
            return None
        cid = ctx.refs.get_tag(repo, validate_tag_id(name))
        return HookEvent("pre-delete-tag", repo.id, source_ref=cid, tag_id=name, commit_id=cid)

    return pre(ctx, hooks, repository, event)


def on_branch(
    ctx: CatalogContext,
    hooks: Hooks,
    event_type: str,
    repository: str,
    branch: str,
    *,
    message: str = "",
    committer: str = "",
    metadata: dict[str, str] | None = None,
) -> Pre:
    """Run prepare-commit, pre-commit, pre-revert or pre-cherry-pick (``source_ref``: branch)."""

    def event(repo: Repository) -> HookEvent:
        # a missing or protected branch is the write's to report, in its own words (lakeFS
        # refuses a commit to a protected branch before its hooks run)
        branch_id = validate_branch_id(branch)
        ctx.refs.get_branch(repo, branch_id)
        if event_type in ("prepare-commit", "pre-commit"):
            check_commit(ctx.kv, repo, branch_id)
        return HookEvent(
            event_type,
            repo.id,
            branch_id=branch,
            source_ref=branch,
            commit_message=message,
            committer=committer,
            commit_metadata=metadata or {},
        )

    return pre(ctx, hooks, repository, event)


def on_commit(
    ctx: CatalogContext,
    hooks: Hooks,
    repository: str,
    branch: str,
    *,
    message: str,
    committer: str,
    metadata: dict[str, str],
) -> Pre:
    """Run a commit's prepare-commit hooks, then its pre-commit hooks; return the latter's run.

    lakeFS fires prepare-commit first: its hooks may still write to the branch. A
    prepare-commit that ran no hook changed nothing, so the pre-commit event is the same event
    under its own type and is not described (the repository, branch and protection read) again.
    """

    def announce(event_type: str) -> Pre:
        return on_branch(
            ctx,
            hooks,
            event_type,
            repository,
            branch,
            message=message,
            committer=committer,
            metadata=metadata,
        )

    ran = announce("prepare-commit")
    if ran is None or ran[1].run_id:
        return announce("pre-commit")
    event = replace(ran[0], event_type="pre-commit")
    return event, hooks.pre(event)


def before_merge(
    ctx: CatalogContext,
    hooks: Hooks,
    repository: str,
    source: str,
    destination: str,
    ran: list[tuple[HookEvent, HookRun]],
) -> Callable[[Commit, Commit | None], None]:
    """Return what runs pre-merge once the merge commit is built, before it is stored.

    ``source_ref`` is the source commit's ID, ``merge_source`` the source as requested and
    ``commit_id`` the merge commit's. The run is left in ``ran`` for the post-merge event.
    """

    def run(commit: Commit, src: Commit | None) -> None:
        def event(repo: Repository) -> HookEvent:
            return HookEvent(
                "pre-merge",
                repo.id,
                branch_id=destination,
                source_ref=src.id if src is not None else source,
                commit_id=commit.id,
                commit_message=commit.message,
                committer=commit.committer,
                commit_metadata=dict(commit.metadata),
                merge_source=source,
            )

        done = pre(ctx, hooks, repository, event)
        ran[:] = [done] if done is not None else []

    return run


def mirror_advanced(ctx: CatalogContext, hooks: Hooks, repository: str, moved: Branch) -> None:
    """Announce a mirror branch's new head as a post-commit event (the hooks decide to run)."""
    if isinstance(hooks, NoHooks):
        return
    repo = ctx.repository(repository)
    if not repo.read_only:
        return
    commit = ctx.refs.get_commit(repo, moved.commit_id)
    hooks.post(_commit_event("post-commit", HookEvent("", repo.id, branch_id=moved.id), commit))

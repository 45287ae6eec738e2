"""``lakemirror branch create|list|delete|show|reset|revert``."""

from __future__ import annotations

import argparse

from mirror.cli.commands.options import add_listing_options, add_yes_option, non_negative_int
from mirror.cli.context import Context
from mirror.cli.uris import ref_argument, ref_uri, repository_uri

__all__ = ["register"]


def _create(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.branch)
    source = ref_argument(args.source, repo)
    commit_id = ctx.client.create_branch(repo, name, source)
    if ctx.output.json:
        ctx.output.data({"id": name, "commit_id": commit_id})
    else:
        ctx.output.line(f"created branch lakefs://{repo}/{name} at {commit_id}")
    return 0


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    branches = list(
        ctx.client.list_branches(repo, prefix=args.prefix, after=args.after, limit=args.amount)
    )
    if ctx.output.json:
        ctx.output.data(branches)
    else:
        ctx.output.table(["branch", "commit id"], [(b["id"], b["commit_id"]) for b in branches])
    return 0


def _delete(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.branch)
    ctx.confirm(f"delete branch {name!r} of {repo!r} and its uncommitted changes?", args.yes)
    ctx.client.delete_branch(repo, name)
    if ctx.output.json:
        ctx.output.data({"deleted": f"lakefs://{repo}/{name}"})
    else:
        ctx.output.line(f"deleted branch lakefs://{repo}/{name}")
    return 0


def _show(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.branch)
    branch = ctx.client.get_branch(repo, name)
    if ctx.output.json:
        ctx.output.data(branch)
    else:
        ctx.output.fields(
            [("Branch", f"lakefs://{repo}/{branch['id']}"), ("Commit ID", branch["commit_id"])]
        )
    return 0


def _reset(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.branch)
    if args.object is not None:
        kind, path, what = "object", args.object, f"object {args.object!r}"
    elif args.prefix is not None:
        kind, path, what = "common_prefix", args.prefix, f"changes under {args.prefix!r}"
    else:
        kind, path, what = "reset", None, "all uncommitted changes"
    ctx.confirm(f"drop {what} on branch {name!r} of {repo!r}?", args.yes)
    ctx.client.reset_branch(repo, name, kind, path)
    if ctx.output.json:
        ctx.output.data({"branch": f"lakefs://{repo}/{name}", "type": kind, "path": path})
    else:
        ctx.output.line(f"dropped {what} on lakefs://{repo}/{name}")
    return 0


def _revert(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.branch)
    refs = [ref_argument(r, repo) for r in args.commits]
    for ref in refs:
        ctx.client.revert(
            repo, name, ref, parent_number=args.parent_number, allow_empty=args.allow_empty
        )
    head = ctx.client.get_commit(repo, name)
    if ctx.output.json:
        ctx.output.data(head)
    else:
        for ref in refs:
            ctx.output.line(f"reverted {ref} on lakefs://{repo}/{name}")
        ctx.output.line(f"head is now {head['id']}")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``branch`` group."""
    group = sub.add_parser("branch", help="create, list, show, delete, reset and revert branches")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser("create", parents=[common], help="create a branch from a ref")
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    p.add_argument(
        "-s",
        "--source",
        required=True,
        metavar="lakefs://REPO/REF",
        help="where the branch starts: a lakefs:// URI or a ref of the same repository",
    )
    p.set_defaults(run=_create)

    p = cmds.add_parser("list", parents=[common], help="list a repository's branches")
    p.add_argument("repository", metavar="lakefs://REPO")
    add_listing_options(p)
    p.set_defaults(run=_list)

    p = cmds.add_parser("delete", parents=[common], help="delete a branch")
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    add_yes_option(p)
    p.set_defaults(run=_delete)

    p = cmds.add_parser("show", parents=[common], help="show a branch's head commit")
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    p.set_defaults(run=_show)

    p = cmds.add_parser("reset", parents=[common], help="drop a branch's uncommitted changes")
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--object", metavar="PATH", help="only this object")
    which.add_argument("--prefix", metavar="PREFIX", help="only the objects under this prefix")
    add_yes_option(p)
    p.set_defaults(run=_reset)

    p = cmds.add_parser(
        "revert", parents=[common], help="commit the inverse of commits onto a branch"
    )
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    p.add_argument("commits", nargs="+", metavar="COMMIT", help="commit refs to revert, in order")
    p.add_argument(
        "-m",
        "--parent-number",
        type=non_negative_int,
        default=0,
        help="for a merge commit, the parent (1-based) to revert against",
    )
    p.add_argument("--allow-empty", action="store_true", help="allow a revert that changes nothing")
    p.set_defaults(run=_revert)

"""``lakemirror repo create|list|delete|show``."""

from __future__ import annotations

import argparse
from typing import Any

from mirror.cli.commands.options import add_listing_options, add_yes_option
from mirror.cli.context import Context
from mirror.cli.output import format_time
from mirror.cli.uris import repository_uri

__all__ = ["register"]


def _fields(ctx: Context, repo: dict[str, Any]) -> None:
    ctx.output.fields(
        [
            ("Repository", f"lakefs://{repo['id']}"),
            ("Storage namespace", repo["storage_namespace"]),
            ("Default branch", repo["default_branch"]),
            ("Created", format_time(repo.get("creation_date"))),
            ("Read only", "yes" if repo.get("read_only") else "no"),
        ]
    )


def _create(args: argparse.Namespace, ctx: Context) -> int:
    name = repository_uri(args.repository)
    namespace = args.storage_namespace or f"local://{name}"
    repo = ctx.client.create_repository(
        name, namespace, args.default_branch, read_only=args.read_only
    )
    if ctx.output.json:
        ctx.output.data(repo)
    else:
        _fields(ctx, repo)
    return 0


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repos = list(
        ctx.client.list_repositories(prefix=args.prefix, after=args.after, limit=args.amount)
    )
    if ctx.output.json:
        ctx.output.data(repos)
    else:
        ctx.output.table(
            ["repository", "created", "default branch", "storage namespace"],
            [
                (
                    r["id"],
                    format_time(r.get("creation_date")),
                    r["default_branch"],
                    r["storage_namespace"],
                )
                for r in repos
            ],
        )
    return 0


def _delete(args: argparse.Namespace, ctx: Context) -> int:
    name = repository_uri(args.repository)
    ctx.confirm(f"delete repository {name!r} and all its history?", args.yes)
    ctx.client.delete_repository(name, force=args.force)
    if ctx.output.json:
        ctx.output.data({"deleted": f"lakefs://{name}"})
    else:
        ctx.output.line(f"deleted repository lakefs://{name}")
    return 0


def _show(args: argparse.Namespace, ctx: Context) -> int:
    repo = ctx.client.get_repository(repository_uri(args.repository))
    if ctx.output.json:
        ctx.output.data(repo)
    else:
        _fields(ctx, repo)
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``repo`` group."""
    group = sub.add_parser("repo", help="create, list, show and delete repositories")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser("create", parents=[common], help="create a repository")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument(
        "storage_namespace",
        nargs="?",
        default="",
        metavar="STORAGE_NAMESPACE",
        help="where the data lives (default: local://REPO)",
    )
    p.add_argument("-d", "--default-branch", default="main", help="default branch (main)")
    p.add_argument("--read-only", action="store_true", help="refuse every write to it")
    p.set_defaults(run=_create)

    p = cmds.add_parser("list", parents=[common], help="list repositories")
    add_listing_options(p)
    p.set_defaults(run=_list)

    p = cmds.add_parser("delete", parents=[common], help="delete a repository")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("-f", "--force", action="store_true", help="delete even a read-only repository")
    add_yes_option(p)
    p.set_defaults(run=_delete)

    p = cmds.add_parser("show", parents=[common], help="show a repository")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.set_defaults(run=_show)

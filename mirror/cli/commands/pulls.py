"""``lakemirror pr list|create|get|update|merge``: pull requests (lakeFS's ``/pulls``)."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from mirror.cli.commands.options import add_listing_options
from mirror.cli.context import Context
from mirror.cli.uris import ref_argument, ref_uri, repository_uri

__all__ = ["register"]


def _pulls(repo: str, pull_id: str = "") -> str:
    path = f"/repositories/{quote(repo, safe='')}/pulls"
    return f"{path}/{quote(pull_id, safe='')}" if pull_id else path


def _show(ctx: Context, repo: str, pull: dict[str, Any]) -> None:
    ctx.output.fields(
        [
            ("ID", pull["id"]),
            ("Title", pull["title"]),
            ("Status", pull["status"]),
            ("Author", pull["author"]),
            ("Source", f"lakefs://{repo}/{pull['source_branch']}"),
            ("Destination", f"lakefs://{repo}/{pull['destination_branch']}"),
            ("Created", pull["creation_date"]),
            ("Closed", pull.get("closed_date")),
            ("Merge commit", pull.get("merged_commit_id")),
            ("Description", pull["description"]),
        ]
    )


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    pulls = list(
        ctx.client.paginate(
            _pulls(repo),
            {"status": args.status, "prefix": args.prefix},
            limit=args.amount,
            after=args.after,
        )
    )
    if ctx.output.json:
        ctx.output.data(pulls)
    else:
        ctx.output.table(
            ["id", "status", "source", "destination", "author", "title"],
            [
                (
                    p["id"],
                    p["status"],
                    p["source_branch"],
                    p["destination_branch"],
                    p["author"],
                    p["title"],
                )
                for p in pulls
            ],
        )
    return 0


def _create(args: argparse.Namespace, ctx: Context) -> int:
    repo, source = ref_uri(args.source)
    destination = ref_argument(args.destination, repo)
    body = {
        "title": args.title,
        "description": args.description,
        "source_branch": source,
        "destination_branch": destination,
    }
    created = ctx.client.request("POST", _pulls(repo), json=body).json()
    if ctx.output.json:
        ctx.output.data(created)
    else:
        ctx.output.line(
            f"opened pull request {created['id']}: lakefs://{repo}/{source} into "
            f"lakefs://{repo}/{destination}"
        )
    return 0


def _get(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    pull = ctx.client.get_json(_pulls(repo, args.id))
    if ctx.output.json:
        ctx.output.data(pull)
    else:
        _show(ctx, repo, pull)
    return 0


def _update(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    body = {
        k: v
        for k, v in (
            ("title", args.title),
            ("description", args.description),
            ("status", args.status),
        )
        if v is not None
    }
    ctx.client.request("PATCH", _pulls(repo, args.id), json=body)
    pull = ctx.client.get_json(_pulls(repo, args.id))
    if ctx.output.json:
        ctx.output.data(pull)
    else:
        _show(ctx, repo, pull)
    return 0


def _merge(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    result = ctx.client.request("PUT", _pulls(repo, args.id) + "/merge").json()
    if ctx.output.json:
        ctx.output.data(result)
    else:
        ctx.output.line(f"merged pull request {args.id}: {result['reference']}")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``pr`` group."""
    group = sub.add_parser("pr", help="list, open, show, update and merge pull requests")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser("list", parents=[common], help="list a repository's pull requests")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument(
        "--status",
        choices=["open", "closed", "all"],
        default="open",
        help="which pull requests (closed includes merged; default: open)",
    )
    add_listing_options(p, what="ID")
    p.set_defaults(run=_list)

    p = cmds.add_parser("create", parents=[common], help="open a pull request")
    p.add_argument("source", metavar="lakefs://REPO/SOURCE", help="the branch to merge")
    p.add_argument(
        "destination",
        metavar="lakefs://REPO/BRANCH",
        help="the branch to merge into: a lakefs:// URI or a branch of the same repository",
    )
    p.add_argument("-t", "--title", required=True, help="the pull request's title")
    p.add_argument("-d", "--description", default="", help="what it is about")
    p.set_defaults(run=_create)

    p = cmds.add_parser("get", parents=[common], help="show a pull request")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("id", metavar="ID")
    p.set_defaults(run=_get)

    p = cmds.add_parser(
        "update", parents=[common], help="change a pull request's title, description or status"
    )
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("id", metavar="ID")
    p.add_argument("-t", "--title", default=None, help="the new title")
    p.add_argument("-d", "--description", default=None, help="the new description")
    p.add_argument(
        "--status", choices=["open", "closed", "merged"], default=None, help="the new status"
    )
    p.set_defaults(run=_update)

    p = cmds.add_parser("merge", parents=[common], help="merge an open pull request")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("id", metavar="ID")
    p.set_defaults(run=_merge)

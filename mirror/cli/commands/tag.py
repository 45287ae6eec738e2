"""``lakemirror tag create|list|delete|show``."""

from __future__ import annotations

import argparse

from mirror.cli.commands.options import add_listing_options, add_yes_option
from mirror.cli.context import Context
from mirror.cli.uris import ref_argument, ref_uri, repository_uri
from mirror.client.errors import NotFoundError

__all__ = ["register"]


def _create(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.tag)
    ref = ref_argument(args.ref, repo)
    if args.force:
        try:
            ctx.client.delete_tag(repo, name)
        except NotFoundError:
            pass
    tag = ctx.client.create_tag(repo, name, ref)
    if ctx.output.json:
        ctx.output.data(tag)
    else:
        ctx.output.line(f"created tag lakefs://{repo}/{tag['id']} at {tag['commit_id']}")
    return 0


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    tags = list(ctx.client.list_tags(repo, prefix=args.prefix, after=args.after, limit=args.amount))
    if ctx.output.json:
        ctx.output.data(tags)
    else:
        ctx.output.table(["tag", "commit id"], [(t["id"], t["commit_id"]) for t in tags])
    return 0


def _delete(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.tag)
    ctx.confirm(f"delete tag {name!r} of {repo!r}?", args.yes)
    ctx.client.delete_tag(repo, name)
    if ctx.output.json:
        ctx.output.data({"deleted": f"lakefs://{repo}/{name}"})
    else:
        ctx.output.line(f"deleted tag lakefs://{repo}/{name}")
    return 0


def _show(args: argparse.Namespace, ctx: Context) -> int:
    repo, name = ref_uri(args.tag)
    tag = ctx.client.get_tag(repo, name)
    if ctx.output.json:
        ctx.output.data(tag)
    else:
        ctx.output.fields(
            [("Tag", f"lakefs://{repo}/{tag['id']}"), ("Commit ID", tag["commit_id"])]
        )
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``tag`` group."""
    group = sub.add_parser("tag", help="create, list, show and delete tags")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser("create", parents=[common], help="tag a ref")
    p.add_argument("tag", metavar="lakefs://REPO/TAG")
    p.add_argument(
        "ref", metavar="lakefs://REPO/REF", help="a lakefs:// URI or a ref of the same repository"
    )
    p.add_argument("-f", "--force", action="store_true", help="replace the tag if it exists")
    p.set_defaults(run=_create)

    p = cmds.add_parser("list", parents=[common], help="list a repository's tags")
    p.add_argument("repository", metavar="lakefs://REPO")
    add_listing_options(p)
    p.set_defaults(run=_list)

    p = cmds.add_parser("delete", parents=[common], help="delete a tag")
    p.add_argument("tag", metavar="lakefs://REPO/TAG")
    add_yes_option(p)
    p.set_defaults(run=_delete)

    p = cmds.add_parser("show", parents=[common], help="show a tag's commit")
    p.add_argument("tag", metavar="lakefs://REPO/TAG")
    p.set_defaults(run=_show)

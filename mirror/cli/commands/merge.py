"""``lakemirror merge`` and ``lakemirror cherry-pick``."""

from __future__ import annotations

import argparse

from mirror.cli import async_ops
from mirror.cli.commands.commit import print_commit
from mirror.cli.commands.options import non_negative_int
from mirror.cli.context import Context, parse_metadata
from mirror.cli.uris import ref_argument, ref_uri

__all__ = ["register"]


def _merge(args: argparse.Namespace, ctx: Context) -> int:
    repo, source = ref_uri(args.source)
    destination = ref_argument(args.destination, repo)
    result = async_ops.merge(
        ctx,
        repo,
        source,
        destination,
        message=args.message,
        metadata=parse_metadata(args.meta),
        strategy=args.strategy,
        allow_empty=args.allow_empty,
        squash=args.squash,
    )
    if ctx.output.json:
        ctx.output.data(result)
    else:
        ctx.output.line(
            f"merged lakefs://{repo}/{source} into lakefs://{repo}/{destination}: "
            f"{result['reference']}"
        )
    return 0


def _cherry_pick(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref = ref_uri(args.commit)
    branch = ref_argument(args.branch, repo)
    commit = ctx.client.cherry_pick(repo, branch, ref, parent_number=args.parent_number)
    if ctx.output.json:
        ctx.output.data(commit)
    else:
        ctx.output.line(f"cherry-picked {ref} onto lakefs://{repo}/{branch}")
        ctx.output.line()
        print_commit(ctx.output, commit)
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``merge`` and ``cherry-pick``."""
    p = sub.add_parser("merge", parents=[common], help="merge a ref into a branch")
    p.add_argument("source", metavar="lakefs://REPO/SOURCE")
    p.add_argument(
        "destination",
        metavar="lakefs://REPO/BRANCH",
        help="the branch to merge into: a lakefs:// URI or a branch of the same repository",
    )
    p.add_argument(
        "--strategy",
        choices=["source-wins", "dest-wins"],
        default=None,
        help="resolve conflicts by taking one side (default: fail on conflict)",
    )
    p.add_argument("--allow-empty", action="store_true", help="merge even with no changes")
    p.add_argument("--squash", action="store_true", help="make a single-parent commit")
    p.add_argument("-m", "--message", default="", help="the merge commit's message")
    p.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="merge commit metadata (repeatable)"
    )
    p.set_defaults(run=_merge)

    p = sub.add_parser(
        "cherry-pick", parents=[common], help="apply a commit's changes onto a branch"
    )
    p.add_argument("commit", metavar="lakefs://REPO/COMMIT")
    p.add_argument(
        "branch",
        metavar="lakefs://REPO/BRANCH",
        help="a lakefs:// URI or a branch of the same repository",
    )
    p.add_argument(
        "-m",
        "--parent-number",
        type=non_negative_int,
        default=0,
        help="for a merge commit, the parent (1-based) to diff against",
    )
    p.set_defaults(run=_cherry_pick)

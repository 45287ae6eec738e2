"""``lakemirror commit``, ``lakemirror log`` and ``lakemirror show commit``."""

from __future__ import annotations

import argparse
from typing import Any

from mirror.cli import async_ops
from mirror.cli.commands.options import positive_int
from mirror.cli.context import Context, parse_metadata
from mirror.cli.output import Output, format_time
from mirror.cli.uris import ref_uri
from mirror.client.errors import UsageError

__all__ = ["print_commit", "register"]


def print_commit(out: Output, commit: dict[str, Any], *, meta_range: bool = False) -> None:
    """Print a commit the way ``git log`` does: fields, then the indented message and metadata."""
    pairs: list[tuple[str, object]] = [("ID", commit["id"])]
    parents = commit.get("parents") or []
    if len(parents) > 1:
        pairs.append(("Merge", " ".join(p[:16] for p in parents)))
    elif parents:
        pairs.append(("Parent", parents[0]))
    pairs.append(("Author", commit.get("committer", "")))
    pairs.append(("Date", format_time(commit.get("creation_date"))))
    if meta_range:
        pairs.append(("Meta Range ID", commit.get("meta_range_id", "")))
    out.fields(pairs)
    out.line()
    for text in (commit.get("message") or "").splitlines() or [""]:
        out.line(f"    {text}".rstrip())
    metadata = commit.get("metadata") or {}
    if metadata:
        out.line()
        width = max(len(k) for k in metadata)
        for key, value in sorted(metadata.items()):
            out.line(f"    {key.ljust(width)} = {value}")
    out.line()


def _commit(args: argparse.Namespace, ctx: Context) -> int:
    repo, branch = ref_uri(args.branch)
    message = args.message or ""
    if not message and not args.allow_empty_message:
        raise UsageError("a commit needs a message: -m MESSAGE (or --allow-empty-message)")
    commit = async_ops.commit(
        ctx, repo, branch, message, parse_metadata(args.meta), allow_empty=args.allow_empty
    )
    if ctx.output.json:
        ctx.output.data(commit)
    else:
        ctx.output.line(f"committed to lakefs://{repo}/{branch}")
        ctx.output.line()
        print_commit(ctx.output, commit)
    return 0


def _log(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref = ref_uri(args.ref)
    commits = ctx.client.log(repo, ref, first_parent=args.first_parent, limit=args.amount)
    if ctx.output.json:
        ctx.output.data(list(commits))
        return 0
    for commit in commits:
        if args.oneline:
            first = (commit.get("message") or "").partition("\n")[0]
            ctx.output.line(f"{commit['id'][:16]} {first}")
        else:
            print_commit(ctx.output, commit, meta_range=args.show_meta_range_id)
    return 0


def _show_commit(args: argparse.Namespace, ctx: Context) -> int:
    repo, ref = ref_uri(args.commit)
    commit = ctx.client.get_commit(repo, ref)
    if ctx.output.json:
        ctx.output.data(commit)
    else:
        print_commit(ctx.output, commit, meta_range=args.show_meta_range_id)
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``commit``, ``log`` and ``show``."""
    p = sub.add_parser("commit", parents=[common], help="commit a branch's uncommitted changes")
    p.add_argument("branch", metavar="lakefs://REPO/BRANCH")
    p.add_argument("-m", "--message", default="", help="the commit message")
    p.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="commit metadata (repeatable)"
    )
    p.add_argument("--allow-empty", action="store_true", help="commit even with no changes")
    p.add_argument(
        "--allow-empty-message", action="store_true", help="allow an empty commit message"
    )
    p.set_defaults(run=_commit)

    p = sub.add_parser("log", parents=[common], help="show the history of a ref, newest first")
    p.add_argument("ref", metavar="lakefs://REPO/REF")
    p.add_argument(
        "--amount", type=positive_int, default=None, help="show at most N commits (default: all)"
    )
    p.add_argument("--first-parent", action="store_true", help="follow only first parents")
    p.add_argument("--oneline", action="store_true", help="one line per commit")
    p.add_argument("--show-meta-range-id", action="store_true", help="show meta-range IDs")
    p.set_defaults(run=_log)

    show = sub.add_parser("show", help="show an object of the repository")
    things = show.add_subparsers(dest="subcommand", required=True, metavar="WHAT")
    p = things.add_parser("commit", parents=[common], help="show a commit")
    p.add_argument("commit", metavar="lakefs://REPO/COMMIT")
    p.add_argument("--show-meta-range-id", action="store_true", help="show the meta-range ID")
    p.set_defaults(run=_show_commit)

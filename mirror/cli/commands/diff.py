"""``lakemirror diff``: between two refs, or a branch's uncommitted changes."""

from __future__ import annotations

import argparse

from mirror.cli.commands.options import positive_int
from mirror.cli.context import Context
from mirror.cli.output import format_size
from mirror.cli.uris import ref_argument, ref_uri

__all__ = ["register"]

_SIGN = {"added": "+", "removed": "-", "changed": "~", "conflict": "!", "prefix_changed": "*"}


def _diff(args: argparse.Namespace, ctx: Context) -> int:
    repo, left = ref_uri(args.left)
    if args.right is None:
        rows = ctx.client.diff_uncommitted(repo, left, prefix=args.prefix, limit=args.amount)
    else:
        right = ref_argument(args.right, repo)
        rows = ctx.client.diff_refs(
            repo, left, right, two_dot=args.two_way, prefix=args.prefix, limit=args.amount
        )
    if ctx.output.json:
        ctx.output.data(list(rows))
        return 0
    found = False
    for row in rows:
        found = True
        # a removed path has no size on the wire (lakeFS sends 0)
        size = "" if row["type"] == "removed" else format_size(row.get("size_bytes"))
        line = f"{_SIGN.get(row['type'], '?')} {row['type']:<8} {row['path']}"
        ctx.output.line(f"{line}  ({size})" if size else line)
    if not found:
        ctx.output.line("no differences")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``diff``."""
    p = sub.add_parser(
        "diff",
        parents=[common],
        help="show changes between two refs, or a branch's uncommitted changes",
        description="With one URI, list the branch's uncommitted changes. With two, list what "
        "changed from LEFT to RIGHT: since their merge base (three-dot, the default), or "
        "between the two trees themselves with --two-way.",
    )
    p.add_argument("left", metavar="lakefs://REPO/LEFT")
    p.add_argument(
        "right",
        nargs="?",
        default=None,
        metavar="lakefs://REPO/RIGHT",
        help="a lakefs:// URI or a ref of the same repository",
    )
    p.add_argument("--two-way", action="store_true", help="compare the two trees (two-dot)")
    p.add_argument("--prefix", default="", help="only paths under this prefix")
    p.add_argument(
        "--amount", type=positive_int, default=None, help="show at most N changes (default: all)"
    )
    p.set_defaults(run=_diff)

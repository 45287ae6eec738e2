"""Entry point of the ``lakemirror`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mirror import __version__
from mirror.cli.tour import run_tour

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakemirror",
        description="A lakeFS-compatible versioning server with transactional mirroring.",
    )
    parser.add_argument("--version", action="version", version=f"lakemirror {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    tour = sub.add_parser(
        "tour",
        help="walk through the versioning core on the embedded default (SQLite + local disk)",
    )
    tour.add_argument("--data-dir", default="./lakemirror-data", help="where to keep the data")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    if args.command == "tour":
        return run_tour(args.data_dir, out=sys.stdout)
    return 2


if __name__ == "__main__":
    sys.exit(main())

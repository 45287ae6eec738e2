"""Options shared by several client commands."""

from __future__ import annotations

import argparse

__all__ = ["add_listing_options", "add_yes_option", "non_negative_int", "positive_int"]


def positive_int(text: str) -> int:
    """Return ``text`` as an integer above zero.

    Raises:
        argparse.ArgumentTypeError: it is not one.
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """Return ``text`` as an integer of 0 or more.

    Raises:
        argparse.ArgumentTypeError: it is not one.
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def add_listing_options(parser: argparse.ArgumentParser, *, what: str = "name") -> None:
    """Add ``--amount``, ``--after`` and ``--prefix`` to a listing command."""
    parser.add_argument(
        "--amount", type=positive_int, default=None, help="return at most N results (default: all)"
    )
    parser.add_argument("--after", default="", help=f"start after this {what}")
    parser.add_argument("--prefix", default="", help=f"only the {what}s that start with this")


def add_yes_option(parser: argparse.ArgumentParser) -> None:
    """Add ``-y/--yes``: skip the confirmation asked on a terminal."""
    parser.add_argument(
        "-y", "--yes", action="store_true", help="do not ask for confirmation on a terminal"
    )

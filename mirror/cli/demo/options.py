"""The ``demo`` subcommand's arguments and the checked options of one run."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from mirror.cli.arguments import UsageError, parse_interval, parse_seconds

__all__ = ["DROP_PROBABILITY", "PROG", "Options", "parse_options", "register_demo_command"]

PROG = "lakemirror demo"
DROP_PROBABILITY = 0.05


def register_demo_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand to ``sub``."""
    cmd = sub.add_parser(
        "demo",
        help="run two regions locally, mirror a repository between them while a writer "
        "commits, watch it live, and check the mirror byte for byte at the end",
        description="Start a server per region (SQLite + local directories), a replicant, "
        "simulated object-store replication and a writer; create a mirror through the "
        "configuration API; show the source and mirror heads, lag and validation counters "
        "live; after --duration seconds (or Ctrl-C) print a consistency report. Exit code 0 "
        "when the mirror equals the source at the mirrored commit, 1 otherwise.",
    )
    cmd.add_argument(
        "--data-dir",
        default="./lakemirror-demo",
        help="where the regions keep their data and logs; region-a/ and region-b/ are "
        "emptied first (./lakemirror-demo)",
    )
    cmd.add_argument(
        "--duration", metavar="SECONDS", help="stop writing after this long (default: Ctrl-C)"
    )
    cmd.add_argument(
        "--commit-interval", metavar="SECONDS", default="1.0", help="seconds between commits (1)"
    )
    cmd.add_argument(
        "--delay",
        metavar="MIN:MAX",
        default="0:2",
        help="seconds replication takes per object, drawn uniformly (0:2)",
    )
    cmd.add_argument("--seed", metavar="N", help="seed of the writer and of replication (random)")
    cmd.add_argument(
        "--no-live",
        action="store_true",
        help="print a progress line every 2 seconds instead of redrawing the view",
    )


@dataclass(frozen=True, slots=True)
class Options:
    """What one run of the demo does, as checked from its arguments."""

    data_dir: Path
    duration: float | None
    commit_interval: float
    delay: tuple[float, float]
    seed: int | None
    live: bool
    drop_probability: float = DROP_PROBABILITY
    replication_poll: float = 0.1


def parse_options(args: argparse.Namespace, out: TextIO) -> Options:
    """Check ``args`` (from :func:`register_demo_command`); ``out`` decides whether to redraw.

    Raises:
        UsageError: an argument is invalid; the message is the line to print.
    """
    seed: int | None = None
    if args.seed is not None:
        try:
            seed = int(args.seed)
        except ValueError:
            raise UsageError(f"--seed {args.seed!r}: not an integer") from None
    duration = None if args.duration is None else parse_seconds("--duration", args.duration)
    isatty = getattr(out, "isatty", None)
    return Options(
        data_dir=Path(args.data_dir),
        duration=duration,
        commit_interval=parse_seconds("--commit-interval", args.commit_interval, positive=True),
        delay=parse_interval("--delay", args.delay),
        seed=seed,
        live=not args.no_live and callable(isatty) and bool(isatty()),
    )

"""``lakemirror config show``: the effective process configuration, secrets redacted."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

import yaml

__all__ = ["add_config_file_option", "register_config_command", "show_config"]


def add_config_file_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--config FILE``: the process configuration (not lakectl's client configuration)."""
    parser.add_argument(
        "--config",
        dest="config_file",
        metavar="FILE",
        default=None,
        help="LakeMirror configuration file (default: $LAKEMIRROR_CONFIG, else none: the "
        "embedded default); LAKEMIRROR_* variables override it (docs/configuration.md)",
    )


def register_config_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``config show`` to the subcommands ``sub``."""
    group = sub.add_parser("config", help="inspect the server's configuration")
    cmds = group.add_subparsers(dest="config_command", required=True, metavar="COMMAND")
    show = cmds.add_parser(
        "show", help="print the effective configuration (file + LAKEMIRROR_*), secrets redacted"
    )
    add_config_file_option(show)
    show.add_argument(
        "-o",
        "--output",
        dest="show_format",
        choices=["yaml", "json"],
        default=None,
        help="yaml (the default) or json",
    )


def show_config(config_file: str | None, fmt: str, *, out: TextIO, err: TextIO) -> int:
    """Print the effective configuration as ``fmt`` (yaml or json); return the exit code.

    An invalid configuration prints one line naming the key to ``err`` and returns 2.
    """
    from mirror.config import ConfigurationError, load_config, redacted

    try:
        config = load_config(config_file)
    except ConfigurationError as exc:
        print(f"lakemirror config show: {exc}", file=err, flush=True)
        return 2
    data = redacted(config)
    if fmt == "json":
        out.write(json.dumps(data, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(data, sort_keys=False))
    out.flush()
    return 0

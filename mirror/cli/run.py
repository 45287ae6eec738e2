"""Run one client command: shared options, and errors turned into one line and an exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from mirror.cli.context import Command, Context
from mirror.client.errors import CLIError, ExitCode

__all__ = ["add_client_options", "client_options", "run_client_command"]

_PROG = "lakemirror"


def add_client_options(parser: argparse.ArgumentParser, *, default: bool) -> None:
    """Add ``--output`` and ``--config``; ``default=False`` leaves the outer parser's values."""
    parser.add_argument(
        "-o",
        "--output",
        choices=["table", "json"],
        default="table" if default else argparse.SUPPRESS,
        help="print tables and text for people (table, the default) or JSON for scripts",
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        default=None if default else argparse.SUPPRESS,
        help="configuration file (default: $LAKECTL_CONFIG_FILE, else ~/.lakectl.yaml)",
    )


def client_options() -> argparse.ArgumentParser:
    """Return a parent parser with the options every client command accepts."""
    parent = argparse.ArgumentParser(add_help=False)
    add_client_options(parent, default=False)
    return parent


def _fail(stderr: TextIO, message: str, code: ExitCode) -> int:
    line = " ".join(message.split())
    stderr.write(f"{_PROG}: {line}\n")
    stderr.flush()
    return int(code)


def run_client_command(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run the command ``args.run``; return its exit code, printing any error as one line."""
    err = stderr or sys.stderr
    out = stdout or sys.stdout
    ctx = Context(
        config_path=args.config,
        output=args.output,
        stdin=stdin or sys.stdin,
        stdout=out,
        stderr=err,
        environ=environ,
    )
    command: Command = args.run
    try:
        code = command(args, ctx)
        out.flush()
        return code
    except CLIError as exc:
        return _fail(err, exc.message, exc.code)
    except KeyboardInterrupt:
        return _fail(err, "interrupted", ExitCode.INTERRUPTED)
    except BrokenPipeError:
        # the reader went away (``| head``): stop quietly, and keep Python's exit-time flush
        # from failing on the same pipe
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except (OSError, ValueError):
            pass
        return int(ExitCode.ERROR)
    except FileNotFoundError as exc:
        return _fail(err, f"{exc.filename}: {exc.strerror}", ExitCode.NOT_FOUND)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(err, f"{where}{exc.strerror or exc}", ExitCode.ERROR)
    except Exception as exc:
        return _fail(err, f"unexpected error: {type(exc).__name__}: {exc}", ExitCode.ERROR)
    finally:
        ctx.close()

"""Entry point of the ``lakemirror`` command."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence

from mirror import __version__
from mirror.cli.commands import register_all
from mirror.cli.config_cmd import add_config_file_option, register_config_command, show_config
from mirror.cli.demo import register_demo_command, run_demo
from mirror.cli.gc_cmd import register_gc_command
from mirror.cli.kv_cmd import init_kv, register_kv_command
from mirror.cli.mirror_cmd import register_mirror_command
from mirror.cli.replicant_cmd import register_replicant_command, run_replicant
from mirror.cli.run import add_client_options, client_options, run_client_command
from mirror.cli.simulate_cmd import register_simulate_command, run_simulate
from mirror.cli.tour import run_tour
from mirror.cli.validate_cmd import register_validate_command, run_validate

__all__ = ["EXTRA_MODULES", "NEEDS_EXTRA", "main", "missing_extra"]

EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "uvicorn"),
    "spark": ("pyspark",),
}
"""The modules an extra provides that commands cannot run without."""
NEEDS_EXTRA: dict[str, str] = {
    "server": "server",
    "replicant": "server",
    "demo": "server",
    "gc": "spark",
}
"""The extra each command needs beyond the core install (``s3`` is asked for only when used)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakemirror",
        description="A lakeFS-compatible versioning server with transactional mirroring.",
        epilog="Client commands read lakectl's configuration (~/.lakectl.yaml, LAKECTL_*). "
        "Exit codes: 0 success, 1 error, 2 usage or configuration, 3 authentication or "
        "permission, 4 not found, 5 conflict, 6 rejected as invalid, 7 server unreachable "
        "(docs/cli.md).",
    )
    parser.add_argument("--version", action="version", version=f"lakemirror {__version__}")
    add_client_options(parser, default=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tour = sub.add_parser(
        "tour",
        help="walk through the versioning core on the embedded default (SQLite + local disk)",
    )
    tour.add_argument("--data-dir", default="./lakemirror-data", help="where to keep the data")
    server = sub.add_parser("server", help="serve the lakeFS-compatible API (/api/v1)")
    add_config_file_option(server)
    server.add_argument("--host", help="address to listen on (server.host; 127.0.0.1)")
    server.add_argument("--port", type=int, help="port to listen on (server.port; 8000)")
    server.add_argument(
        "--data-dir",
        help="where to keep the SQLite KV and local:// namespaces, created on first start "
        "(data_dir; ./lakemirror-data)",
    )
    server.add_argument(
        "--wait-for-setup",
        action="store_true",
        help="on first start, generate no administrator: leave it to POST /api/v1/setup_lakefs",
    )
    server.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        help="the lowest level logged (logging.level; info)",
    )
    server.add_argument(
        "--log-format",
        choices=["auto", "json", "console"],
        help="log lines as JSON or readable text; auto: readable on a terminal (logging.format)",
    )
    register_replicant_command(sub)
    register_simulate_command(sub)
    register_demo_command(sub)
    register_validate_command(sub)
    register_config_command(sub)
    register_kv_command(sub)
    register_all(sub, client_options())
    register_gc_command(sub, client_options())
    register_mirror_command(sub, client_options())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = _parser().parse_args(argv)
    missing = missing_extra(args.command)
    if missing is not None:
        print(missing, file=sys.stderr, flush=True)
        return 2
    if hasattr(args, "run"):
        return run_client_command(args, os.environ)
    if args.command == "tour":
        return run_tour(args.data_dir, out=sys.stdout)
    if args.command == "config":
        fmt = args.show_format or ("json" if args.output == "json" else "yaml")
        return show_config(args.config_file, fmt, out=sys.stdout, err=sys.stderr)
    if args.command == "kv":
        return init_kv(args.config_file, out=sys.stdout, err=sys.stderr)
    if args.command == "server":
        return _serve(args)
    if args.command == "replicant":
        return run_replicant(args, out=sys.stdout, err=sys.stderr)
    if args.command == "simulate-replication":
        return run_simulate(args, sys.stdout, sys.stderr)
    if args.command == "demo":
        return run_demo(args, sys.stdout, sys.stderr)
    if args.command == "validate":
        return run_validate(args, sys.stdout, sys.stderr)
    return 2


def missing_extra(command: str) -> str | None:
    """Return the one line saying which extra ``command`` needs, or ``None`` when installed.

    The core install stays light (Spark executors and API clients use it); the HTTP server
    of ``server``, ``replicant`` and ``demo`` comes with the ``server`` extra.
    """
    extra = NEEDS_EXTRA.get(command)
    if extra is None:
        return None
    if all(importlib.util.find_spec(module) is not None for module in EXTRA_MODULES[extra]):
        return None
    return f"lakemirror {command}: needs the {extra!r} extra: pip install 'lakemirror[{extra}]'"


def _serve(args: argparse.Namespace) -> int:
    from mirror.cli.server import run_server
    from mirror.config import ConfigurationError, load_config, with_overrides

    flags = {
        "server": {"host": args.host, "port": args.port},
        "data_dir": args.data_dir,
        "logging": {"level": args.log_level, "format": args.log_format},
    }
    try:
        config = with_overrides(load_config(args.config_file), flags)
    except ConfigurationError as exc:
        print(f"lakemirror server: {exc}", file=sys.stderr, flush=True)
        return 2
    return run_server(config, out=sys.stdout, wait_for_setup=args.wait_for_setup)


if __name__ == "__main__":
    sys.exit(main())

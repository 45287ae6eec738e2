"""``lakemirror import``: import objects already in storage into a branch, as one commit."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mirror.cli.context import Context, parse_metadata
from mirror.cli.uris import ref_uri
from mirror.client.errors import CLIError

__all__ = ["POLL_INTERVAL", "register", "wait_for_import"]

POLL_INTERVAL = 1.0
"""Seconds between status requests while waiting (the server saves progress every second)."""


def _path(repo: str, branch: str) -> str:
    return f"/repositories/{quote(repo, safe='')}/branches/{quote(branch, safe='')}/import"


def wait_for_import(
    ctx: Context,
    repo: str,
    branch: str,
    import_id: str,
    *,
    on_progress: Callable[[int], None],
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll an import until it commits; return its last status.

    Raises:
        CLIError: the import failed or was canceled (its ``import error: …`` message).
    """
    while True:
        status: dict[str, Any] = ctx.client.get_json(_path(repo, branch), {"id": import_id})
        on_progress(int(status.get("ingested_objects") or 0))
        error = status.get("error")
        if error:
            raise CLIError(str(error.get("message", "import failed")))
        if status.get("completed"):
            return status
        sleep(POLL_INTERVAL)


def _import(args: argparse.Namespace, ctx: Context) -> int:
    repo, branch = ref_uri(args.branch)
    sources = [
        {
            "type": "common_prefix" if source.endswith("/") else "object",
            "path": source,
            "destination": args.to,
        }
        for source in args.sources
    ]
    body = {
        "paths": sources,
        "commit": {"message": args.message or "", "metadata": parse_metadata(args.meta)},
    }
    started = ctx.client.request("POST", _path(repo, branch), json=body).json()
    import_id = started["id"]
    if not args.wait:
        if ctx.output.json:
            ctx.output.data({"id": import_id})
        else:
            ctx.output.line(f"import {import_id} started on lakefs://{repo}/{branch}")
        return 0
    tty = ctx.stderr.isatty() and not ctx.output.json

    def progress(count: int) -> None:
        if tty:
            ctx.stderr.write(f"\rimported {count} objects\x1b[K")
            ctx.stderr.flush()

    try:
        status = wait_for_import(ctx, repo, branch, import_id, on_progress=progress)
    finally:
        if tty:
            ctx.stderr.write("\r\x1b[K")
            ctx.stderr.flush()
    if ctx.output.json:
        ctx.output.data(status)
    else:
        commit = status.get("commit") or {}
        ctx.output.line(
            f"imported {status.get('ingested_objects', 0)} objects into "
            f"lakefs://{repo}/{branch}: commit {commit.get('id', '')}"
        )
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``import``."""
    p = sub.add_parser(
        "import",
        parents=[common],
        help="import objects already in storage into a branch (one commit)",
        description=(
            "Import objects from the repository's storage: a source ending in '/' imports "
            "everything under that prefix, any other source one object. Everything already "
            "under the destination is replaced."
        ),
    )
    p.add_argument("--branch", required=True, metavar="lakefs://REPO/BRANCH")
    p.add_argument(
        "--from",
        dest="sources",
        action="append",
        required=True,
        metavar="URI",
        help="a source prefix (ending in '/') or object (repeatable)",
    )
    p.add_argument("--to", required=True, metavar="PATH", help="the destination in the branch")
    p.add_argument("-m", "--message", default="", help="the commit message")
    p.add_argument(
        "--meta", action="append", metavar="KEY=VALUE", help="commit metadata (repeatable)"
    )
    p.add_argument("--wait", action="store_true", help="wait for the import, showing progress")
    p.set_defaults(run=_import)

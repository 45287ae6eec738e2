"""``lakemirror refs dump|restore``: a repository's refs as a manifest of three metaranges.

``refs dump lakefs://REPO`` prints the manifest (``commits_meta_range_id``,
``tags_meta_range_id``, ``branches_meta_range_id``) as JSON, and writes it to ``--manifest
FILE`` too when asked. ``refs restore lakefs://REPO --manifest FILE`` (``-``: standard input)
loads it into a bare repository whose namespace holds the dumped files. When the server
advertises asynchronous operations both run as tasks (``POST …/dump``, ``POST …/restore``)
whose status is polled, as lakectl's ``refs-dump`` and ``refs-restore`` do; otherwise the
synchronous calls (``PUT …/refs/dump``, ``PUT …/refs/restore``) are made.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mirror.cli.async_ops import FIRST_POLL, LONGEST_POLL, advertises_async
from mirror.cli.context import Context
from mirror.cli.progress import Spinner
from mirror.cli.uris import repository_uri
from mirror.client.client import LakeFSClient, error_for
from mirror.client.errors import CLIError, UsageError

__all__ = ["MANIFEST_KEYS", "register"]

MANIFEST_KEYS = ("commits_meta_range_id", "tags_meta_range_id", "branches_meta_range_id")

JSON = dict[str, Any]


def _spinner(ctx: Context, verb: str) -> Spinner:
    return Spinner(verb, ctx.stderr, enabled=ctx.stderr.isatty() and not ctx.output.json)


# a dump or restore task's status carries the message only (lakeFS's shape): its status is
# found again from lakeFS's texts, so that the exit code is the synchronous call's
_TEXT_STATUS = (
    ("can only restore into a bare repository", 400),
    ("read-only repository", 403),
    ("not found", 404),
    ("validation error", 400),
)


def _task_error(message: str) -> CLIError:
    status = next((code for text, code in _TEXT_STATUS if text in message), 500)
    return error_for(status, message)


def _wait(client: LakeFSClient, path: str, task_id: str, spinner: Spinner) -> JSON:
    """Poll a dump or restore task until done; return its status.

    Raises:
        CLIError: the task failed (its error message).
    """
    delay = FIRST_POLL
    while True:
        status: JSON = client.get_json(path, params={"task_id": task_id})
        if status.get("done"):
            if status.get("error"):
                raise _task_error(str(status["error"]))
            return status
        spinner.tick()
        time.sleep(delay)  # the backoff between two status requests
        delay = min(delay * 1.5, LONGEST_POLL)


def _dump(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    client = ctx.client
    base = f"/repositories/{quote(repo, safe='')}"
    if advertises_async(client):
        task = client.request("POST", f"{base}/dump").json()
        with _spinner(ctx, "dumping refs") as spinner:
            manifest: JSON = _wait(client, f"{base}/dump", task["id"], spinner)["refs"]
    else:
        manifest = client.request("PUT", f"{base}/refs/dump").json()
    text = json.dumps({k: manifest[k] for k in MANIFEST_KEYS}, indent=2)
    if args.manifest:
        Path(args.manifest).write_text(text + "\n", encoding="utf-8")
    ctx.output.line(text)
    return 0


def _read_manifest(name: str, ctx: Context) -> JSON:
    text = ctx.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"manifest {name!r} is not JSON") from exc
    if not isinstance(manifest, dict) or not all(
        isinstance(manifest.get(k), str) and manifest[k] for k in MANIFEST_KEYS
    ):
        raise UsageError(f"manifest {name!r} must hold {', '.join(MANIFEST_KEYS)}")
    return {k: manifest[k] for k in MANIFEST_KEYS}


def _restore(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    body: JSON = {**_read_manifest(args.manifest, ctx), "force": args.force}
    client = ctx.client
    base = f"/repositories/{quote(repo, safe='')}"
    if advertises_async(client):
        task = client.request("POST", f"{base}/restore", json=body).json()
        with _spinner(ctx, "restoring refs") as spinner:
            _wait(client, f"{base}/restore", task["id"], spinner)
    else:
        client.request("PUT", f"{base}/refs/restore", json=body)
    if ctx.output.json:
        ctx.output.data({"restored": f"lakefs://{repo}"})
    else:
        ctx.output.line(f"restored refs into lakefs://{repo}")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``refs`` group."""
    group = sub.add_parser("refs", help="dump a repository's refs, or restore them")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    p = cmds.add_parser(
        "dump", parents=[common], help="write every commit, tag and branch to metaranges"
    )
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("--manifest", metavar="FILE", help="also write the manifest to FILE")
    p.set_defaults(run=_dump)
    p = cmds.add_parser(
        "restore", parents=[common], help="load a dump's refs into a bare repository"
    )
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument(
        "--manifest", metavar="FILE", required=True, help="the dump's manifest (-: standard input)"
    )
    p.add_argument(
        "--force", action="store_true", help="restore into a read-only repository (not a mirror)"
    )
    p.set_defaults(run=_restore)

"""``lakemirror actions runs list|describe``, ``actions runs hooks output``, ``actions validate``.

lakectl's ``actions`` group over lakeFS's ``/actions/runs`` operations; ``validate`` checks an
action file locally, as the server would when it reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from urllib.parse import quote

from mirror.cli.commands.options import positive_int
from mirror.cli.context import Context
from mirror.cli.uris import repository_uri

__all__ = ["register"]


def _runs(repo: str, run_id: str = "") -> str:
    path = f"/repositories/{quote(repo, safe='')}/actions/runs"
    return f"{path}/{quote(run_id, safe='')}" if run_id else path


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    params = {"branch": args.branch or None, "commit": args.commit or None}
    runs = list(
        ctx.client.paginate(
            _runs(repo),
            {k: v for k, v in params.items() if v},
            limit=args.amount,
            after=args.after,
        )
    )
    if ctx.output.json:
        ctx.output.data(runs)
    else:
        ctx.output.table(
            ["run id", "event", "branch", "start time", "end time", "commit id", "status"],
            [
                (
                    r["run_id"],
                    r["event_type"],
                    r["branch"],
                    r["start_time"],
                    r["end_time"],
                    r["commit_id"],
                    r["status"],
                )
                for r in runs
            ],
        )
    return 0


def _describe(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    run: dict[str, Any] = ctx.client.get_json(_runs(repo, args.run_id))
    hooks = list(ctx.client.paginate(_runs(repo, args.run_id) + "/hooks"))
    if ctx.output.json:
        ctx.output.data({**run, "hooks": hooks})
        return 0
    ctx.output.fields(
        [
            ("Run ID", run["run_id"]),
            ("Event", run["event_type"]),
            ("Branch", run["branch"]),
            ("Start time", run["start_time"]),
            ("End time", run["end_time"]),
            ("Commit ID", run["commit_id"]),
            ("Status", run["status"]),
        ]
    )
    ctx.output.line()
    ctx.output.table(
        ["hook run id", "action", "hook id", "start time", "end time", "status"],
        [
            (
                h["hook_run_id"],
                h["action"],
                h["hook_id"],
                h["start_time"],
                h.get("end_time") or "",
                h["status"],
            )
            for h in hooks
        ],
    )
    return 0


def _output(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    path = f"{_runs(repo, args.run_id)}/hooks/{quote(args.hook_run_id, safe='')}/output"
    out = ctx.binary_stdout
    with ctx.client.stream("GET", path) as response:
        for chunk in response.iter_bytes():
            out.write(chunk)
    out.flush()
    return 0


def _validate(args: argparse.Namespace, ctx: Context) -> int:
    # the action model imports the versioning core: only this command needs it
    from mirror.actions.model import ActionFileError, parse_action

    path = Path(args.file)
    try:
        action = parse_action(str(path), path.read_bytes())
    except (OSError, ActionFileError) as exc:
        ctx.output.line(f"invalid: {exc}")
        return 1
    if ctx.output.json:
        ctx.output.data({"name": action.name, "on": sorted(action.on), "valid": True})
    else:
        ctx.output.line(f"valid: action {action.name!r} on {', '.join(sorted(action.on))}")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``actions`` group."""
    group = sub.add_parser("actions", help="action runs (hooks) and action files")
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    runs = cmds.add_parser("runs", help="list and describe action runs")
    run_cmds = runs.add_subparsers(dest="runs_command", required=True, metavar="COMMAND")

    p = run_cmds.add_parser("list", parents=[common], help="list a repository's runs, newest first")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("--branch", default="", help="only the runs of this branch")
    p.add_argument("--commit", default="", help="only the runs of this commit")
    p.add_argument(
        "--amount", type=positive_int, default=None, help="return at most N runs (default: all)"
    )
    p.add_argument("--after", default="", help="start after this run ID")
    p.set_defaults(run=_list)

    p = run_cmds.add_parser("describe", parents=[common], help="show a run and its hook runs")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("run_id", metavar="RUN_ID")
    p.set_defaults(run=_describe)

    hooks = run_cmds.add_parser("hooks", help="the hook runs of a run")
    hook_cmds = hooks.add_subparsers(dest="hooks_command", required=True, metavar="COMMAND")
    p = hook_cmds.add_parser("output", parents=[common], help="print a hook run's output log")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("run_id", metavar="RUN_ID")
    p.add_argument("hook_run_id", metavar="HOOK_RUN_ID")
    p.set_defaults(run=_output)

    p = cmds.add_parser("validate", parents=[common], help="check an action file (locally)")
    p.add_argument("file", metavar="FILE")
    p.set_defaults(run=_validate)

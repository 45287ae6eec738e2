"""``lakemirror branch-protect add|list|delete``: a repository's branch protection rules.

As lakectl does, a change reads the rules with their ``ETag`` and writes the whole list back with
``If-Match`` set to it, so a concurrent change is never overwritten: the server answers 412 and
the command reads the rules again (a few times) before giving up with the conflict exit code.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from urllib.parse import quote

from mirror.cli.commands.options import add_yes_option
from mirror.cli.context import Context
from mirror.cli.uris import repository_uri
from mirror.client.errors import ConflictError, NotFoundError

__all__ = ["register"]

_TRIES = 3


def _path(repo: str) -> str:
    return f"/repositories/{quote(repo, safe='')}/settings/branch_protection"


def _read(ctx: Context, repo: str) -> tuple[list[str], str]:
    response = ctx.client.request("GET", _path(repo))
    return [str(r["pattern"]) for r in response.json()], response.headers.get("etag", "")


def _change(ctx: Context, repo: str, change: Callable[[list[str]], list[str] | None]) -> bool:
    """Write ``change`` of the rules under ``If-Match``; return whether anything changed."""
    for attempt in range(_TRIES):
        patterns, etag = _read(ctx, repo)
        changed = change(patterns)
        if changed is None:
            return False
        try:
            ctx.client.request(
                "PUT",
                _path(repo),
                json=[{"pattern": p} for p in changed],
                headers={"If-Match": etag},
            )
        except ConflictError as exc:
            if exc.status != 412 or attempt == _TRIES - 1:
                raise
            continue
        return True
    raise AssertionError("unreachable")


def _add(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    pattern: str = args.pattern
    added = _change(ctx, repo, lambda ps: None if pattern in ps else [*ps, pattern])
    if ctx.output.json:
        ctx.output.data({"repository": repo, "pattern": pattern, "added": added})
    elif added:
        ctx.output.line(f"protected branches matching {pattern!r} in lakefs://{repo}")
    else:
        ctx.output.line(f"branches matching {pattern!r} are protected already in lakefs://{repo}")
    return 0


def _list(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    patterns, _ = _read(ctx, repo)
    if ctx.output.json:
        ctx.output.data([{"pattern": p} for p in patterns])
    else:
        ctx.output.table(["branch name pattern"], [(p,) for p in patterns])
    return 0


def _delete(args: argparse.Namespace, ctx: Context) -> int:
    repo = repository_uri(args.repository)
    pattern: str = args.pattern
    ctx.confirm(f"stop protecting branches matching {pattern!r} in {repo!r}?", args.yes)

    def drop(patterns: list[str]) -> list[str]:
        if pattern not in patterns:
            raise NotFoundError(f"branch protection rule {pattern!r} not found in {repo!r}")
        return [p for p in patterns if p != pattern]

    _change(ctx, repo, drop)
    if ctx.output.json:
        ctx.output.data({"repository": repo, "pattern": pattern, "deleted": True})
    else:
        ctx.output.line(f"branches matching {pattern!r} are no longer protected in lakefs://{repo}")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``branch-protect`` group."""
    group = sub.add_parser(
        "branch-protect",
        help="add, list and delete branch protection rules (as lakectl branch-protect)",
    )
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")
    help_pattern = "a branch-name glob: '*' also matches '/'; '?', '[a-z]', '{a,b}' work"

    p = cmds.add_parser("add", parents=[common], help="protect the branches a pattern matches")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("pattern", help=help_pattern)
    p.set_defaults(run=_add)

    p = cmds.add_parser("list", parents=[common], help="list a repository's protection rules")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.set_defaults(run=_list)

    p = cmds.add_parser("delete", parents=[common], help="remove a protection rule")
    p.add_argument("repository", metavar="lakefs://REPO")
    p.add_argument("pattern", help=help_pattern)
    add_yes_option(p)
    p.set_defaults(run=_delete)

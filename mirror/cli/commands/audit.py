"""``lakemirror audit``: the audit trail of security and operations changes, newest first.

The command reads ``GET /api/v1/audit`` (which needs ``auth:ReadAudit``, an administrator's)
with the same filters, page after page, and prints a table or, with ``-o json``, the events as
the API answers them. See docs/audit.md.
"""

from __future__ import annotations

import argparse
from typing import Any

from mirror.cli.commands.options import positive_int
from mirror.cli.context import Context

__all__ = ["register"]

_DEFAULT_AMOUNT = 100
_MESSAGE_CHARS = 80


def _who(actor: dict[str, Any]) -> str:
    user = actor.get("user_id") or "anonymous"
    key = actor.get("access_key_id")
    return f"{user} ({key})" if key else str(user)


def _target(target: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in target.items())


def _result(event: dict[str, Any]) -> str:
    if event.get("result") == "success":
        return "success"
    message = str(event.get("message") or "")
    if len(message) > _MESSAGE_CHARS:
        message = message[: _MESSAGE_CHARS - 3] + "..."
    return f"failure {event.get('status')}: {message}"


def _row(event: dict[str, Any]) -> tuple[str, ...]:
    actor = event.get("actor") or {}
    return (
        str(event.get("time", "")),
        str(event.get("kind", "")),
        _who(actor),
        str(actor.get("address") or ""),
        _target(event.get("target") or {}),
        _result(event),
    )


def _audit(args: argparse.Namespace, ctx: Context) -> int:
    filters = {
        name: value
        for name, value in (
            ("kind", args.kind),
            ("user", args.user),
            ("repository", args.repository),
            ("since", args.since),
            ("until", args.until),
            ("result", args.result),
        )
        if value
    }
    limit = None if args.all else args.amount
    events = list(ctx.client.paginate("/audit", filters, limit=limit, after=args.after))
    if ctx.output.json:
        ctx.output.data(events)
    else:
        ctx.output.table(
            ["time", "kind", "user", "from", "target", "result"], [_row(e) for e in events]
        )
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``audit`` command."""
    p = sub.add_parser(
        "audit",
        parents=[common],
        help="list the audit trail of security and operations changes (administrators)",
        description="List recorded changes of users, groups, policies, keys, branch "
        "protection, GC rules, repositories and mirrors, hard resets and GC sweeps, newest "
        "first: who made each, from where, and how it ended.",
    )
    p.add_argument("--kind", default="", help="a kind, or the start of kinds (auth, mirror)")
    p.add_argument("--user", default="", help="only changes made by this user ID")
    p.add_argument("--repository", default="", help="only changes naming this repository")
    p.add_argument("--since", default="", help="at or after: Unix seconds or RFC 3339")
    p.add_argument("--until", default="", help="at or before: Unix seconds or RFC 3339")
    p.add_argument(
        "--result", choices=["success", "failure"], default="", help="only successes or failures"
    )
    p.add_argument(
        "--amount",
        type=positive_int,
        default=_DEFAULT_AMOUNT,
        help=f"print at most N events (default {_DEFAULT_AMOUNT})",
    )
    p.add_argument("--all", action="store_true", help="print every matching event")
    p.add_argument("--after", default="", help="start after this event ID (a page's last)")
    p.set_defaults(run=_audit)

"""``lakemirror mirror promote|adopt|switchover|copy-preserved``: move the writable role.

These commands call replicants' configuration API (``/service/replication/v1``) with the access
key of the client configuration (lakectl's file or ``LAKECTL_*``), as the other client commands
call a server. ``switchover`` is the planned move of the writable role in one command: it promotes
the mirror on the target region's replicant (the source is demoted and caught up with first, so
nothing is lost), then makes the old source a mirror of the promoted repository on the other
region's replicant. ``copy-preserved`` is fail-back's second step: a branch preserved in the old
region is copied to the new source once its files have arrived there.
"""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from mirror.cli.context import Context
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig, load_config
from mirror.client.errors import UsageError

__all__ = ["register_mirror_command"]

_API = "/service/replication/v1/repositories"


def _seg(value: str) -> str:
    return quote(value, safe="")


def _replicant(
    ctx: Context, url: str, timeout: float, config_path: str | None = None
) -> LakeFSClient:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"replicant URL {url!r} is not an http(s) URL")
    # each region checks keys against its own users: a switchover may need one key per region
    config = load_config(config_path, ctx.environ) if config_path else ctx.config
    return LakeFSClient(
        ClientConfig(url, config.access_key_id, config.secret_access_key), timeout=timeout
    )


def _promote_call(
    client: LakeFSClient, source_repo: str, name: str, *, force: bool, timeout: float
) -> dict[str, Any]:
    path = f"{_API}/{_seg(source_repo)}/mirrors/{_seg(name)}/promote"
    report: dict[str, Any] = client.request(
        "POST", path, json={"force": force, "timeout": timeout}
    ).json()
    return report


def _adopt_call(client: LakeFSClient, new_source: str, body: dict[str, Any]) -> dict[str, Any]:
    mirror: dict[str, Any] = client.request(
        "POST", f"{_API}/{_seg(new_source)}/mirrors", json=body
    ).json()
    return mirror


def _print_promotion(ctx: Context, report: dict[str, Any]) -> None:
    refused = report.get("writes_refused_seconds")
    ctx.output.line(
        f"promoted {report['mirror']} (mirror of {report['source']}, "
        f"{'forced' if report['forced'] else 'planned'})"
        + (f"; writes refused for {refused:.3f}s" if refused is not None else "")
    )
    ctx.output.table(["branch", "head"], sorted((b, c) for b, c in report.get("heads", {}).items()))
    missing = report.get("missing") or {}
    if missing:
        ctx.output.line("may be missing (seen at the source, never validated):")
        ctx.output.table(
            ["branch", "mirror head", "source head", "commits behind"],
            [
                (b, m.get("mirror_head") or "-", m.get("source_head") or "-", _behind(m))
                for b, m in sorted(missing.items())
            ],
        )


def _behind(missing: dict[str, Any]) -> str:
    """Return a branch's commits behind: the count, or "at least" its lower bound."""
    if missing.get("lag_commits") is not None:
        return str(missing["lag_commits"])
    return f"at least {missing.get('lag_commits_at_least') or 1}"


def _print_adoption(ctx: Context, mirror: dict[str, Any]) -> None:
    ctx.output.line(
        f"{mirror['name']} now mirrors {mirror['source_region']}/{mirror['source_repo']}"
    )
    preserved = mirror.get("preserved") or []
    if preserved:
        ctx.output.line("diverged branches preserved:")
        ctx.output.table(
            ["preserved as", "from branch", "head", "commits", "paths"],
            [
                (p["branch"], p["from_branch"], p["head"], len(p["commits"]), p["paths"])
                for p in preserved
            ],
        )
    tags = mirror.get("preserved_tags") or []
    if tags:
        ctx.output.line("tags kept: " + ", ".join(tags))


def _promote(args: argparse.Namespace, ctx: Context) -> int:
    with _replicant(ctx, args.replicant, args.timeout + 60) as client:
        report = _promote_call(
            client, args.source_repo, args.name, force=args.force, timeout=args.timeout
        )
    if ctx.output.json:
        ctx.output.data(report)
    else:
        _print_promotion(ctx, report)
    return 0


def _adoption_body(args: argparse.Namespace, name: str, region: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "region": region,
        "existing": True,
        "preserve_diverged": args.preserve_diverged,
        "branches": args.branches or ["*"],
        "tags": not args.no_tags,
    }
    if getattr(args, "source_region", None):
        body["source_region"] = args.source_region
    if getattr(args, "storage_namespace", None):
        body["storage_namespace"] = args.storage_namespace
    return body


def _adopt(args: argparse.Namespace, ctx: Context) -> int:
    body = _adoption_body(args, args.name, args.region)
    with _replicant(ctx, args.replicant, 300) as client:
        mirror = _adopt_call(client, args.source_repo, body)
    if ctx.output.json:
        ctx.output.data(mirror)
    else:
        _print_adoption(ctx, mirror)
    return 0


def _copy_preserved(args: argparse.Namespace, ctx: Context) -> int:
    body = {"region": args.from_region, "repository": args.from_repository, "branch": args.branch}
    with _replicant(ctx, args.replicant, 300) as client:
        copied: dict[str, Any] = client.request(
            "POST", f"{_API}/{_seg(args.repository)}/preserved-branches", json=body
        ).json()
    if ctx.output.json:
        ctx.output.data(copied)
    else:
        ctx.output.line(
            f"copied {copied['branch']} at {copied['head']} from {copied['source']} into "
            f"{args.repository} ({len(copied['commits'])} commit(s) imported)"
        )
    return 0


def _switchover(args: argparse.Namespace, ctx: Context) -> int:
    with _replicant(ctx, args.to_replicant, args.timeout + 60, args.to_config) as target:
        mirror = target.get_json(f"{_API}/{_seg(args.source_repo)}/mirrors/{_seg(args.name)}")
        report = _promote_call(
            target, args.source_repo, args.name, force=False, timeout=args.timeout
        )
    old_region = str(report["source"]).split("/", 1)[0]
    body = _adoption_body(args, args.source_repo, old_region)
    body["source_region"] = mirror["region"]
    with _replicant(ctx, args.from_replicant, 300, args.from_config) as previous:
        adopted = _adopt_call(previous, args.name, body)
    if ctx.output.json:
        ctx.output.data({"promotion": report, "reverse_mirror": adopted})
    else:
        _print_promotion(ctx, report)
        _print_adoption(ctx, adopted)
    return 0


def _adoption_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preserve-diverged",
        action="store_true",
        help="keep the head of each branch holding commits the new source lacks on a new "
        "preserved-<branch>-<UTC timestamp> branch instead of refusing",
    )
    p.add_argument(
        "--branch",
        dest="branches",
        action="append",
        metavar="PATTERN",
        help="a glob pattern of branches to mirror (repeatable; default: all)",
    )
    p.add_argument("--no-tags", action="store_true", help="do not mirror tags")


def register_mirror_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add the ``mirror`` group."""
    group = sub.add_parser(
        "mirror", help="promote mirrors, reverse mirroring, switch the writable region over"
    )
    cmds = group.add_subparsers(dest="subcommand", required=True, metavar="COMMAND")

    p = cmds.add_parser(
        "promote",
        parents=[common],
        help="make a mirror its region's writable repository (planned, or --force)",
    )
    p.add_argument("source_repo", metavar="SOURCE_REPO", help="the repository it mirrors")
    p.add_argument("name", metavar="MIRROR", help="the mirror repository")
    p.add_argument("--replicant", required=True, metavar="URL", help="the mirror's replicant")
    p.add_argument(
        "--force",
        action="store_true",
        help="the source region is gone: promote at the validated heads without calling it",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the mirror to catch up (planned; default 60)",
    )
    p.set_defaults(run=_promote)

    p = cmds.add_parser(
        "adopt",
        parents=[common],
        help="make an existing repository of the replicant's region a mirror (fail-back)",
    )
    p.add_argument("source_repo", metavar="SOURCE_REPO", help="the repository to follow")
    p.add_argument("name", metavar="REPO", help="the existing repository to make its mirror")
    p.add_argument("--replicant", required=True, metavar="URL", help="REPO's region's replicant")
    p.add_argument("--region", required=True, help="REPO's region (the replicant's)")
    p.add_argument("--source-region", help="SOURCE_REPO's region (found when unambiguous)")
    p.add_argument(
        "--storage-namespace", help="where SOURCE_REPO's files arrive (default: REPO's namespace)"
    )
    _adoption_options(p)
    p.set_defaults(run=_adopt)

    p = cmds.add_parser(
        "copy-preserved",
        parents=[common],
        help="copy a branch preserved at fail-back in another region into REPO, once its "
        "files are in REPO's namespace",
    )
    p.add_argument("repository", metavar="REPO", help="the repository to copy the branch into")
    p.add_argument("branch", metavar="BRANCH", help="the preserved branch")
    p.add_argument("--replicant", required=True, metavar="URL", help="REPO's region's replicant")
    p.add_argument("--from-region", required=True, help="the region holding BRANCH")
    p.add_argument(
        "--from-repository", required=True, help="the repository holding BRANCH (the adopted one)"
    )
    p.set_defaults(run=_copy_preserved)

    p = cmds.add_parser(
        "switchover",
        parents=[common],
        help="move the writable role to the mirror's region without losing a commit, then "
        "mirror the old source from it",
    )
    p.add_argument("source_repo", metavar="SOURCE_REPO", help="the writable repository now")
    p.add_argument("name", metavar="MIRROR", help="its mirror, writable afterwards")
    p.add_argument(
        "--to-replicant", required=True, metavar="URL", help="the replicant of MIRROR's region"
    )
    p.add_argument(
        "--from-replicant",
        required=True,
        metavar="URL",
        help="the replicant of SOURCE_REPO's region",
    )
    p.add_argument(
        "--to-config",
        metavar="FILE",
        help="client configuration whose key MIRROR's region accepts (default: --config's)",
    )
    p.add_argument(
        "--from-config",
        metavar="FILE",
        help="client configuration whose key SOURCE_REPO's region accepts (default: --config's)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds to wait for the mirror to catch up (default 60)",
    )
    _adoption_options(p)
    p.set_defaults(run=_switchover)

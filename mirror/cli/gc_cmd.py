"""``lakemirror gc REPO``: collect a repository's garbage with a Spark job (a dry run by default).

The job (:mod:`mirror.spark.gc`) asks the server (lakectl's configuration: ``~/.lakectl.yaml``,
``LAKECTL_*``) to prepare the run, reads the retained commits' range files straight from the
namespace, lists the namespace's data objects and marks what nothing holds and is older than the
grace period. It writes a report under ``<ns>/_lakefs/retention/gc/unified/<run>/`` and prints a
summary with a sample of the marked addresses. ``--sweep`` deletes them; ``--sweep --mark-id RUN``
deletes what an earlier dry run marked.

Spark runs in local mode (``--master local[*]``) unless told otherwise; on a cluster, submit
:data:`mirror.spark.submit.GC_JOB` with ``spark-submit`` and the same arguments (docs/gc.md).
Mirrors refuse: exit code 3 with ``read-only repository``.

A sweep deletes objects outside the server, so the command reports it for the audit trail
(``POST …/gc/sweeps``, recorded as ``gc.sweep`` under the command's key): its run, its counts,
and, when it failed, why. A report the server cannot take is a warning, not a failed sweep.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mirror.cli.context import Context
from mirror.cli.output import format_size
from mirror.cli.run import add_client_options, run_client_command
from mirror.cli.uris import repository_uri
from mirror.client.client import LakeFSClient
from mirror.client.errors import AuthError, CLIError, UsageError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from mirror.spark.gc import GCRun

__all__ = [
    "add_gc_arguments",
    "register_gc_command",
    "report_sweep",
    "run_and_report",
    "submitted_main",
]

_DEFAULT_MASTER = "local[*]"
_DEFAULT_SAMPLE = 20


def add_gc_arguments(parser: argparse.ArgumentParser, *, master: str | None) -> None:
    """Add the arguments of a run to ``parser``; ``master`` is the default of ``--master``."""
    parser.add_argument(
        "repository", metavar="lakefs://REPO", help="the repository (lakefs://REPO or REPO)"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="delete the marked objects (default: a dry run that only writes the report)",
    )
    parser.add_argument(
        "--mark-id",
        metavar="RUN",
        help="with --sweep: delete what the dry run RUN marked, without marking anew",
    )
    parser.add_argument(
        "--grace-period",
        metavar="SECONDS",
        type=int,
        help="collect only objects at least this old (default: the server's, "
        "GET /config/garbage-collection; 86400 unless gc.grace_period says otherwise)",
    )
    parser.add_argument(
        "--master",
        default=master,
        help="Spark master" + (f" (default {master})" if master else " (default: spark-submit's)"),
    )
    parser.add_argument(
        "--sample",
        metavar="N",
        type=int,
        default=_DEFAULT_SAMPLE,
        help=f"marked addresses to print (default {_DEFAULT_SAMPLE})",
    )
    parser.add_argument(
        "--local-root",
        metavar="DIR",
        help="where the server keeps relative local:// namespaces (its data directory; "
        "default: LAKEMIRROR_* / $LAKEMIRROR_CONFIG); not needed for local:///abs or s3://",
    )


def report_sweep(
    client: LakeFSClient, repository: str, report: dict[str, Any], warn: Callable[[str], None]
) -> None:
    """Report a sweep for the server's audit trail; ``warn`` if the server refuses the report."""
    path = f"/repositories/{quote(repository, safe='')}/gc/sweeps"
    try:
        client.request("POST", path, json=report)
    except CLIError as exc:
        warn(f"warning: the sweep was not recorded: {exc.message}")


def _failure(exc: BaseException) -> dict[str, Any]:
    """Return what a sweep report says of the error that stopped the sweep."""
    if isinstance(exc, CLIError):
        return {"error": exc.message[:1000], "status": exc.status}
    first_line = str(exc).strip().split("\n", 1)[0]
    return {"error": f"{type(exc).__name__}: {first_line}"[:1000]}


def run_and_report(
    spark: SparkSession,
    repository: str,
    *,
    client: LakeFSClient,
    sweep: bool,
    mark_id: str | None = None,
    grace_period: int | None = None,
    sample: int = _DEFAULT_SAMPLE,
    local_root: str | Path | None = None,
    warn: Callable[[str], None],
) -> GCRun:
    """Run :func:`mirror.spark.gc.run_gc`; report a sweep, done or failed, to the audit trail."""
    from mirror.spark.gc import run_gc

    try:
        run = run_gc(
            spark,
            repository,
            client=client,
            sweep=sweep,
            mark_id=mark_id,
            grace_period=grace_period,
            sample=sample,
            local_root=local_root,
        )
    except Exception as exc:
        if sweep:
            failed = {"mark_id": mark_id, "marked": 0, "deleted": 0, **_failure(exc)}
            report_sweep(client, repository, failed, warn)
        raise
    if run.swept:
        swept = {
            "run_id": run.run_id,
            "mark_id": mark_id,
            "marked": run.marked,
            "marked_bytes": run.marked_bytes,
            "deleted": run.deleted,
        }
        report_sweep(client, repository, swept, warn)
    return run


def _warn(ctx: Context) -> Callable[[str], None]:
    def warn(text: str) -> None:
        ctx.stderr.write(f"lakemirror gc: {text}\n")
        ctx.stderr.flush()

    return warn


def _repository(text: str) -> str:
    return repository_uri(text if text.startswith("lakefs://") else f"lakefs://{text}")


def _run(args: argparse.Namespace, ctx: Context) -> int:
    if args.sample < 0:
        raise UsageError(f"--sample {args.sample}: must not be negative")
    if args.mark_id is not None and not args.sweep:
        raise UsageError("--mark-id sweeps an earlier run's marks: give --sweep too")
    if args.grace_period is not None and args.grace_period < 0:
        raise UsageError(f"--grace-period {args.grace_period}: must not be negative")
    repository = _repository(args.repository)
    client = ctx.client
    repo = client.get_repository(repository)
    if repo.get("read_only"):
        # the server refuses every preparation of a run too; this saves starting Spark
        raise AuthError(
            f"read-only repository: repository {repository!r} is read-only (a mirror?): "
            "garbage collection runs on its source, whose deletions reach it by replication",
            status=403,
        )
    try:
        from mirror.spark.gc import gc_session, rfc3339
    except ImportError as exc:  # pragma: no cover - pyspark is in the dev environment
        raise UsageError(f"lakemirror gc needs the spark extra: {exc}") from None
    spark = gc_session(args.master)
    try:
        run = run_and_report(
            spark,
            repository,
            client=client,
            sweep=args.sweep,
            mark_id=args.mark_id,
            grace_period=args.grace_period,
            sample=args.sample,
            local_root=args.local_root,
            warn=_warn(ctx),
        )
    finally:
        spark.stop()
    if ctx.output.json:
        ctx.output.data(run.summary())
        return 0
    out = ctx.output
    out.line(f"run {run.run_id} of lakefs://{run.repository} ({run.namespace})")
    if run.has_rules:
        out.line(f"retained commits: {run.retained_commits:,} ({run.ranges_read:,} ranges read)")
    else:
        out.line(f"no GC rules: every commit retained ({run.ranges_read:,} ranges read)")
    out.line(f"uncommitted addresses: {run.uncommitted_addresses:,}")
    out.line(
        f"grace period: {run.grace_period:,} s (objects modified before "
        f"{rfc3339(run.cutoff_time)} may go)"
    )
    out.line(f"objects listed: {run.objects_listed:,} ({format_size(run.bytes_listed)})")
    out.line(f"marked as garbage: {run.marked:,} ({format_size(run.marked_bytes)})")
    for address in run.sample:
        out.line(f"  {address}")
    if run.marked > len(run.sample):
        out.line(f"  ... and {run.marked - len(run.sample):,} more")
    if run.swept:
        out.line(f"swept: {run.deleted:,} objects deleted")
    else:
        out.line(
            f"dry run: nothing deleted; sweep with --sweep, or later with --sweep "
            f"--mark-id {run.run_id}"
        )
    out.line(f"report: {run.report_location}")
    return 0


def register_gc_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``gc`` to the subcommands ``sub``; ``common`` holds the client options."""
    cmd = sub.add_parser(
        "gc",
        parents=[common],
        help="collect a repository's garbage with a Spark job (dry run unless --sweep)",
        description="Mark every data object of the repository's namespace that no retained "
        "commit (by the repository's GC rules) and no branch's staging holds and that is older "
        "than the grace period; write a report under the namespace; with --sweep, delete them.",
    )
    add_gc_arguments(cmd, master=_DEFAULT_MASTER)
    cmd.set_defaults(run=_run)


def submitted_main(argv: Sequence[str] | None = None) -> int:
    """Run ``gc`` as ``spark-submit`` starts it: the master is spark-submit's unless given."""
    import os

    parser = argparse.ArgumentParser(
        prog="spark-submit gc_job.py",
        description="Garbage collection of a LakeMirror repository (lakemirror gc).",
    )
    add_client_options(parser, default=True)
    add_gc_arguments(parser, master=None)
    parser.set_defaults(run=_run)
    return run_client_command(parser.parse_args(argv), os.environ)


if __name__ == "__main__":
    sys.exit(submitted_main())

"""``lakemirror validate``: check by hand that a commit's tree is whole in a namespace.

Runs the replicant's existence check once, outside any mirror: the metarange, every range it
lists and every data object they point to (with its recorded size) must be present in the
namespace. ``--engine async`` (the default) runs :class:`~mirror.validator.Validator` as the
replicant does; ``--engine spark`` runs the bulk job of :mod:`mirror.spark.bulk_validator` in a
local Spark session. The tree is named by ``--metarange ID``, or by ``--repository`` and
``--commit`` (any ref), looked up through a server's API with lakectl's credentials.

Exit codes: 0 complete, 1 incomplete (or an unexpected failure), 2 usage or configuration, and
the client commands' codes for server errors (3 authentication, 4 not found, 7 unreachable).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO

from mirror.cli.arguments import UsageError as _UsageError
from mirror.cli.arguments import namespace_resolver, open_namespace
from mirror.cli.config_cmd import add_config_file_option
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from mirror.block.protocol import BlockStore
    from mirror.block.resolver import BlockResolver
    from mirror.config import LakeMirrorConfig

__all__ = ["register_validate_command", "run_validate"]

_PROG = "lakemirror validate"
_ENGINES = ("async", "spark")


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What either engine found, in the terms the summary prints."""

    engine: str
    namespace: str
    metarange_id: str
    complete: bool
    missing_count: int
    missing: tuple[str, ...]
    ranges_total: int
    ranges_read: int
    objects_checked: int
    seconds: float
    requests: dict[str, int] | None = None
    size_mismatches: int | None = None
    external_count: int | None = None
    external: tuple[str, ...] = ()


def register_validate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``validate`` to the subcommands ``sub``."""
    cmd = sub.add_parser(
        "validate",
        help="check that a commit's metarange, ranges and data objects are all in a namespace",
        description="Check that the tree of a commit is whole in a storage namespace: the "
        "metarange file, every range file and every data object with its recorded size. Exits "
        "0 when complete, 1 when something is missing, 2 on bad usage.",
    )
    cmd.add_argument(
        "--engine",
        choices=_ENGINES,
        default="async",
        help="async: the replicant's validator (listings and HEADs); spark: the bulk job, "
        "range files anti-joined with a listing of the namespace (default async)",
    )
    cmd.add_argument(
        "--namespace",
        metavar="URI",
        help="the namespace to check: local:///abs/path (or local://name under the data "
        "directory) or s3://bucket/prefix; default with --commit: the repository's own",
    )
    cmd.add_argument("--metarange", metavar="ID", help="the tree to check, by metarange ID")
    cmd.add_argument(
        "--commit", metavar="REF", help="the commit to check (any ref), read from --server"
    )
    cmd.add_argument("--repository", metavar="REPO", help="the repository of --commit")
    cmd.add_argument(
        "--server",
        metavar="URL",
        help="the lakeFS-compatible server to read the commit from (default: lakectl's "
        "server.endpoint_url or LAKECTL_SERVER_ENDPOINT_URL); credentials as lakectl's",
    )
    cmd.add_argument(
        "--listing",
        metavar="URI",
        help="spark: a Parquet listing of the namespace (key, size; or an S3 Inventory in "
        "Parquet) instead of listing it now",
    )
    cmd.add_argument(
        "--sample",
        metavar="N",
        type=int,
        default=100,
        help="missing keys to print at most (default 100; the async engine names 100 at most)",
    )
    cmd.add_argument(
        "--concurrency",
        metavar="N",
        type=int,
        help="async: requests in flight (default: replicant.concurrency)",
    )
    cmd.add_argument("--data-dir", help="the data directory local://name lives under (data_dir)")
    cmd.add_argument(
        "-o",
        "--output",
        choices=["table", "json"],
        default=argparse.SUPPRESS,
        help="print a summary for people (table) or one JSON object for scripts",
    )
    add_config_file_option(cmd)


def _check_args(args: argparse.Namespace) -> None:
    """Raise :class:`_UsageError` unless the arguments name one tree and sane limits."""
    if args.engine not in _ENGINES:
        raise _UsageError(f"--engine {args.engine!r}: use async or spark")
    if bool(args.metarange) == bool(args.commit):
        raise _UsageError("name the tree with either --metarange ID or --commit REF")
    if args.metarange and not args.namespace:
        raise _UsageError("--metarange needs --namespace URI")
    if args.commit and not args.repository:
        raise _UsageError("--commit needs --repository REPO")
    if args.sample < 0:
        raise _UsageError(f"--sample {args.sample}: must not be negative")
    if args.concurrency is not None and args.concurrency < 1:
        raise _UsageError(f"--concurrency {args.concurrency}: must be positive")
    if args.listing and args.engine != "spark":
        raise _UsageError("--listing is for --engine spark")


def _lookup_commit(args: argparse.Namespace) -> tuple[str, str]:
    """Return the metarange ID of ``--commit`` and the repository's storage namespace.

    Raises:
        CLIError: the configuration is invalid or the server refused or failed.
    """
    from mirror.client.client import LakeFSClient
    from mirror.client.config import api_base_url, load_config

    config = load_config(getattr(args, "config", None), os.environ)
    if args.server:
        config = replace(config, endpoint_url=api_base_url(args.server))
    with LakeFSClient(config, timeout=30.0) as client:
        commit = client.get_commit(args.repository, args.commit)
        namespace = args.namespace
        if not namespace:
            namespace = str(client.get_repository(args.repository)["storage_namespace"])
    return str(commit.get("meta_range_id") or ""), namespace


def _resolver(config: LakeMirrorConfig, namespace: str) -> tuple[BlockResolver, bool]:
    """Return a resolver for ``namespace`` as the server opens it, and whether S3 is served."""
    resolver = namespace_resolver(config, namespace, "--namespace")
    return resolver, namespace.startswith("s3://")


def _open(resolver: BlockResolver, namespace: str) -> BlockStore:
    return open_namespace(resolver, namespace, "--namespace")


def _run_async(
    config: LakeMirrorConfig,
    resolver: BlockResolver,
    s3: bool,
    namespace: str,
    metarange_id: str,
    concurrency: int | None,
) -> _Outcome:
    import anyio

    from mirror.replicant.readers import NamespaceReaders
    from mirror.validator import CountingReader, MemoryValidatedRanges, ObjectCache, Validator

    settings = None
    if s3:
        from mirror.cli.server import block_settings

        settings = block_settings(config.blockstore.s3)
    requests: Counter[str] = Counter()

    async def check() -> _Outcome:
        readers = NamespaceReaders(resolver, settings)
        try:
            reader = CountingReader(
                await readers.open(namespace), lambda op: requests.update((op,))
            )
            validator = Validator(
                reader,
                validated=MemoryValidatedRanges(),
                objects=ObjectCache(),
                concurrency=concurrency or config.replicant.concurrency,
                list_threshold=config.replicant.list_threshold,
                open_external=readers.open_now,
            )
            started = time.perf_counter()
            report = await validator.validate(metarange_id)
            return _Outcome(
                engine="async",
                namespace=reader.namespace,
                metarange_id=metarange_id,
                complete=report.complete,
                missing_count=report.missing_count,
                missing=tuple(sorted(report.missing)),
                ranges_total=report.ranges_total,
                ranges_read=report.ranges_read,
                objects_checked=report.objects_checked,
                seconds=time.perf_counter() - started,
                requests=dict(requests),
            )
        finally:
            await readers.aclose()

    return anyio.run(check)


def _run_spark(
    store: BlockStore, namespace: str, metarange_id: str, listing: str | None, sample: int
) -> _Outcome:
    try:
        from mirror.spark.bulk_validator import bulk_validate, local_spark_session
    except ImportError as exc:  # pragma: no cover - pyspark is in the dev environment
        raise _UsageError(f"--engine spark needs the spark extra: {exc}") from None
    spark = local_spark_session("lakemirror-validate")
    try:
        bulk = bulk_validate(
            spark, namespace, metarange_id, listing=listing, store=store, sample=sample
        )
    finally:
        spark.stop()
    return _Outcome(
        engine="spark",
        namespace=store.namespace,
        metarange_id=metarange_id,
        complete=bulk.complete,
        missing_count=bulk.missing_count,
        missing=bulk.missing,
        ranges_total=bulk.ranges_total,
        ranges_read=bulk.ranges_read,
        objects_checked=bulk.objects_checked,
        seconds=bulk.seconds,
        size_mismatches=bulk.size_mismatches,
        external_count=bulk.external_count,
        external=bulk.external,
    )


def _summary(outcome: _Outcome, sample: int) -> str:
    tree = outcome.metarange_id or "(the empty tree)"
    state = "complete" if outcome.complete else "INCOMPLETE"
    lines = [f"{state}: metarange {tree} in {outcome.namespace}"]
    work = (
        f"engine {outcome.engine}: {outcome.ranges_total:,} ranges ({outcome.ranges_read:,} "
        f"read), {outcome.objects_checked:,} objects checked"
    )
    if outcome.requests is not None:
        ops = ", ".join(f"{op.upper()} {n:,}" for op, n in sorted(outcome.requests.items()))
        work += f", {sum(outcome.requests.values()):,} requests ({ops or 'none'})"
    lines.append(f"{work} in {outcome.seconds:.1f} s")
    if outcome.missing_count:
        mismatches = (
            f" ({outcome.size_mismatches:,} of the wrong size)" if outcome.size_mismatches else ""
        )
        lines.append(f"missing: {outcome.missing_count:,}{mismatches}")
        shown = outcome.missing[:sample]
        lines.extend(f"  {key}" for key in shown)
        if outcome.missing_count > len(shown):
            lines.append(f"  ... and {outcome.missing_count - len(shown):,} more")
    if outcome.external_count:
        lines.append(f"outside the namespace, not checked: {outcome.external_count:,}")
        lines.extend(f"  {uri}" for uri in outcome.external[:sample])
    return "\n".join(lines)


def _as_json(outcome: _Outcome, sample: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "complete": outcome.complete,
        "engine": outcome.engine,
        "namespace": outcome.namespace,
        "metarange_id": outcome.metarange_id,
        "missing_count": outcome.missing_count,
        "missing": list(outcome.missing[:sample]),
        "ranges_total": outcome.ranges_total,
        "ranges_read": outcome.ranges_read,
        "objects_checked": outcome.objects_checked,
        "seconds": round(outcome.seconds, 3),
    }
    if outcome.requests is not None:
        data["requests"] = outcome.requests
    if outcome.size_mismatches is not None:
        data["size_mismatches"] = outcome.size_mismatches
    if outcome.external_count is not None:
        data["external_count"] = outcome.external_count
        data["external"] = list(outcome.external[:sample])
    return data


def run_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Validate as ``args`` (from :func:`register_validate_command`) say; return the exit code.

    Prints a summary (or, with ``-o json``, one JSON object) to ``out``: 0 when the tree is
    complete, 1 when something is missing. Bad arguments or configuration print one line to
    ``err`` and return 2; a server error returns the client commands' code for it.
    """
    from mirror.client.errors import CLIError, ExitCode
    from mirror.config import ConfigurationError, load_config, with_overrides
    from mirror.errors import UnavailableError

    def fail(message: object, code: int) -> int:
        print(f"{_PROG}: {message}", file=err, flush=True)
        return code

    try:
        _check_args(args)
        config = with_overrides(load_config(args.config_file), {"data_dir": args.data_dir})
        if args.commit:
            metarange_id, namespace = _lookup_commit(args)
        else:
            metarange_id, namespace = args.metarange, args.namespace
        resolver, s3 = _resolver(config, namespace)
        if args.engine == "spark":
            outcome = _run_spark(
                _open(resolver, namespace), namespace, metarange_id, args.listing, args.sample
            )
        else:
            _open(resolver, namespace)  # an invalid namespace is a usage error, not a failure
            outcome = _run_async(config, resolver, s3, namespace, metarange_id, args.concurrency)
    except (_UsageError, ConfigurationError) as exc:
        return fail(exc, 2)
    except CLIError as exc:
        return fail(exc.message, int(exc.code))
    except UnavailableError as exc:
        return fail(exc, int(ExitCode.UNAVAILABLE))
    except InvalidValueError as exc:
        return fail(exc, 2)
    if getattr(args, "output", "table") == "json":
        out.write(json.dumps(_as_json(outcome, args.sample)) + "\n")
    else:
        out.write(_summary(outcome, args.sample) + "\n")
    out.flush()
    return 0 if outcome.complete else 1


def _main() -> int:
    parser = argparse.ArgumentParser(prog="lakemirror")
    parser.add_argument("-c", "--config", default=None, help="lakectl configuration file")
    register_validate_command(parser.add_subparsers(dest="command", required=True))
    return run_validate(parser.parse_args(), sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(_main())

"""``lakemirror simulate-replication``: copy new objects between namespaces like S3 Replication.

The command stands in for S3 Replication in local runs: it polls the source namespace and copies
each new object to the destination late (``--delay``), in random order, optionally dropping
deliveries for a while (``--drop``, ``--drop-for``) or letting small objects overtake large ones
(``--small-first``). With ``--replicate-deletes`` it also deletes at the destination what is
deleted at the source, late and out of order too, as S3 Replication does when a rule enables
delete-marker replication (off by default there, and here). With ``--resume`` it takes what the
destination already holds as replicated, so that a simulator started again goes on where the
last one stopped. It runs until interrupted (SIGINT or SIGTERM) or for ``--duration`` seconds.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from mirror.cli.arguments import UsageError as _UsageError
from mirror.cli.arguments import namespace_resolver, open_namespace, parse_interval, parse_seconds
from mirror.cli.config_cmd import add_config_file_option

if TYPE_CHECKING:
    from mirror.block.protocol import BlockStore
    from mirror.config import LakeMirrorConfig
    from mirror.simulate import ReplicationSimulator, ReplicationStats

__all__ = ["register_simulate_command", "run_simulate"]

_PROG = "lakemirror simulate-replication"
_REPORT_EVERY = 1.0


def register_simulate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate-replication`` to the subcommands ``sub``."""
    cmd = sub.add_parser(
        "simulate-replication",
        help="copy new objects from one namespace to another like S3 Replication: late, "
        "out of order, with injected faults (for local runs and demos)",
        description="Poll the source namespace and copy every new object to the destination "
        "after a random delay, in random order, until interrupted (Ctrl-C, SIGTERM) or for "
        "--duration seconds. Prints one progress line a second.",
    )
    cmd.add_argument(
        "--from",
        dest="source",
        metavar="URI",
        help="source namespace: local:///abs/path or s3://bucket/prefix (required)",
    )
    cmd.add_argument(
        "--to",
        dest="destination",
        metavar="URI",
        help="destination namespace: local:///abs/path or s3://bucket/prefix (required)",
    )
    cmd.add_argument(
        "--delay",
        metavar="MIN:MAX",
        default="0:0",
        help="seconds between an object's discovery and its copy, drawn uniformly (0:0)",
    )
    cmd.add_argument(
        "--drop",
        metavar="P",
        default="0",
        help="probability in [0, 1) that a copy attempt is dropped and retried later (0)",
    )
    cmd.add_argument(
        "--drop-for",
        metavar="MIN:MAX",
        default="1:5",
        help="seconds a dropped object waits before its next attempt (1:5)",
    )
    cmd.add_argument(
        "--small-first",
        action="store_true",
        help="delay objects in proportion to their size, so metadata overtakes data",
    )
    cmd.add_argument(
        "--replicate-deletes",
        action="store_true",
        help="also delete at the destination what is deleted at the source, after --delay "
        "(like S3's delete-marker replication; never before the object's copy arrived)",
    )
    cmd.add_argument(
        "--resume",
        action="store_true",
        help="take what the destination already holds (same key and size) as replicated, so a "
        "restarted simulator picks up where the last one stopped instead of copying it all again",
    )
    cmd.add_argument("--seed", metavar="N", help="seed of delays, drops and order (random)")
    cmd.add_argument("--poll", metavar="SECONDS", default="0.5", help="seconds between scans (0.5)")
    cmd.add_argument(
        "--duration", metavar="SECONDS", help="stop after this many seconds (default: never)"
    )
    cmd.add_argument(
        "--from-region",
        metavar="NAME",
        help="for s3:// sources, the blockstore.s3.regions entry to reach it with",
    )
    cmd.add_argument(
        "--to-region",
        metavar="NAME",
        help="for s3:// destinations, the blockstore.s3.regions entry to reach it with",
    )
    add_config_file_option(cmd)


def _probability(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _UsageError(f"{option} {text!r}: not a probability") from None
    if not 0.0 <= value < 1.0:
        raise _UsageError(f"{option} {text!r}: must lie in [0, 1)")
    return value


def _seed(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise _UsageError(f"--seed {text!r}: not an integer") from None


def _for_region(config: LakeMirrorConfig, region: str | None) -> LakeMirrorConfig:
    """Return ``config`` whose default S3 settings are those of region ``region``."""
    if region is None:
        return config
    if region not in config.blockstore.s3.regions:
        raise _UsageError(f"region {region!r} has no entry in blockstore.s3.regions")
    blockstore = config.blockstore.model_copy(
        update={"s3": config.blockstore.s3.for_region(region)}
    )
    return config.model_copy(update={"blockstore": blockstore})


def _open_store(config: LakeMirrorConfig, uri: str, option: str, region: str | None) -> BlockStore:
    """Open the namespace ``uri`` the way ``lakemirror server`` opens repositories' namespaces.

    Raises:
        _UsageError: the URI is invalid, or names ``s3://`` without the ``s3`` extra.
        UnavailableError: an S3 bucket is missing or unreachable.
    """
    # a region names S3 settings: it matters to s3:// namespaces only
    regional = _for_region(config, region) if uri.startswith("s3://") else config
    store = open_namespace(namespace_resolver(regional, uri, option), uri, option)
    # S3 stores can prove the bucket usable up front (BlockStore itself has no such call)
    check = getattr(store, "check", None)
    if callable(check):
        check()
    return store


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT and SIGTERM while inside (main thread only; elsewhere a no-op)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _progress(elapsed: float, stats: ReplicationStats) -> str:
    return (
        f"{elapsed:.1f}s copied={stats.copied} pending={stats.pending} "
        f"dropped={stats.dropped} discovered={stats.discovered}"
        + (f" vanished={stats.vanished}" if stats.vanished else "")
        + (f" retries={stats.retries}" if stats.retries else "")
        + (f" failed={stats.failed}" if stats.failed else "")
        + (f" deleted={stats.deleted}" if stats.deleted else "")
        + (f" deletes_pending={stats.deletes_pending}" if stats.deletes_pending else "")
        + (f" resumed={stats.resumed}" if stats.resumed else "")
    )


def _banner(
    simulator: ReplicationSimulator,
    delay: tuple[float, float],
    drop: float,
    drop_for: tuple[float, float],
    small_first: bool,
) -> str:
    faults = [f"delay {delay[0]:g}-{delay[1]:g}s"]
    if drop:
        faults.append(f"drop {drop:g} for {drop_for[0]:g}-{drop_for[1]:g}s")
    if small_first:
        faults.append("small first")
    if simulator.replicate_deletes:
        faults.append("deletes replicated")
    return (
        f"replicating {simulator.source.namespace} -> {simulator.destination.namespace} "
        f"({', '.join(faults)}, poll {simulator.poll_interval:g}s)"
    )


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _build(args: argparse.Namespace) -> tuple[ReplicationSimulator, float | None, str]:
    """Return the simulator ``args`` describe, the duration to run it, and a line describing it.

    Raises:
        _UsageError: an argument is invalid.
        ConfigurationError: the LakeMirror configuration is invalid.
        UnavailableError: a namespace cannot be reached.
    """
    from mirror.config import load_config
    from mirror.simulate import ReplicationSimulator

    if not args.source:
        raise _UsageError("--from URI is required (local:///abs/path or s3://bucket/prefix)")
    if not args.destination:
        raise _UsageError("--to URI is required (local:///abs/path or s3://bucket/prefix)")
    delay = parse_interval("--delay", args.delay)
    drop = _probability("--drop", args.drop)
    drop_for = parse_interval("--drop-for", args.drop_for)
    poll = parse_seconds("--poll", args.poll, positive=True)
    duration = None if args.duration is None else parse_seconds("--duration", args.duration)
    seed = _seed(args.seed)
    config = load_config(args.config_file)
    source = _open_store(config, args.source, "--from", args.from_region)
    destination = _open_store(config, args.destination, "--to", args.to_region)
    if _nested(source.namespace, destination.namespace):
        raise _UsageError(
            f"--from {source.namespace!r} and --to {destination.namespace!r} overlap: "
            "copies would be replicated again"
        )
    simulator = ReplicationSimulator(
        source,
        destination,
        seed=seed,
        delay=delay,
        drop_probability=drop,
        drop_for=drop_for,
        small_first=args.small_first,
        poll_interval=poll,
        replicate_deletes=args.replicate_deletes,
        resume=args.resume,
    )
    return simulator, duration, _banner(simulator, delay, drop, drop_for, args.small_first)


def run_simulate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Replicate as ``args`` (from :func:`register_simulate_command`) say; return the exit code.

    Prints a progress line to ``out`` about once a second and a last one on exit. Stops with 0
    on SIGINT or SIGTERM (when called in the main thread) or after ``--duration``. An invalid
    argument or configuration prints one line to ``err`` and returns 2; an unreachable namespace
    returns 1.
    """
    from mirror.config import ConfigurationError
    from mirror.errors import UnavailableError

    stop = threading.Event()
    with _stop_on_signals(stop):
        try:
            simulator, duration, banner = _build(args)
        except (_UsageError, ConfigurationError) as exc:
            print(f"{_PROG}: {exc}", file=err, flush=True)
            return 2
        except UnavailableError as exc:
            print(f"{_PROG}: {exc}", file=err, flush=True)
            return 1
        print(banner, file=out, flush=True)
        started = time.monotonic()
        deadline = None if duration is None else started + duration
        next_report = started + _REPORT_EVERY
        last_error = ""
        while not stop.is_set():
            try:
                simulator.step()
                last_error = ""
            except UnavailableError as exc:
                # a flaky source is retried every poll; say so once, not every poll
                if str(exc) != last_error:
                    last_error = str(exc)
                    print(f"{_PROG}: {exc} (retrying)", file=err, flush=True)
            now = time.monotonic()
            if now >= next_report:
                print(_progress(now - started, simulator.stats), file=out, flush=True)
                next_report = now + _REPORT_EVERY
            if deadline is not None and now >= deadline:
                break
            wait = simulator.poll_interval
            stop.wait(wait if deadline is None else max(0.0, min(wait, deadline - now)))
    print(_progress(time.monotonic() - started, simulator.stats), file=out, flush=True)
    return 0


def _main() -> int:
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_simulate_command(parser.add_subparsers(dest="command", required=True))
    return run_simulate(parser.parse_args(), sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(_main())

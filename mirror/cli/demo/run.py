"""One run of ``lakemirror demo``: start the regions, write and watch, report, stop it all."""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import TextIO

import httpx

from mirror.cli.arguments import UsageError
from mirror.cli.demo.api import MIRROR_REPO, head
from mirror.cli.demo.errors import DemoError, DemoInterruptedError
from mirror.cli.demo.observer import Observer
from mirror.cli.demo.options import PROG, Options, parse_options
from mirror.cli.demo.regions import DemoRegions, Deployment
from mirror.cli.demo.report import Comparison, compare, print_report
from mirror.cli.demo.signals import ignore_interrupts, stop_on_signals
from mirror.cli.demo.view import View, short
from mirror.cli.demo.writer import Writer

__all__ = ["Demo", "run_demo"]

_CATCH_UP_DEADLINE = 15.0
_OBSERVE_EVERY = 0.25


class Demo:
    """One run: start everything, write and watch, check the mirror, stop everything."""

    def __init__(self, options: Options, out: TextIO, err: TextIO, stop: threading.Event) -> None:
        self.options = options
        self.out = out
        self.err = err
        self.stop = stop
        self.deployment = Deployment(options, out, err, stop)
        self.writer: Writer | None = None

    def say(self, text: str = "") -> None:
        """Print a line of the run's narration."""
        print(text, file=self.out, flush=True)

    def run(self) -> int:
        """Run the demo; return the exit code. Every child process is stopped on return."""
        logs = self.options.data_dir / "*.log"
        try:
            regions = self.deployment.start()
            result = self._write_and_watch(regions)
            self.say(f"logs: {logs}")
            return 0 if result.consistent else 1
        except DemoInterruptedError as exc:
            print(f"{PROG}: {exc}", file=self.err, flush=True)
            return 130
        except (DemoError, httpx.HTTPError) as exc:
            what = "HTTP request failed: " if isinstance(exc, httpx.HTTPError) else ""
            print(f"{PROG}: {what}{exc}", file=self.err, flush=True)
            if any(self.options.data_dir.glob("*.log")):
                print(f"{PROG}: logs: {logs}", file=self.err, flush=True)
            return 1
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=self.err, flush=True)
            return 130
        finally:
            self._shut_down()

    def _write_and_watch(self, regions: DemoRegions) -> Comparison:
        """Commit and show progress until the end; let the mirror catch up; compare."""
        opts = self.options
        simulator = regions.simulator
        children = self.deployment.children
        writer = self.writer = Writer(
            regions.source,
            opts.commit_interval,
            # the demo's writer, seeded on purpose
            random.Random(opts.seed),  # nosec B311
        )
        observer = Observer(regions.replicant, regions.initial_head)
        view = View(self.out, opts.live)
        until = "until Ctrl-C" if opts.duration is None else f"for {opts.duration:g} s"
        self.say(f"writing a commit every {opts.commit_interval:g} s {until} (Ctrl-C stops)")
        self.say()
        started = time.monotonic()
        writer.start()
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            if opts.duration is not None and elapsed >= opts.duration:
                break
            children.check_alive()
            view.show(observer.observe(elapsed, writer, simulator.stats, sample=True))
            wait = _OBSERVE_EVERY
            if opts.duration is not None:
                wait = max(0.0, min(wait, opts.duration - elapsed))
            self.stop.wait(wait)
        writer.stop()
        written_for = time.monotonic() - started
        target = writer.head or regions.initial_head
        patience = _CATCH_UP_DEADLINE + 2 * opts.delay[1]
        view.detach()
        self.say()
        self.say(
            f"stopped writing; waiting up to {patience:g} s for the mirror to reach {short(target)}"
        )
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and head(regions.mirror, MIRROR_REPO) != target:
            view.show(
                observer.observe(time.monotonic() - started, writer, simulator.stats, sample=False)
            )
            time.sleep(_OBSERVE_EVERY)  # pacing of a deadline-bounded wait
        observer.observe(time.monotonic() - started, writer, simulator.stats, sample=False)
        result = compare(regions.source, regions.mirror, target)
        print_report(self.out, result, writer, observer, written_for)
        return result

    def _shut_down(self) -> None:
        """Stop the writer, replication, and every child process, whatever happened."""
        ignore_interrupts()
        if self.writer is not None:
            self.writer.stop()
        self.deployment.shut_down()


def run_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the demo ``args`` (from :func:`register_demo_command`) describe; return the exit code.

    Returns 0 when the mirror equals the source at the mirrored commit, 1 when it does not or
    a step fails (one line on ``err`` naming it, and where the logs are), 2 on a bad argument.
    The servers and the replicant run as child processes and are always stopped before return.
    """
    try:
        options = parse_options(args, out)
    except UsageError as exc:
        print(f"{PROG}: {exc}", file=err, flush=True)
        return 2
    stop = threading.Event()
    with stop_on_signals(stop):
        return Demo(options, out, err, stop).run()

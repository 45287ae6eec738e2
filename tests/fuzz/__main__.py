"""The long run: ``python -m tests.fuzz --seconds 600`` (see :mod:`tests.fuzz`)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.harness import TARGETS

__all__ = ["Run", "main"]


@dataclass
class Run:
    """What fuzzing one target gave."""

    target: str
    seconds: float = 0.0
    inputs: int = 0
    corpus: int = 0
    findings: list[str] = field(default_factory=list)


_EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
_DONE = re.compile(r"Done (\d+) runs in")
_CORPUS = re.compile(r"#\d+\s+\w+\s+cov: \d+ ft: \d+ corp: (\d+)/")
_UNCAUGHT = re.compile(r"=== Uncaught Python exception: ===\n([^\n]*)")
_FRAME = re.compile(r'File "[^"]*?/((?:mirror|tests)/[^"]+)", line (\d+), in (\S+)')
_LIBFUZZER = re.compile(r"ERROR: libFuzzer: (timeout|out-of-memory|deadly signal)[^\n]*")


def _finding(text: str) -> str:
    """Return a one-line summary of the finding a failed run's output shows."""
    uncaught = _UNCAUGHT.search(text)
    if uncaught is not None:
        frames = [f for f in _FRAME.findall(text) if f[0].startswith("mirror/")]
        where = f" at {frames[-1][0]}:{frames[-1][1]} ({frames[-1][2]})" if frames else ""
        return f"{uncaught.group(1)[:160]}{where}"
    other = _LIBFUZZER.search(text)
    if other is not None:
        return other.group(0)
    tail = text.strip().splitlines()[-1:] or ["no output"]
    return tail[0]


def _atheris(target: str, seconds: int, work: Path, log: Path) -> Run:
    """Fuzz ``target`` with atheris for ``seconds``, restarting after a finding."""
    run = Run(target)
    deadline = time.monotonic() + seconds
    attempt = 0
    while (left := int(deadline - time.monotonic())) > 2:
        attempt += 1
        started = time.monotonic()
        out = subprocess.run(
            [sys.executable, "-m", "tests.fuzz.atheris_run", target, str(work), str(left)],
            capture_output=True,
            text=True,
            errors="replace",
            check=False,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        run.seconds += time.monotonic() - started
        text = out.stdout + out.stderr
        (log / f"{target}-{attempt}.log").write_text(text)
        counts = _EXECUTED.findall(text) or _DONE.findall(text)
        run.inputs += int(counts[-1]) if counts else 0
        corpus = _CORPUS.findall(text)
        run.corpus = max(run.corpus, int(corpus[-1]) if corpus else 0)
        if out.returncode == 0:
            break
        finding = _finding(text)
        if finding not in run.findings:
            run.findings.append(finding)
    return run


def _report(runs: list[Run], engine: str, log: Path | None) -> str:
    where = f"; logs, grown corpora and crashing inputs under {log}" if log else ""
    lines = [
        f"Engine: {engine}{where}",
        "",
        "| target | seconds | inputs executed | corpus (coverage-increasing inputs) | findings |",
        "|---|---:|---:|---:|---|",
    ]
    for run in runs:
        found = "; ".join(run.findings) or "none"
        corpus = run.corpus if engine == "atheris" else "n/a"
        lines.append(f"| {run.target} | {run.seconds:.0f} | {run.inputs:,} | {corpus} | {found} |")
    total_s = sum(r.seconds for r in runs)
    total_n = sum(r.inputs for r in runs)
    lines.append(f"| **total** | {total_s:.0f} | {total_n:,} | | |")
    return "\n".join(lines)


def _hypothesis(target: str, seconds: int) -> Run:
    """Fuzz ``target`` with Hypothesis (mutated seeds and random bytes) for ``seconds``."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.fuzz.harness import load
    from tests.fuzz.strategies import fuzz_settings, mutated

    run = Run(target)
    check = load(target).check
    started = time.monotonic()

    @settings(fuzz_settings(200), derandomize=False)
    @given(st.one_of(mutated(target), st.binary(max_size=1024)))
    def batch(data: bytes) -> None:
        run.inputs += 1
        check(data)

    while time.monotonic() - started < seconds:
        try:
            batch()
        except Exception as exc:  # a finding: record it and go on
            run.findings.append(f"{type(exc).__name__}: {str(exc)[:200]}")
    run.seconds = time.monotonic() - started
    return run


def main(argv: list[str] | None = None) -> int:
    """Fuzz every target (or those named) for a share of ``--seconds``; print the table."""
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seconds", type=int, default=600, help="total time, shared by targets")
    parser.add_argument("--targets", default=",".join(TARGETS), help="comma-separated targets")
    parser.add_argument("--engine", choices=("atheris", "hypothesis"), default=None)
    parser.add_argument("--work", type=Path, default=None, help="where corpora and logs go")
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = sorted(set(targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets {unknown}: choose among {', '.join(TARGETS)}")
    engine = args.engine
    if engine is None:
        try:
            import atheris  # noqa: F401
        except ImportError:
            engine = "hypothesis"
        else:
            engine = "atheris"
    work = args.work
    if engine == "atheris" and work is None:
        work = Path(tempfile.mkdtemp(prefix="lakemirror-fuzz-"))
    share = max(args.seconds // len(targets), 5)
    runs = []
    for target in targets:
        print(f"fuzzing {target} for {share} s with {engine} ...", flush=True)
        if engine == "atheris":
            assert work is not None
            (work / "logs").mkdir(parents=True, exist_ok=True)
            run = _atheris(target, share, work / target, work / "logs")
        else:
            run = _hypothesis(target, share)
        print(f"  {run.inputs:,} inputs, findings: {run.findings or 'none'}", flush=True)
        runs.append(run)
    print()
    print(_report(runs, engine, work))
    return 1 if any(r.findings for r in runs) else 0


if __name__ == "__main__":
    raise SystemExit(main())

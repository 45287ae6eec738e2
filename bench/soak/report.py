"""The soak's tables: per window, per process, per kind of request, the faults, and the targets.

Targets (each missed one makes the exit code 1):

- acknowledged writes lost: 0;
- mirror safety violations: 0 (the safety checker's, and mirror reads that answered other bytes
  than acknowledged, or 404, for a commit the mirror's ``main`` had reached);
- growth after warm-up: the resident set and the open descriptors of every LakeMirror process
  (servers, workers, replicants, replication) in the last window within 10 % of those in its
  first whole window after the first (descriptors: or within 2), as :mod:`bench.soak.growth`
  judges them; the stores (dynalite, moto) hold the data and grow with
  it, so they are shown, not judged;
- 5xx other than deliberate 503s (a 503 with ``Retry-After``): 0;
- the mirror reaches the source's final state after the load stops;
- the load's own code raised nothing.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from bench.soak.faults import Fault
from bench.soak.final import Verdict
from bench.soak.growth import Growth, growth
from bench.soak.load import ReadProblem
from bench.soak.meter import Request, percentile
from bench.soak.samples import KVCount, ProcessSample
from bench.tables import markdown
from tests.e2e.regions import Violation

__all__ = ["Run", "S3Count", "Target", "process_growth", "render", "targets"]


@dataclass
class Run:
    """Everything a soak measured."""

    started: float
    ended: float
    window: float
    requests: list[Request]
    lags: list[tuple[float, float]]
    processes: list[ProcessSample]
    kv: list[KVCount]
    faults: list[Fault]
    verdict: Verdict
    violations: list[Violation]
    read_problems: list[ReadProblem]
    crashes: list[str]
    heads_checked: int = 0
    objects_checked: int = 0
    mirror_reads: int = 0
    failures: list[tuple[Request, str]] = field(default_factory=list)
    """Failed requests with the first characters of their answer."""
    loads: list[tuple[float, float]] = field(default_factory=list)
    """(when, the machine's 1-minute load average) at the end of each window."""
    final_s: float = 0.0
    """Seconds the final checks took."""
    s3: list[S3Count] = field(default_factory=list)
    """Each S3 server's request counts when the load started and at the end of each window."""
    header: list[str] = field(default_factory=list)

    def windows(self) -> int:
        """Return how many windows the run spans (the last may be partial)."""
        # a run overshoots its end by the time its threads take to stop: no window of that
        return max(1, math.ceil((self.ended - self.started) / self.window - 0.05))

    def window_of(self, at: float) -> int:
        """Return the window of moment ``at`` (clamped to the run)."""
        return min(self.windows() - 1, max(0, int((at - self.started) // self.window)))

    def label(self, index: int) -> str:
        """Return ``"m:ss-m:ss"`` of window ``index``."""
        begin = index * self.window
        end = min((index + 1) * self.window, self.ended - self.started)
        return f"{_clock(begin)}-{_clock(end)}"


@dataclass(frozen=True)
class S3Count:
    """A region's S3 server's requests since it started: ``{op: {"count", "seconds"}}``."""

    at: float
    region: str
    ops: dict[str, dict[str, float]]

    @property
    def total(self) -> int:
        """Return the requests of every operation."""
        return int(sum(v["count"] for v in self.ops.values()))


@dataclass(frozen=True)
class Target:
    """One target of the soak and whether the run met it."""

    name: str
    measured: str
    goal: str
    met: bool


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _status_name(request: Request) -> str:
    if request.status == 0:
        return "no answer"
    if request.status == 503 and not request.retry_after:
        return "503 without Retry-After"
    return str(request.status)


def _errors(requests: Sequence[Request]) -> str:
    counts = Counter(_status_name(r) for r in requests if not r.ok)
    return ", ".join(f"{name}: {n}" for name, n in sorted(counts.items())) or "-"


def _latency(requests: Sequence[Request], q: float) -> float | None:
    return percentile([r.seconds for r in requests if r.status != 0], q)


def window_table(run: Run) -> str:
    """Return the per-window table: requests, errors, latency, mirror lag, KV items, faults."""
    by_window: dict[int, list[Request]] = defaultdict(list)
    for request in run.requests:
        by_window[run.window_of(request.at)].append(request)
    lags: dict[int, list[float]] = defaultdict(list)
    for at, seconds in run.lags:
        lags[run.window_of(at)].append(seconds)
    kv: dict[tuple[int, str], KVCount] = {}
    for count in run.kv:
        kv[(run.window_of(count.at), count.region)] = count
    faults: dict[int, list[str]] = defaultdict(list)
    for fault in run.faults:
        faults[run.window_of(fault.at)].append(fault.target)
    loads: dict[int, float] = {}
    for at, load in run.loads:
        loads[run.window_of(at)] = load
    s3 = _s3_per_window(run)
    rows = []
    for w in range(run.windows()):
        requests = by_window[w]
        lag = lags[w]
        p50, p99 = percentile(lag, 50), percentile(lag, 99)
        items = [kv.get((w, region)) for region in "ab"]
        rows.append(
            [
                run.label(w),
                f"{len(requests):,}",
                _errors(requests),
                _ms(_latency(requests, 50)),
                _ms(_latency(requests, 99)),
                "-" if p50 is None or p99 is None else f"{p50:.1f} / {p99:.1f} ({len(lag)})",
                " / ".join("-" if c is None else f"{c.total:,}" for c in items),
                " / ".join(f"{s3[(w, r)]:,}" if (w, r) in s3 else "-" for r in "ab"),
                ", ".join(faults[w]) or "-",
                f"{loads[w]:.1f}" if w in loads else "-",
            ]
        )
    return markdown(
        [
            "window (m:ss)",
            "requests",
            "errors by status",
            "p50 ms",
            "p99 ms",
            "mirror lag p50 / p99 s (commits)",
            "KV items a / b",
            "S3 requests a / b",
            "faults",
            "load avg",
        ],
        rows,
    )


def _s3_per_window(run: Run) -> dict[tuple[int, str], int]:
    """Return the requests each region's S3 server answered in each window."""
    out: dict[tuple[int, str], int] = {}
    for region in "ab":
        counts = sorted((c for c in run.s3 if c.region == region), key=lambda c: c.at)
        for before, after in itertools.pairwise(counts):
            key = (run.window_of(after.at), region)
            out[key] = out.get(key, 0) + after.total - before.total
    return out


def s3_table(run: Run) -> str:
    """Return each S3 server's requests by operation over the load, and its time answering."""
    first: dict[str, S3Count] = {}
    last: dict[str, S3Count] = {}
    for count in sorted(run.s3, key=lambda c: c.at):
        first.setdefault(count.region, count)
        last[count.region] = count
    ops = sorted({op for c in last.values() for op in c.ops})
    rows = []
    for op in ops:
        cells = [op]
        for region in "ab":
            if region not in last:
                cells += ["-", "-"]
                continue
            end = last[region].ops.get(op, {})
            start = first[region].ops.get(op, {})
            count = end.get("count", 0) - start.get("count", 0)
            seconds = end.get("seconds", 0) - start.get("seconds", 0)
            cells += [f"{count:,.0f}", f"{seconds:.0f}"]
        rows.append(cells)
    columns = ["S3 operation", "a requests", "a server s", "b requests", "b server s"]
    return markdown(columns, rows)


def _last_per_window(run: Run) -> dict[str, dict[int, ProcessSample]]:
    out: dict[str, dict[int, ProcessSample]] = defaultdict(dict)
    for sample in run.processes:
        out[sample.label][run.window_of(sample.at)] = sample
    return out


def process_growth(run: Run) -> list[Growth]:
    """Return the growth of every process after its warm-up (:mod:`bench.soak.growth`)."""
    return growth(run.processes, run.started, run.window, run.windows())


def process_table(run: Run) -> str:
    """Return RSS and own descriptors of every process at the end of each window, and growth."""
    per = _last_per_window(run)
    rows = []
    for change in process_growth(run):
        cells = []
        previous: ProcessSample | None = None
        for w in range(run.windows()):
            sample = per[change.label].get(w)
            if sample is None:
                cells.append("-")
                continue
            mark = "*" if previous is not None and sample.pid != previous.pid else ""
            role = {"active": " A", "standby": " S"}.get(sample.role, "")
            previous = sample
            cells.append(f"{sample.rss_mb:.0f} / {sample.own_fds}{mark}{role}")
        if not change.measured:
            text = change.note or "-"
        else:
            since = run.label(change.base_window or 0)
            text = f"{change.rss * 100:+.1f} % / {change.fds:+g} from {since}"
            if change.note:
                text += f" ({change.note})"
            if not change.judged:
                text += ", not judged"
            elif not change.within:
                text += ": OVER"
        rows.append([change.label, *cells, text])
    columns = ["process", *(run.label(w) for w in range(run.windows())), "growth after warm-up"]
    return markdown(columns, rows)


def cpu_table(run: Run) -> str:
    """Return the CPU each process used in each window, as a share of one core."""
    used: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    previous: dict[str, ProcessSample] = {}
    for sample in sorted(run.processes, key=lambda s: s.at):
        before = previous.get(sample.label)
        if before is not None and before.pid == sample.pid:
            used[sample.label][run.window_of(sample.at)] += sample.cpu_s - before.cpu_s
        previous[sample.label] = sample
    rows = []
    for label in dict.fromkeys(s.label for s in run.processes):
        cells = []
        for w in range(run.windows()):
            begin = w * run.window
            span = min(run.window, run.ended - run.started - begin)
            cells.append(f"{used[label][w] / span * 100:.0f} %" if span > 0 else "-")
        rows.append([label, *cells, f"{sum(used[label].values()):.0f}"])
    windows = [run.label(w) for w in range(run.windows())]
    return markdown(["CPU (100 % = one core)", *windows, "CPU s"], rows)


def kv_table(run: Run) -> str:
    """Return each region's KV items by kind of key at the end of each window."""
    per: dict[tuple[str, str], dict[int, int]] = defaultdict(dict)
    for count in run.kv:
        for kind, n in count.kinds.items():
            per[(count.region, kind)][run.window_of(count.at)] = n
    rows = []
    for (region, kind), windows in sorted(per.items()):
        cells = [f"{windows[w]:,}" if w in windows else "-" for w in range(run.windows())]
        rows.append([f"{region}: {kind}", *cells])
    return markdown(["KV items by kind", *(run.label(w) for w in range(run.windows()))], rows)


def kinds_table(run: Run) -> str:
    """Return the whole run's requests by kind: count, errors by status, p50, p99."""
    by_kind: dict[str, list[Request]] = defaultdict(list)
    for request in run.requests:
        by_kind[request.kind].append(request)
    rows = [
        [
            kind,
            f"{len(requests):,}",
            _errors(requests),
            _ms(_latency(requests, 50)),
            _ms(_latency(requests, 99)),
        ]
        for kind, requests in sorted(by_kind.items())
    ]
    return markdown(["request kind", "requests", "errors by status", "p50 ms", "p99 ms"], rows)


def fault_table(run: Run) -> str:
    """Return the faults: when, what, and how long until it answered again."""
    rows = [
        [
            _clock(f.at - run.started),
            f.target,
            str(f.pid),
            "never" if f.recovered_s is None else f"{f.recovered_s:.1f}",
        ]
        for f in run.faults
    ]
    return markdown(["at (m:ss)", "killed (SIGKILL)", "pid", "answering again after s"], rows)


def targets(run: Run) -> list[Target]:
    """Return the targets and whether the run met each."""
    verdict = run.verdict
    lost = len(verdict.lost)
    unsafe = len(_distinct(run.violations)) + len(run.read_problems)
    judged = [g for g in process_growth(run) if g.judged]
    if judged:
        worst_rss = max(judged, key=lambda g: g.rss)
        worst_fds = max(judged, key=lambda g: g.fds)
        growth_text = (
            f"worst RSS {worst_rss.rss * 100:+.1f} % ({worst_rss.label}), "
            f"worst own fds {worst_fds.fds:+g} ({worst_fds.label}); {len(judged)} judged"
        )
    else:
        growth_text = "not measured (no process lived through two windows)"
    grown_ok = all(g.within for g in judged)
    failures = [r for r in run.requests if r.failure_5xx]
    deliberate = sum(1 for r in run.requests if r.deliberate_503)
    caught_up = verdict.catch_up_s is not None
    return [
        Target(
            "acknowledged writes lost",
            f"{lost} (of {verdict.acked_commits:,} commits, {verdict.acked_objects:,} objects, "
            f"{verdict.staged_objects} uploads never committed)",
            "0",
            lost == 0,
        ),
        Target(
            "mirror safety violations",
            f"{unsafe} ({run.heads_checked:,} mirror heads checked whole, "
            f"{run.objects_checked:,} objects read; {run.mirror_reads:,} reads by commit ID)",
            "0",
            unsafe == 0,
        ),
        Target("growth after warm-up (LakeMirror processes)", growth_text, "within 10 %", grown_ok),
        Target(
            "5xx other than deliberate 503s",
            f"{len(failures)} ({deliberate} deliberate 503s)",
            "0",
            not failures,
        ),
        Target(
            "mirror reaches the source's final state",
            f"after {verdict.catch_up_s:.1f} s"
            if caught_up
            else "no: " + "; ".join(verdict.behind[:3]),
            "yes",
            caught_up,
        ),
        Target("errors of the load's own code", str(len(run.crashes)), "0", not run.crashes),
    ]


def _distinct(violations: Sequence[Violation]) -> list[Violation]:
    seen: dict[tuple[str, str, str], Violation] = {}
    for v in violations:
        seen.setdefault((v.commit, v.path, v.problem), v)
    return list(seen.values())


def render(run: Run) -> str:
    """Return the whole report."""
    verdict = run.verdict
    found = targets(run)
    lines = [*run.header, "", "## Per window", "", window_table(run), ""]
    lines += [
        "## Processes: RSS MB / own open fds at the end of each window; growth between the "
        "medians of the windows",
        "",
        "(own fds: without its clients' connections; * restarted; replicas: A holds the lease, "
        "S stands by)",
        "",
    ]
    lines += [process_table(run), "", cpu_table(run), "", "## KV", "", kv_table(run), ""]
    lines += ["## Requests by kind (whole run)", "", kinds_table(run), ""]
    lines += ["## S3 servers (whole run)", "", s3_table(run), ""]
    lines += ["## Faults", "", fault_table(run) if run.faults else "none", ""]
    lines += [
        "## End of run",
        "",
        f"source branches at the end: {verdict.source_branches}; mirror history: "
        f"{verdict.mirror_history}; final checks took {run.final_s:.0f} s",
    ]
    for problem in verdict.lost[:20]:
        lines.append(f"LOST: {problem}")
    for violation in _distinct(run.violations)[:20]:
        lines.append(f"VIOLATION: {violation.commit[:12]} {violation.path}: {violation.problem}")
    for read in run.read_problems[:20]:
        lines.append(f"MIRROR READ: {read.via} {read.commit[:12]} {read.path}: {read.problem}")
    failures = Counter(
        (r.kind, r.status, detail[:160]) for r, detail in run.failures if r.failure_5xx
    )
    for (kind, status, detail), n in failures.most_common(10):
        lines.append(f"5xx: {kind} {status} x{n}: {detail}")
    for crash in run.crashes[:5]:
        lines.append(f"LOAD ERROR: {crash.strip().splitlines()[-1]}")
    lines += ["", "## Targets", ""]
    lines.append(
        markdown(
            ["target", "measured", "goal", "met"],
            [[t.name, t.measured, t.goal, "yes" if t.met else "NO"] for t in found],
        )
    )
    return "\n".join(lines)

"""The demo's consistency report: the mirror against the source, byte for byte, and totals."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

import httpx

from mirror.cli.demo.api import MIRROR_REPO, SOURCE_REPO, head, history, listing, read_object
from mirror.cli.demo.view import plural, short

if TYPE_CHECKING:
    from mirror.cli.demo.observer import Observer
    from mirror.cli.demo.writer import Writer

__all__ = ["Comparison", "compare", "percentile", "print_report"]


@dataclass(frozen=True, slots=True)
class Comparison:
    """The mirror against the source at the mirrored commit."""

    commit: str | None
    source_head: str | None
    objects: int = 0
    equal_bytes: int = 0
    listing_equal: bool = False
    history: int = 0
    history_equal: bool = False
    problems: tuple[str, ...] = ()

    @property
    def consistent(self) -> bool:
        """Return whether the mirror equals the source at the mirrored commit."""
        return (
            self.commit is not None
            and self.listing_equal
            and self.history_equal
            and self.equal_bytes == self.objects
            and not self.problems
        )


def compare(source: httpx.Client, mirror: httpx.Client, source_head: str | None) -> Comparison:
    """Compare the mirror branch's head commit with the same commit in the source region."""
    commit = head(mirror, MIRROR_REPO)
    if commit is None:
        return Comparison(None, source_head, problems=("the mirror branch does not exist",))
    problems: list[str] = []
    theirs = listing(source, SOURCE_REPO, commit)
    ours = listing(mirror, MIRROR_REPO, commit)
    listing_equal = theirs == ours
    if not listing_equal:
        extra = sorted(set(ours) - set(theirs))[:5]
        lacking = sorted(set(theirs) - set(ours))[:5]
        changed = sorted(p for p in set(ours) & set(theirs) if ours[p] != theirs[p])[:5]
        problems.append(
            f"listings differ: only on the mirror {extra}, only on the source {lacking}, "
            f"different size or checksum {changed}"
        )
    equal = 0
    for path in sorted(ours):
        mine = read_object(mirror, MIRROR_REPO, commit, path)
        origin = read_object(source, SOURCE_REPO, commit, path)
        if isinstance(mine, str):
            problems.append(f"{path}: mirror read failed: {mine}")
        elif isinstance(origin, str):
            problems.append(f"{path}: source read failed: {origin}")
        elif mine != origin:
            problems.append(f"{path}: {len(mine)} bytes on the mirror differ from the source's")
        else:
            equal += 1
    their_log = history(source, SOURCE_REPO, commit)
    our_log = history(mirror, MIRROR_REPO, commit)
    if their_log != our_log:
        problems.append(
            f"histories differ: {len(our_log)} commits on the mirror, {len(their_log)} on the "
            "source"
        )
    return Comparison(
        commit=commit,
        source_head=source_head,
        objects=len(ours),
        equal_bytes=equal,
        listing_equal=listing_equal,
        history=len(our_log),
        history_equal=their_log == our_log,
        problems=tuple(problems),
    )


def percentile(values: list[float], q: float) -> float:
    """Return the ``q`` quantile of ``values`` (0 for none)."""
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def print_report(
    out: TextIO,
    result: Comparison,
    writer: Writer,
    observer: Observer,
    written_for: float,
) -> None:
    """Print the consistency report and the run's totals to ``out``."""

    def say(text: str = "") -> None:
        print(text, file=out)

    s = observer.last
    say()
    say("consistency report")
    if result.commit is None:
        say("  mirrored commit   none")
    else:
        behind = (
            "the source head: the mirror caught up"
            if result.commit == result.source_head
            else f"the source head is {short(result.source_head)}: the mirror is behind"
        )
        say(f"  mirrored commit   {result.commit}  ({behind})")
        say(
            f"  history           {result.history} commits, "
            + ("the same IDs in both regions" if result.history_equal else "DIFFERENT")
        )
        say(
            f"  listing           {result.objects} objects at that commit, "
            + (
                "the same paths, sizes and checksums in both regions"
                if result.listing_equal
                else "DIFFERENT"
            )
        )
        say(
            f"  contents          {result.equal_bytes} of {result.objects} objects equal byte "
            "for byte (mirror read from region b, source from region a)"
        )
    for problem in result.problems[:20]:
        say(f"  problem           {problem}")
    if len(result.problems) > 20:
        say(f"  problem           ... and {len(result.problems) - 20} more")
    if result.consistent:
        say(
            f"  result            CONSISTENT: the mirror matches the source byte for byte at "
            f"the mirrored commit {short(result.commit)}"
        )
    else:
        say("  result            INCONSISTENT")
    say("totals")
    say(
        f"  commits written   {len(writer.commits)} in {written_for:.1f} s "
        f"({writer.objects_written} objects uploaded, {writer.objects_deleted} deleted"
        + (f", {writer.errors} commits failed" if writer.errors else "")
        + ")"
    )
    say(f"  head advances     {s.advances}")
    say(f"  commits skipped   {s.skipped}")
    say(
        f"  objects validated {s.validated} "
        f"(and {s.missing_seen} checks of objects not yet arrived)"
    )
    ops = ", ".join(f"{op} {n}" for op, n in sorted(s.requests_by_op.items()))
    say(f"  S3 requests       {s.requests}" + (f" ({ops})" if ops else ""))
    lags = observer.lag_seconds
    say(
        f"  lag               p50 {percentile(lags, 0.5):.1f} s, max "
        f"{max(lags, default=0.0):.1f} s; at most {plural(observer.lag_commits_max, 'commit')} "
        "behind"
    )
    say(f"  replication       {s.copied} objects copied, {s.dropped} deliveries dropped")

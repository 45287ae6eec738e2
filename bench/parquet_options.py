"""What writing and reading range and metarange files costs, by the options they are written with.

Run ``python -m bench.parquet_options`` (options: ``--rounds``, ``--files``). A commit writes one
range file per range it touches and one metarange file; a mirror and a cold commit read them.
This compares, on the same tables and in alternating rounds, the options files are written with
now (:func:`mirror.core.columnar.to_parquet`: a codec and an encoding chosen per column) with
the single set they were written with before (zstd on every column, the dictionary columns
dictionary-encoded, every other column plain). Tables:

- **range, distinct digests**: 512 records of ``bench.core``'s repository layout (keys in date
  partitions, addresses, an MD5 checksum and an identity of its own per record);
- **range, repeated digests**: 480 records whose objects share one body (what ``bench.api``'s
  commits write: one checksum and one identity for all);
- **range, 1 record** and **metarange, 4 ranges**: the fixed cost of a file;
- **metarange, 2,037 ranges**: the tree of a 1,000,000-object repository.

Each cell is the median over ``--rounds`` rounds of the CPU time per file; bytes are the file's.
Reading is :class:`~mirror.core.columnar.RangeData` for ranges (what a commit reads) and
:func:`~mirror.core.committed.decode_metarange` for metaranges.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench.core import Layout
from bench.machine import describe, run_footer
from mirror.core.columnar import RangeData, records_table, to_parquet
from mirror.core.committed import RangeInfo, _metarange_table, decode_metarange
from mirror.core.ids import RangeID
from mirror.core.model import Entry

__all__ = ["main"]

_PREVIOUS: dict[str, Any] = {
    "compression": "zstd",
    "use_dictionary": [
        "address_type",
        "content_type",
        "metadata.key_value.key",
        "metadata.key_value.value",
    ],
    "write_statistics": False,
}


def _previous(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **_PREVIOUS)
    return buf.getvalue()


def _range(records: list[tuple[str, Entry]]) -> pa.Table:
    return records_table(records, [e.identity for _, e in records])


def _layout_range(n: int) -> pa.Table:
    records = [(k, e) for k, e in itertools.islice(Layout(1_000_000).records(), n) if e is not None]
    return _range(records)


def _same_body_range(n: int) -> pa.Table:
    body = hashlib.md5(b"z" * 1024).hexdigest()
    records = [
        (
            f"commit/{i:07d}.bin",
            Entry(
                address=f"data/1pvk7mjd9prmc34q/{i:010d}prmc34q0q4jaffg9",
                size=1024,
                checksum=body,
                mtime=1_795_893_397,
                content_type="application/json",
            ),
        )
        for i in range(n)
    ]
    return _range(records)


def _metarange(n: int) -> pa.Table:
    layout = Layout(1_000_000)
    step = 1_000_000 // n
    ranges = [
        RangeInfo(
            RangeID(hashlib.sha256(str(i).encode()).hexdigest()),
            layout.key_at(i * step),
            layout.key_at(i * step + step - 1),
            step,
            step * 160,
        )
        for i in range(n)
    ]
    return _metarange_table(ranges)


def _tables() -> list[tuple[str, pa.Table, Callable[[bytes], object]]]:
    def read_range(data: bytes) -> object:
        return RangeData.from_parquet(data)

    return [
        ("range, distinct digests (512)", _layout_range(512), read_range),
        ("range, repeated digests (480)", _same_body_range(480), read_range),
        ("range, 1 record", _same_body_range(1), read_range),
        ("metarange, 4 ranges", _metarange(4), decode_metarange),
        ("metarange, 2,037 ranges", _metarange(2_037), decode_metarange),
    ]


def _cpu_ms(action: Callable[[], object], repeat: int) -> float:
    started = time.process_time()
    for _ in range(repeat):
        action()
    return (time.process_time() - started) / repeat * 1000.0


def measure(rounds: int, files: int) -> list[dict[str, Any]]:
    """Return, per table, the median write and read CPU (ms a file) and bytes of both options."""
    rows = []
    for name, table, read in _tables():
        files_of = {"previous": _previous(table), "current": to_parquet(table)}
        writers: dict[str, Callable[[], object]] = {
            "previous": lambda t=table: _previous(t),
            "current": lambda t=table: to_parquet(t),
        }
        write: dict[str, list[float]] = {k: [] for k in writers}
        reads: dict[str, list[float]] = {k: [] for k in writers}
        for r in range(rounds):
            order = list(writers) if r % 2 == 0 else list(writers)[::-1]
            for option in order:
                write[option].append(_cpu_ms(writers[option], files))
                data = files_of[option]
                reads[option].append(_cpu_ms(lambda d=data, r=read: r(d), files))
        rows.append(
            {
                "table": name,
                "rows": table.num_rows,
                **{f"write_{k}": statistics.median(v) for k, v in write.items()},
                **{f"read_{k}": statistics.median(v) for k, v in reads.items()},
                **{f"bytes_{k}": len(v) for k, v in files_of.items()},
            }
        )
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """Return the results as a Markdown table, previous options beside current ones."""
    head = (
        "| table | write ms before | write ms now | ratio | read ms before | read ms now "
        "| bytes before | bytes now |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['table']} | {r['write_previous']:.3f} | {r['write_current']:.3f} "
            f"| {r['write_current'] / r['write_previous']:.2f}x | {r['read_previous']:.3f} "
            f"| {r['read_current']:.3f} | {r['bytes_previous']:,} | {r['bytes_current']:,} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="alternating rounds (median)")
    parser.add_argument("--files", type=int, default=40, help="files written/read per round")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.files < 1:
        parser.error("--rounds and --files must be at least 1")
    started, load = time.perf_counter(), os.getloadavg()[0]
    print(describe())
    print(format_table(measure(args.rounds, args.files)))
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The object page's previews and byte relay, in process: kinds, bounds, truncation, Parquet.

Each preview must read only what it needs (the bytes handed to it, or the ranges a Parquet file's
footer names) and say what it left out. The relay hands an API answer on chunk by chunk and
stops the API's work when the browser goes away.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirror.ui.api import ApiClient, ApiError, SignedOut
from mirror.ui.preview import Kind, build_preview, image_type, kind_of
from mirror.ui.preview import parquet as parquet_module
from mirror.ui.preview.tables import (
    MAX_ROWS,
    delimited_table,
    json_lines_table,
    json_table,
)
from mirror.ui.preview.text import decode_text
from mirror.ui.relay import open_relay
from mirror.ui.views.objects import breadcrumbs, human_size, parent_prefix
from mirror.ui.views.upload import destination

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# kinds


@pytest.mark.parametrize(
    ("path", "content_type", "kind"),
    [
        ("a.png", "image/png", Kind.IMAGE),
        ("a.bin", "image/webp", Kind.IMAGE),
        ("photo.JPG", "application/octet-stream", Kind.IMAGE),
        ("logo.svg", "image/svg+xml", Kind.TEXT),
        ("logo.svg", "application/octet-stream", Kind.TEXT),
        ("page.html", "text/html; charset=utf-8", Kind.TEXT),
        ("x.js", "application/javascript", Kind.TEXT),
        ("t.parquet", "application/octet-stream", Kind.PARQUET),
        ("t.data", "application/vnd.apache.parquet", Kind.PARQUET),
        ("t.csv", "text/csv", Kind.CSV),
        ("t.csv", "text/plain", Kind.CSV),
        ("t.tsv", "", Kind.TSV),
        ("t.json", "application/json", Kind.JSON),
        ("t.geojson", "application/geo+json", Kind.JSON),
        ("t.ndjson", "application/octet-stream", Kind.JSON_LINES),
        ("README.md", "text/markdown", Kind.TEXT),
        ("conf.yaml", "application/octet-stream", Kind.TEXT),
        ("Makefile", "application/octet-stream", Kind.TEXT),
        ("a.pdf", "application/pdf", Kind.NONE),
        ("a.png", "text/html", Kind.TEXT),
        ("blob", "application/octet-stream", Kind.NONE),
    ],
)
def test_the_kind_comes_from_the_type_then_the_extension(
    path: str, content_type: str, kind: Kind
) -> None:
    assert kind_of(path, content_type) is kind


def test_only_raster_images_are_served_as_images() -> None:
    assert image_type("a.png", "image/png") == "image/png"
    assert image_type("a.png", "") == "image/png"
    assert image_type("a.jpeg", "binary/octet-stream") == "image/jpeg"
    for path, content_type in (
        ("a.svg", "image/svg+xml"),
        ("a.png", "text/html"),
        ("a.svg", "application/octet-stream"),
        ("a.png", "image/svg+xml"),
        ("a.html", "application/octet-stream"),
    ):
        assert image_type(path, content_type) is None, (path, content_type)


# text and tables


def test_text_is_bounded_and_never_cut_mid_character() -> None:
    data = "é".encode() * 3
    cut = decode_text(data[:5], size=len(data))
    assert (cut.text, cut.truncated, cut.binary) == ("éé", True, False)
    whole = decode_text(b"\xef\xbb\xbfhello \xff", size=10)
    assert (whole.text, whole.truncated) == ("hello \ufffd", False)
    assert decode_text(b"PK\x03\x04\x00\x00", size=100).binary


def test_csv_drops_a_cut_line_and_stops_at_the_row_bound() -> None:
    text = "a,b\n1,2\n3,4\n5,"
    table = delimited_table(text, ",", truncated=True)
    assert table is not None
    assert (table.columns, table.rows, table.more_rows) == (
        ["a", "b"],
        [["1", "2"], ["3", "4"]],
        True,
    )
    ragged = delimited_table("a\n1,2,3\n", ",", truncated=False)
    assert ragged is not None
    assert ragged.columns == ["a", "column 2", "column 3"] and ragged.rows == [["1", "2", "3"]]
    long = delimited_table("n\n" + "".join(f"{i}\n" for i in range(MAX_ROWS + 5)), ",", False)
    assert long is not None and len(long.rows) == MAX_ROWS and long.more_rows
    tsv = delimited_table("x\ty\n<b>\t\n", "\t", truncated=False)
    assert tsv is not None and tsv.rows == [["<b>", ""]] and not tsv.more_rows
    assert delimited_table("", ",", truncated=False) is None


def test_json_arrays_and_lines_become_tables() -> None:
    records = [{"a": 1, "b": {"c": [1]}}, {"b": None, "d": "x"}]
    table = json_table(json.dumps(records), truncated=False)
    assert table is not None
    assert table.columns == ["a", "b", "d"]
    assert table.rows == [["1", '{"c": [1]}', ""], ["", "null", "x"]]
    assert not table.more_rows
    cut = json_table('[{"a": 1}, {"a": 2}, {"a": 3', truncated=True)
    assert cut is not None and cut.rows == [["1"], ["2"]] and cut.more_rows
    scalars = json_table('[1, "two", [3]]', truncated=False)
    assert scalars is not None and scalars.columns == ["value"]
    assert scalars.rows == [["1"], ["two"], ["[3]"]]
    assert json_table('{"not": "an array"}', truncated=False) is None
    assert json_table("[1, oops]", truncated=False) is not None  # what was whole is shown
    assert json_table("[oops]", truncated=False) is None
    lines = json_lines_table('{"a": 1}\n\n{"a": 2}\n{"a": 3', truncated=True)
    assert lines is not None and lines.rows == [["1"], ["2"]] and lines.more_rows
    assert json_lines_table("{}\nnot json\n", truncated=False) is None


def _reader(data: bytes) -> tuple[Callable[[int, int], Awaitable[bytes]], list[tuple[int, int]]]:
    reads: list[tuple[int, int]] = []

    async def read(start: int, end: int) -> bytes:
        assert 0 <= start < end <= len(data), (start, end)
        reads.append((start, end))
        return data[start:end]

    return read, reads


async def test_a_preview_reads_a_bounded_head() -> None:
    data = b"x" * (1 << 20)
    read, reads = _reader(data)
    preview = await build_preview(read, "big.txt", "text/plain", len(data))
    assert reads == [(0, 64 << 10)]
    assert preview.text is not None and preview.text.truncated
    read, reads = _reader(b"")
    assert (await build_preview(read, "e.csv", "text/csv", 0)).note == "The object is empty."
    assert reads == []
    png = await build_preview(read, "a.png", "image/png", 30 << 20)
    assert not png.image and "Too large" in png.note
    html = await build_preview(_reader(b"<script>")[0], "a.html", "text/html", 8)
    assert html.active and html.text is not None and html.text.text == "<script>"
    pretty = await build_preview(_reader(b'{"a":[1]}')[0], "o.json", "application/json", 9)
    assert pretty.kind is Kind.TEXT and pretty.text is not None
    assert pretty.text.text == '{\n  "a": [\n    1\n  ]\n}'


# Parquet


def _parquet(rows: int, row_group_size: int, wide: int = 0) -> bytes:
    columns: dict[str, Any] = {"id": list(range(rows)), "name": [f"n{i}" for i in range(rows)]}
    for i in range(wide):
        columns[f"extra{i}"] = [f"{i}-{r}-" * 20 for r in range(rows)]
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, row_group_size=row_group_size)
    return out.getvalue()


async def test_parquet_reads_the_footer_and_the_first_row_group_only() -> None:
    data = _parquet(100_000, row_group_size=1_000)
    read, reads = _reader(data)
    preview = await parquet_module.parquet_preview(read, len(data))
    assert preview.error == "" and preview.num_rows == 100_000 and preview.num_row_groups == 100
    assert [c.name for c in preview.columns] == ["id", "name"]
    assert preview.table is not None and len(preview.table.rows) == 20
    assert preview.table.rows[3] == ["3", "n3"]
    assert preview.notes == ["Showing the first 20 of 100,000 rows (row group 1 of 100)."]
    # the tail (footer), then the first row group's chunks, which start after the magic
    assert len(reads) == 2 and reads[0][1] == len(data) and reads[1][0] == 4
    first_group = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).total_byte_size
    assert reads[1][1] - reads[1][0] <= first_group + 1024
    assert sum(end - start for start, end in reads) < len(data) / 8


async def test_parquet_bounds_say_what_they_leave_out(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _parquet(200, row_group_size=200, wide=4)
    monkeypatch.setattr(parquet_module, "MAX_ROW_GROUP_BYTES", 6_000)
    preview = await parquet_module.parquet_preview(_reader(data)[0], len(data))
    assert preview.table is not None
    shown = preview.table.columns
    assert shown[:2] == ["id", "name"] and len(shown) < 6
    assert preview.notes[0] == (
        f"Showing {len(shown)} of 6 columns: the others' data in the first row group goes past "
        "the 0 MiB a preview reads."
    )
    monkeypatch.setattr(parquet_module, "MAX_ROW_GROUP_BYTES", 10)
    none = await parquet_module.parquet_preview(_reader(data)[0], len(data))
    assert none.table is None and none.notes[0].startswith("Rows are not shown")
    monkeypatch.setattr(parquet_module, "TAIL_BYTES", 16)
    monkeypatch.setattr(parquet_module, "MAX_FOOTER", 32)
    footer = await parquet_module.parquet_preview(_reader(data)[0], len(data))
    assert footer.error.startswith("its footer is ") and footer.columns == []


async def test_what_is_not_parquet_says_so() -> None:
    for data, error in (
        (b"short", "too short to be a Parquet file"),
        (b"0123456789abcdef", "not a Parquet file: it does not end with PAR1"),
        (
            b"PAR1" + b"\xff\xff\xff\x7fPAR1",
            "not a Parquet file: its footer length is past its start",
        ),
    ):
        preview = await parquet_module.parquet_preview(_reader(data)[0], len(data))
        assert preview.error == error
    garbage = b"PAR1" + b"\x00" * 20 + (10).to_bytes(4, "little") + b"PAR1"
    broken = await parquet_module.parquet_preview(_reader(garbage)[0], len(garbage))
    assert broken.error.startswith("its footer could not be read")


# the relay


def _streaming_app(chunks: list[bytes], status: int = 200) -> tuple[Any, list[str]]:
    events: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["path"] == "/api/v1/things" and scope["query_string"] == b"path=a+b"
        headers = dict(scope["headers"])
        assert headers[b"authorization"] == b"Bearer token" and headers[b"range"] == b"bytes=0-"
        await receive()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"X-Thing", b"1")],
            }
        )
        try:
            for i, chunk in enumerate(chunks):
                events.append(f"sent {i}")
                more = i < len(chunks) - 1
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
        except asyncio.CancelledError:
            events.append("cancelled")
            raise

    return app, events


async def _relay(app: Any) -> Any:
    return await open_relay(
        ApiClient(app), "/things", "token", params={"path": "a b"}, headers={"Range": "bytes=0-"}
    )


async def test_the_relay_hands_on_each_chunk_as_it_comes() -> None:
    chunks = [bytes([i]) * 10 for i in range(20)]
    app, events = _streaming_app(chunks)
    relay = await _relay(app)
    assert relay.status == 200 and relay.headers["x-thing"] == "1"
    received = [chunk async for chunk in relay.body]
    assert received == chunks
    # the API ran ahead by a few chunks only, never the whole body before the first was taken
    assert events == [f"sent {i}" for i in range(20)]


async def test_closing_the_relay_stops_the_api() -> None:
    app, events = _streaming_app([b"x"] * 1000)
    relay = await _relay(app)
    body = relay.body
    assert await body.__anext__() == b"x"
    await body.aclose()  # type: ignore[attr-defined]
    assert events[-1] == "cancelled" and len(events) < 20


async def test_refusals_come_back_as_the_apis_message() -> None:
    for status, expected in ((404, ApiError), (401, SignedOut)):
        app, _ = _streaming_app([b'{"message": "not ', b'found"}'], status=status)
        with pytest.raises(expected) as raised:
            await _relay(app)
        assert "not found" in str(raised.value)


# paths


def test_paths_folders_and_sizes() -> None:
    assert [c["name"] for c in breadcrumbs("r", "main", "a/b/c")] == ["r", "a/", "b/", "c"]
    assert (
        breadcrumbs("r", "main", "a/")[-1]["url"] == "/ui/repositories/r/objects?ref=main&path=a%2F"
    )
    assert (parent_prefix("a/b/c"), parent_prefix("a/b/"), parent_prefix("top")) == (
        "a/b/",
        "a/",
        "",
    )
    assert [human_size(n) for n in (0, 1023, 1536, 5 << 20, 3 << 40)] == [
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 TiB",
    ]
    assert [destination(p) for p in ("", " /docs", "docs/", "a/b")] == [
        "",
        "docs/",
        "docs/",
        "a/b/",
    ]

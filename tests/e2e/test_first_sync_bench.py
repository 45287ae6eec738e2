"""The first-sync benchmark's machinery at a tiny size, so that ``bench.first_sync`` cannot rot.

Two S3 server processes (:mod:`bench.s3_server`), a source server, a destination server and a
replicant process, as the benchmark runs them at 1,000,000 objects; here 2,000 objects in a few
ranges, the async validator only (the Spark path is proved in ``tests/spark``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.first_sync import report, run_bench
from bench.s3_process import s3_process
from bench.s3_server import operation

pytestmark = [pytest.mark.s3, pytest.mark.slow]

OBJECTS = 2_000


def test_first_sync_of_a_small_lake_end_to_end(tmp_path: Path) -> None:
    bench = run_bench(OBJECTS, tmp_path, modes=(False,), deadline=120.0, pages=2)

    (run,) = bench.runs
    assert run.head == bench.lake.commit_id
    assert bench.lake.ranges > 1
    ops = {op: int(v["count"]) for op, v in run.s3.items()}
    # the metarange and every range read once; 2,000 objects of one data prefix: two pages
    assert ops.get("GetObject") == bench.lake.ranges + 1
    assert ops.get("ListObjectsV2") == 2
    assert "HeadObject" not in ops
    assert run.validation_requests == {"get": bench.lake.ranges + 1, "list": 2}
    assert run.replicant_rss_mb > 0 and run.replicant_cpu_s > 0
    assert [r.requests for r in bench.rates] == [2, 1, 2]
    text = report(bench)
    assert "async validator" in text and "ListObjectsV2" in text


@pytest.mark.parametrize("keep_alive", [False, True])
def test_the_s3_server_keeps_connections_open_when_asked(tmp_path: Path, keep_alive: bool) -> None:
    """moto's own server closes every connection; ``--keep-alive`` serves it as S3 would."""
    import http.client
    from urllib.parse import urlsplit

    with s3_process(tmp_path / "s3.log", ["bench-bucket"], keep_alive=keep_alive) as s3:
        url = urlsplit(s3.url)
        connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
        answers = []
        for _ in range(3):
            connection.request("GET", "/bench-bucket?list-type=2")
            answer = connection.getresponse()
            answer.read()
            answers.append((answer.status, answer.getheader("Connection")))
            if answer.will_close:
                connection.close()
        connection.close()
        counts = s3.http.get("/_bench/requests").json()["ops"]
    assert [status for status, _ in answers] == [200, 200, 200]
    assert all((header == "close") != keep_alive for _, header in answers)
    assert counts["ListObjectsV2"]["count"] == 3


@pytest.mark.parametrize(
    ("method", "path", "query", "headers", "expected"),
    [
        ("GET", "/bucket", "list-type=2&prefix=a", {}, "ListObjectsV2"),
        ("GET", "/bucket", "prefix=a", {}, "ListObjects"),
        ("GET", "/bucket/a/b", "", {}, "GetObject"),
        ("HEAD", "/bucket/a/b", "", {}, "HeadObject"),
        ("PUT", "/bucket/a/b", "", {}, "PutObject"),
        ("PUT", "/bucket/a/b", "", {"HTTP_X_AMZ_COPY_SOURCE": "/x/y"}, "CopyObject"),
        ("PUT", "/bucket", "", {}, "CreateBucket"),
        ("POST", "/bucket", "delete", {}, "DeleteObjects"),
        ("GET", "/", "", {}, "ListBuckets"),
    ],
)
def test_requests_are_counted_by_s3_operation(
    method: str, path: str, query: str, headers: dict[str, str], expected: str
) -> None:
    assert operation(method, path, query, headers) == expected

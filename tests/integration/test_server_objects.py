"""Objects through the official `lakefs` SDK: uploads, ranged reads, listing, deletes, copies."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import httpx
import lakefs
import pytest
from lakefs.exceptions import NotFoundException, ObjectExistsException, ObjectNotFoundException

BIG = 32 * 1024 * 1024 + 1


@pytest.mark.both_backends
def test_upload_empty_small_and_big_objects(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    big = os.urandom(BIG)
    cases = {
        "empty": (b"", "application/octet-stream", None),
        "small.txt": (b"hello, lake\n", "text/plain", {"Owner": "data-team", "stage": "raw"}),
        "big.bin": (big, "application/x-big", {"size": "32MiB+1"}),
    }
    for path, (data, content_type, metadata) in cases.items():
        obj = main.object(path).upload(data, content_type=content_type, metadata=metadata)
        stat = obj.stat()
        assert stat.size_bytes == len(data)
        assert stat.checksum == hashlib.md5(data).hexdigest()
        assert stat.content_type == content_type
        assert stat.metadata == {k.lower(): v for k, v in (metadata or {}).items()}
        assert isinstance(stat.mtime, int)
    assert main.object("empty").reader().read() == b""
    assert main.object("small.txt").reader(mode="r").read() == "hello, lake\n"
    with main.object("big.bin").reader() as f:
        assert hashlib.md5(f.read()).digest() == hashlib.md5(big).digest()
    ref = main.commit("three objects")
    committed = repo.ref(ref.id).object("big.bin")
    assert committed.stat().size_bytes == BIG
    with committed.reader() as f:
        f.seek(BIG - 5)
        assert f.read() == big[-5:]


@pytest.mark.both_backends
def test_ranged_reads(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    data = bytes(range(256)) * 4
    main.object("r.bin").upload(data)
    main.object("empty").upload(b"")
    with main.object("r.bin").reader() as f:
        f.seek(10)
        assert f.read(5) == data[10:15]
        f.seek(1020)
        assert f.read(100) == data[1020:]
        assert f.read(1) == b""
    url = f"/repositories/{repo.id}/refs/main/objects"
    whole = http.get(url, params={"path": "r.bin", "presign": "False"})
    assert (whole.status_code, whole.content) == (200, data)
    assert whole.headers["content-length"] == "1024"
    part = http.get(url, params={"path": "r.bin"}, headers={"Range": "bytes=1000-2000"})
    assert part.status_code == 206
    assert part.content == data[1000:]
    assert (b"Content-Range", b"bytes 1000-1023/1024") in part.headers.raw
    suffix = http.get(url, params={"path": "r.bin"}, headers={"Range": "bytes=-4"})
    assert (suffix.status_code, suffix.content) == (206, data[-4:])
    for path, header, size in (
        ("r.bin", "bytes=1024-", 1024),
        ("r.bin", "bytes=5000-6000", 1024),
        ("empty", "bytes=0-", 0),
    ):
        past = http.get(url, params={"path": path}, headers={"Range": header})
        assert past.status_code == 416, header
        assert past.reason_phrase == "Requested Range Not Satisfiable"
        # the client's error path looks this header up case-sensitively
        assert (b"Content-Range", f"bytes */{size}".encode()) in past.headers.raw
        assert "message" in past.json()
    # the SDK's reader treats 416 as the end of the object
    with main.object("empty").reader() as f:
        f.seek(0)
        assert f.read(10) == b""


@pytest.mark.both_backends
def test_head_stat_and_exists(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("dir/file").upload(b"abc", content_type="text/csv")
    assert main.object("dir/file").exists()
    assert not main.object("dir/other").exists()
    head = http.head(f"/repositories/{repo.id}/refs/main/objects", params={"path": "dir/file"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == "3"
    assert head.headers["content-type"] == "text/csv"
    missing = http.head(f"/repositories/{repo.id}/refs/main/objects", params={"path": "nope"})
    assert missing.status_code == 404 and missing.content == b""
    with pytest.raises(ObjectNotFoundException):
        main.object("dir/other").stat()
    with pytest.raises(ObjectNotFoundException):
        main.object("dir/other").reader().read()
    stat = http.get(
        f"/repositories/{repo.id}/refs/main/objects/stat", params={"path": "dir/file"}
    ).json()
    assert stat["path_type"] == "object" and stat["size_bytes"] == 3
    assert isinstance(stat["mtime"], int) and stat["metadata"] == {}


def test_get_object_is_an_attachment_named_after_its_path(
    repo: lakefs.Repository, http: httpx.Client
) -> None:
    """As lakeFS: a browser saves the bytes instead of rendering them in the server's origin."""
    main = repo.branch("main")
    url = f"/repositories/{repo.id}/refs/main/objects"
    for path, disposition in (
        ("site/index.html", "attachment; filename=index.html"),
        ("a b/report 1.csv", 'attachment; filename="report 1.csv"'),
        ('odd/x"y\\z', 'attachment; filename="x\\"y\\\\z"'),
        ("uni/résumé.txt", "attachment; filename*=utf-8''r%C3%A9sum%C3%A9.txt"),
        ("top", "attachment; filename=top"),
    ):
        main.object(path).upload(b"<script>alert(1)</script>", content_type="text/html")
        got = http.get(url, params={"path": path})
        assert got.status_code == 200, got.text
        assert got.headers["content-disposition"] == disposition, path
        ranged = http.get(url, params={"path": path}, headers={"Range": "bytes=0-0"})
        assert ranged.status_code == 206
        assert ranged.headers["content-disposition"] == disposition
    # the SDK reads such an answer as the object's bytes
    assert main.object("top").reader().read() == b"<script>alert(1)</script>"


@pytest.mark.both_backends
def test_exclusive_upload_refuses_existing_paths(
    repo: lakefs.Repository, http: httpx.Client
) -> None:
    main = repo.branch("main")
    main.object("once").upload(b"1", mode="x")
    with pytest.raises(ObjectExistsException):
        main.object("once").upload(b"2", mode="x")
    main.commit("once")
    raw = http.post(
        f"/repositories/{repo.id}/branches/main/objects",
        params={"path": "once"},
        headers={"If-None-Match": "*"},
        content=b"3",
    )
    assert (raw.status_code, raw.reason_phrase) == (412, "Precondition Failed")
    assert main.object("once").reader().read() == b"1"


def test_listing_with_and_without_delimiter_over_pages(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    paths = [f"data/part={p}/file-{i:04}.csv" for p in range(5) for i in range(500)]
    paths += ["data/_SUCCESS", "readme.md"]

    def put(path: str) -> None:
        main.object(path).upload(path.encode(), pre_sign=False)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, paths))
    assert len(paths) == 2502
    listed = [o.path for o in main.objects()]
    assert listed == sorted(paths)
    small_pages = [o.path for o in main.objects(prefix="data/part=3/", amount=170)]
    assert small_pages == sorted(p for p in paths if p.startswith("data/part=3/"))
    top = list(main.objects(delimiter="/"))
    assert [(type(o).__name__, o.path) for o in top] == [
        ("CommonPrefix", "data/"),
        ("ObjectInfo", "readme.md"),
    ]
    level = [o.path for o in main.objects(prefix="data/", delimiter="/", amount=2)]
    assert level == ["data/_SUCCESS"] + [f"data/part={p}/" for p in range(5)]
    assert len(list(main.objects(max_amount=1200))) == 1200
    ref = main.commit("2502 objects")
    assert [o.path for o in repo.ref(ref.id).objects()] == sorted(paths)


@pytest.mark.both_backends
def test_small_listing_over_pages(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    paths = sorted([f"d/{i:02}.txt" for i in range(11)] + ["e/x.txt", "top.txt"])
    for path in paths:
        main.object(path).upload(path.encode(), pre_sign=False)
    url = f"/repositories/{repo.id}/refs/main/objects/ls"
    seen: list[str] = []
    after = ""
    while True:
        page = http.get(url, params={"amount": 4, "after": after}).json()
        seen += [row["path"] for row in page["results"]]
        if not page["pagination"]["has_more"]:
            break
        after = page["pagination"]["next_offset"]
    assert seen == paths
    assert [o.path for o in main.objects(amount=3)] == paths
    top = [o.path for o in main.objects(delimiter="/", amount=1)]
    assert top == ["d/", "e/", "top.txt"]
    commit = main.commit("13 objects")
    assert [o.path for o in repo.ref(commit.id).objects(prefix="d/", amount=5)] == paths[:11]


@pytest.mark.both_backends
def test_listing_rows_have_required_fields(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("a/b").upload(b"x")
    main.object("c").upload(b"y")
    body = http.get(
        f"/repositories/{repo.id}/refs/main/objects/ls", params={"delimiter": "/", "prefix": ""}
    ).json()
    assert body["pagination"] == {
        "has_more": False,
        "next_offset": "",
        "results": 2,
        "max_per_page": 1000,
    }
    prefix_row, object_row = body["results"]
    assert prefix_row["path_type"] == "common_prefix" and prefix_row["path"] == "a/"
    for row in (prefix_row, object_row):
        assert isinstance(row["checksum"], str)
        assert isinstance(row["physical_address"], str)
        assert isinstance(row["mtime"], int)
    assert object_row["size_bytes"] == 1 and object_row["metadata"] == {}


@pytest.mark.both_backends
def test_delete_single_and_bulk(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    for name in ("a", "b", "c", "d"):
        main.object(name).upload(name.encode())
    main.commit("four")
    main.object("a").delete()
    with pytest.raises(ObjectNotFoundException):
        main.object("a").delete()
    main.delete_objects(["b", "c", "never-existed"])
    main.delete_objects("never-existed-either")
    assert [o.path for o in main.objects()] == ["d"]
    assert sorted(c.path for c in main.uncommitted()) == ["a", "b", "c"]
    main.commit("deleted three")
    assert [o.path for o in main.objects()] == ["d"]


def test_bulk_delete_refuses_over_1000_paths(repo: lakefs.Repository, http: httpx.Client) -> None:
    response = http.post(
        f"/repositories/{repo.id}/branches/main/objects/delete",
        json={"paths": [f"p{i}" for i in range(1001)]},
    )
    assert response.status_code == 400


@pytest.mark.both_backends
def test_copy_object(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    main.object("src.json").upload(
        b'{"a": 1}', content_type="application/json", metadata={"k": "v"}
    )
    main.commit("src")
    dev = repo.branch("dev").create("main")
    copy = repo.ref("main").object("src.json").copy("dev", "copied/src.json")
    stat = copy.stat()
    assert stat.content_type == "application/json" and stat.metadata == {"k": "v"}
    assert stat.physical_address != main.object("src.json").stat().physical_address
    assert dev.object("copied/src.json").reader().read() == b'{"a": 1}'
    with pytest.raises(NotFoundException):
        main.object("missing").copy("dev", "x")

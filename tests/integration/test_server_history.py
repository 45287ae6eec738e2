"""History through the official `lakefs` SDK: log, diffs, reset, revert, cherry-pick, merge."""

from __future__ import annotations

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import BadRequestException, ConflictException, TransactionException


def test_log_of_many_commits_pages(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    made = []
    for i in range(210):
        main.object(f"f{i % 7}").upload(str(i).encode(), pre_sign=False)
        made.append(main.commit(f"commit {i}").id)
    log = list(main.log())
    assert [c.id for c in log[:210]] == made[::-1]
    assert log[-1].message == "Repository created" and log[-1].parents == []
    assert len(log) == 211
    assert [c.id for c in main.log(max_amount=5)] == made[::-1][:5]
    assert [c.id for c in main.log(amount=7, max_amount=20)] == made[::-1][:20]
    url = f"/repositories/{repo.id}/refs/main/commits"
    first = http.get(url, params={"amount": 3}).json()
    assert first["pagination"] == {
        "has_more": True,
        "next_offset": made[-3],
        "results": 3,
        "max_per_page": 1000,
    }
    second = http.get(url, params={"amount": 3, "after": made[-3]}).json()
    assert [c["id"] for c in second["results"]] == made[-4:-7:-1]
    limited = http.get(url, params={"amount": 2, "limit": "True"}).json()
    assert limited["pagination"]["has_more"] is False and limited["pagination"]["results"] == 2
    stopped = http.get(url, params={"stop_at": made[-4]}).json()
    assert [c["id"] for c in stopped["results"]] == made[-1:-5:-1]
    touching = http.get(url, params={"objects": "f3", "amount": 4}).json()
    assert [c["message"] for c in touching["results"]] == [
        f"commit {i}" for i in (206, 199, 192, 185)
    ]


@pytest.mark.both_backends
def test_log_first_parent(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    dev = repo.branch("dev").create("main")
    dev.object("d").upload(b"d")
    dev_commit = dev.commit("on dev").id
    main.object("m").upload(b"m")
    main.commit("on main")
    merge = dev.merge_into(main)
    all_ids = [c.id for c in main.log()]
    first_parent = [c.id for c in main.log(first_parent=True)]
    assert all_ids[0] == merge and dev_commit in all_ids
    assert dev_commit not in first_parent and len(first_parent) == 3


@pytest.mark.both_backends
def test_two_dot_and_three_dot_diff(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("keep").upload(b"k")
    main.object("dir/change").upload(b"1")
    main.object("dir/remove").upload(b"r")
    main.commit("base")
    dev = repo.branch("dev").create("main")
    dev.object("dir/change").upload(b"22")
    dev.object("dir/deep/add").upload(b"a")
    dev.object("dir/remove").delete()
    dev.commit("dev changes")
    main.object("main-only").upload(b"m")
    main.commit("main moves on")

    def changes(**kwargs: object) -> list[tuple[str, str, str, int | None]]:
        return [(c.type, c.path, c.path_type, c.size_bytes) for c in main.diff(dev, **kwargs)]

    # a removed path has size 0, as lakeFS answers
    assert changes(type="two_dot") == [
        ("changed", "dir/change", "object", 2),
        ("added", "dir/deep/add", "object", 1),
        ("removed", "dir/remove", "object", 0),
        ("removed", "main-only", "object", 0),
    ]
    assert changes(type="three_dot") == [
        ("changed", "dir/change", "object", 2),
        ("added", "dir/deep/add", "object", 1),
        ("removed", "dir/remove", "object", 0),
    ]
    assert changes(type="two_dot", prefix="dir/de") == [("added", "dir/deep/add", "object", 1)]
    grouped = http.get(
        f"/repositories/{repo.id}/refs/main/diff/dev",
        params={"type": "two_dot", "prefix": "dir/", "delimiter": "/", "amount": 2},
    ).json()
    assert [(d["type"], d["path"], d["path_type"]) for d in grouped["results"]] == [
        ("changed", "dir/change", "object"),
        ("prefix_changed", "dir/deep/", "common_prefix"),
    ]
    assert grouped["pagination"]["next_offset"] == "dir/deep/"
    rest = http.get(
        f"/repositories/{repo.id}/refs/main/diff/dev",
        params={"type": "two_dot", "prefix": "dir/", "delimiter": "/", "after": "dir/deep/"},
    ).json()
    assert [d["path"] for d in rest["results"]] == ["dir/remove"]
    # lakeFS defaults to three-dot when no type is given
    default = http.get(f"/repositories/{repo.id}/refs/main/diff/dev").json()
    assert [d["path"] for d in default["results"]] == ["dir/change", "dir/deep/add", "dir/remove"]


@pytest.mark.both_backends
def test_uncommitted_diff_and_reset(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    for path in ("a/1", "a/2", "b/1", "c"):
        main.object(path).upload(b"x")
    main.commit("base")
    main.object("a/1").upload(b"changed")
    main.object("a/3").upload(b"new")
    main.object("b/1").delete()
    main.object("c").upload(b"y")
    assert [(c.type, c.path) for c in main.uncommitted()] == [
        ("changed", "a/1"),
        ("added", "a/3"),
        ("removed", "b/1"),
        ("changed", "c"),
    ]
    assert [c.path for c in main.uncommitted(prefix="a/")] == ["a/1", "a/3"]
    page = http.get(
        f"/repositories/{repo.id}/branches/main/diff", params={"delimiter": "/", "prefix": ""}
    ).json()
    assert [(d["path"], d["path_type"]) for d in page["results"]] == [
        ("a/", "common_prefix"),
        ("b/", "common_prefix"),
        ("c", "object"),
    ]
    main.reset_changes(path_type="object", path="c")
    assert [c.path for c in main.uncommitted()] == ["a/1", "a/3", "b/1"]
    main.reset_changes(path_type="common_prefix", path="a/")
    assert [c.path for c in main.uncommitted()] == ["b/1"]
    main.object("z").upload(b"z")
    main.reset_changes()
    assert list(main.uncommitted()) == []
    assert main.object("a/1").reader().read() == b"x"
    with pytest.raises(lakefs_sdk.exceptions.BadRequestException):
        main.reset_changes(path_type="object")


@pytest.mark.both_backends
def test_revert(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"1")
    main.commit("one")
    main.object("a").upload(b"2")
    main.object("b").upload(b"b")
    bad = main.commit("two").id
    reverted = main.revert(bad)
    assert reverted.message == f"Revert {bad}"
    assert main.object("a").reader().read() == b"1"
    assert not main.object("b").exists()
    main.object("dirty").upload(b"d")
    with pytest.raises(BadRequestException):
        main.revert(bad)


@pytest.mark.both_backends
def test_cherry_pick(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    dev = repo.branch("dev").create("main")
    dev.object("one").upload(b"1")
    dev.commit("one")
    dev.object("two").upload(b"2")
    picked_from = dev.commit("two", metadata={"k": "v"}).id
    picked = main.cherry_pick(picked_from)
    assert picked.message == "two"
    assert picked.metadata["k"] == "v"
    assert picked.metadata["cherry-pick-origin"] == picked_from
    assert main.object("two").exists() and not main.object("one").exists()
    assert main.head.id == picked.id


@pytest.mark.both_backends
def test_merge_outcomes(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("shared").upload(b"base")
    main.commit("base")
    dev = repo.branch("dev").create("main")
    # no changes: dev brings nothing
    with pytest.raises(BadRequestException) as no_changes:
        dev.merge_into(main)
    assert "no changes" in str(no_changes.value)
    assert dev.merge_into(main, allow_empty=True)
    dev.object("shared").upload(b"dev")
    dev.commit("dev edits")
    main.object("shared").upload(b"main")
    main.commit("main edits")
    with pytest.raises(ConflictException):
        dev.merge_into(main)
    raw = http.post(f"/repositories/{repo.id}/refs/dev/merge/main", json={})
    assert raw.status_code == 409 and raw.reason_phrase == "Conflict"
    assert raw.json()["reference"] == ""
    # a dirty destination refuses the merge
    main.object("wip").upload(b"w")
    with pytest.raises(BadRequestException):
        dev.merge_into(main, strategy="source-wins")
    main.reset_changes()
    merged = dev.merge_into(main, strategy="source-wins", message="take dev")
    commit = repo.commit(merged).get_commit()
    assert commit.message == "take dev" and len(commit.parents) == 2
    assert main.object("shared").reader().read() == b"dev"
    bad = http.post(f"/repositories/{repo.id}/refs/dev/merge/main", json={"strategy": "whatever"})
    assert bad.status_code == 400


@pytest.mark.both_backends
def test_merge_of_empty_tree_into_initial_commit(repo: lakefs.Repository) -> None:
    dev = repo.branch("dev").create("main")
    dev.object("tmp").upload(b"t")
    dev.commit("add")
    dev.object("tmp").delete()
    dev.commit("remove")
    assert dev.merge_into(repo.branch("main"))


@pytest.mark.both_backends
def test_transact(repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    with main.transact(commit_message="tx commit", commit_metadata={"via": "tx"}) as tx:
        tx.object("in-tx").upload(b"1")
        assert not main.object("in-tx").exists()
    assert main.object("in-tx").reader().read() == b"1"
    assert [b.id for b in repo.branches()] == ["main"]
    messages = [c.message for c in main.log(max_amount=2)]
    assert messages[1] == "tx commit"
    with pytest.raises(TransactionException), main.transact(commit_message="empty"):
        pass
    assert [b.id for b in repo.branches()] == ["main"]

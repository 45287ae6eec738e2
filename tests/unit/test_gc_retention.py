"""Garbage collection's core: rules, lakeFS's retention semantics, what preparing a run writes."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.core import Catalog, CommitID, Entry, open_memory
from mirror.core.ids import BranchID, MetaRangeID
from mirror.core.model import AddressType
from mirror.gc import (
    COMMITS_HEADER,
    DAY,
    CommitNode,
    GCReadOnlyError,
    GCRules,
    GCRulesNotFoundError,
    GCRulesStore,
    InvalidContinuationTokenError,
    InvalidGCRulesError,
    dangling_commits,
    is_run_id,
    new_run_id,
    prepare_commits,
    prepare_uncommitted,
    retained_commits,
)
from mirror.gc.uncommitted import Position
from tests.conftest import Clock

NOW = 1_700_000_000

# -- rules ------------------------------------------------------------------------------------


def test_rules_round_trip_lakefs_body() -> None:
    body = {
        "default_retention_days": 21,
        "branches": [
            {"branch_id": "main", "retention_days": 28},
            {"branch_id": "dev", "retention_days": 7},
        ],
    }
    rules = GCRules.from_lakefs(body)
    assert rules.default_retention_days == 21
    assert rules.branch_days() == {"main": 28, "dev": 7}
    assert rules.retention_days("main") == 28
    assert rules.retention_days("other") == 21
    # sorted by branch: lakeFS's order is arbitrary (a map), ours is stable
    assert rules.to_lakefs()["branches"] == [
        {"branch_id": "dev", "retention_days": 7},
        {"branch_id": "main", "retention_days": 28},
    ]
    assert GCRules.decode(rules.encode()) == rules


def test_rules_leniency_kept_from_lakefs() -> None:
    # null branches (what lakeFS itself sends), unknown keys, rules for branches that do not
    # exist, the same branch twice (the last wins), integral floats
    rules = GCRules.from_lakefs(
        {
            "default_retention_days": 3.0,
            "branches": None,
            "extra": True,
        }
    )
    assert rules == GCRules(3)
    assert rules.to_lakefs() == {"default_retention_days": 3, "branches": []}
    twice = GCRules.from_lakefs(
        {
            "default_retention_days": 1,
            "branches": [
                {"branch_id": "x", "retention_days": 5, "note": "ignored"},
                {"branch_id": "x", "retention_days": 9},
            ],
        }
    )
    assert twice.branch_days() == {"x": 9}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ([], "expected a JSON object"),
        ("rules", "expected a JSON object"),
        ({"branches": []}, "missing default_retention_days"),
        ({"default_retention_days": 1}, "missing branches"),
        ({}, "missing default_retention_days and branches"),
        ({"default_retention_days": "7", "branches": []}, "default_retention_days"),
        ({"default_retention_days": True, "branches": []}, "default_retention_days"),
        ({"default_retention_days": 1.5, "branches": []}, "whole number"),
        ({"default_retention_days": -1, "branches": []}, "out of range"),
        ({"default_retention_days": 2**31, "branches": []}, "out of range"),
        ({"default_retention_days": 1, "branches": {"main": 3}}, "branches: expected a list"),
        ({"default_retention_days": 1, "branches": ["main"]}, "branches[0]: expected an object"),
        (
            {"default_retention_days": 1, "branches": [{"branch_id": "main"}]},
            "branches[0]: branch_id and retention_days are both required",
        ),
        (
            {"default_retention_days": 1, "branches": [{"branch_id": "", "retention_days": 1}]},
            "branches[0].branch_id",
        ),
        (
            {"default_retention_days": 1, "branches": [{"branch_id": 7, "retention_days": 1}]},
            "branches[0].branch_id",
        ),
        (
            {"default_retention_days": 1, "branches": [{"branch_id": "a", "retention_days": -2}]},
            "branches[0].retention_days",
        ),
    ],
)
def test_bad_rules_name_the_field(body: object, needle: str) -> None:
    with pytest.raises(InvalidGCRulesError) as info:
        GCRules.from_lakefs(body)
    assert needle in str(info.value)


def test_rules_store_per_repository_instance() -> None:
    catalog = open_memory()
    repo = catalog.create_repository("repo", "mem://repo")
    store = GCRulesStore(catalog.kv)
    with pytest.raises(GCRulesNotFoundError) as info:
        store.get(repo)
    assert str(info.value).startswith("not found")
    assert store.find(repo) is None
    rules = GCRules.of(7, {"main": 30})
    store.set(repo, rules)
    assert store.get(repo) == rules
    # a repository re-created under the same name starts without rules
    catalog.delete_repository("repo")
    again = catalog.create_repository("repo", "mem://repo2")
    assert store.find(again) is None
    store.delete(repo)
    store.delete(repo)  # deleting nothing is fine, as in lakeFS


# -- retention semantics ---------------------------------------------------------------------


def _chain(
    dates: Mapping[str, int], parents: Mapping[str, str | None]
) -> dict[CommitID, CommitNode]:
    """Return nodes named as given; dates are days relative to NOW."""
    return {
        CommitID(c): CommitNode(
            NOW + d * DAY,
            CommitID(p) if (p := parents.get(c)) else None,
            MetaRangeID(f"m-{c}"),
        )
        for c, d in dates.items()
    }


def _linear(*days: int) -> tuple[dict[CommitID, CommitNode], list[str]]:
    names = [f"c{i}" for i in range(len(days))]
    parents = {n: (names[i - 1] if i else None) for i, n in enumerate(names)}
    return _chain(dict(zip(names, days, strict=True)), parents), names


def _heads(**branches: str) -> list[tuple[BranchID, CommitID]]:
    return [(BranchID(b), CommitID(c)) for b, c in branches.items()]


def test_window_keeps_every_commit_inside_and_the_newest_before() -> None:
    commits, n = _linear(-30, -20, -10, -5, -1)
    kept = retained_commits(commits, _heads(main=n[4]), GCRules(7), NOW)
    assert kept == {"c4", "c3", "c2"}


def test_zero_days_keeps_only_the_head() -> None:
    commits, n = _linear(-3, -2, -1)
    assert retained_commits(commits, _heads(main=n[2]), GCRules(0), NOW) == {"c2"}


def test_head_always_kept_however_old() -> None:
    commits, n = _linear(-400, -300)
    # the head is the newest commit before the window already: its parent goes
    assert retained_commits(commits, _heads(main=n[1]), GCRules(1), NOW) == {"c1"}
    commits, n = _linear(-400)
    assert retained_commits(commits, _heads(main=n[0]), GCRules(1), NOW) == {"c0"}


def test_branch_rule_overrides_default_and_longest_wins() -> None:
    # main: c0 - c1 - c2 - c3 ; dev branched at c1: d1
    commits = _chain(
        {"c0": -50, "c1": -40, "c2": -20, "c3": -2, "d1": -1},
        {"c1": "c0", "c2": "c1", "c3": "c2", "d1": "c1"},
    )
    short = GCRules.of(1, {"dev": 60})
    kept = retained_commits(commits, _heads(main="c3", dev="d1"), short, NOW)
    # main's head c3 is already older than its 1-day window, so c2 goes; dev's 60 days reach c0
    assert kept == {"c3", "d1", "c1", "c0"}
    only_main = GCRules.of(1, {"main": 45})
    kept = retained_commits(commits, _heads(main="c3", dev="d1"), only_main, NOW)
    # main's 45 days: c3, c2 (in), c1 (in: -40), c0 (newest before); dev's 1 day: d1, c1
    assert kept == {"c3", "c2", "c1", "c0", "d1"}


def test_dangling_commits_kept_within_the_default_window_and_walked_on() -> None:
    # x2 - x1 is what a deleted branch left behind: x2 is no commit's first parent
    commits = _chain(
        {"c0": -100, "c1": -90, "x1": -5, "x2": -3, "y1": -30, "y2": -20},
        {"c1": "c0", "x1": "c0", "x2": "x1", "y1": "c0", "y2": "y1"},
    )
    assert dangling_commits(commits) == {"c1", "x2", "y2"}
    kept = retained_commits(commits, _heads(main="c1"), GCRules(10), NOW)
    # x2 and x1 were made inside the default window, and c0 is the newest before it on that
    # path; y2 is outside it, so neither it nor its parents are kept on its account
    assert kept == {"c1", "c0", "x2", "x1"}


def test_second_parents_are_not_walked() -> None:
    # a merge M (first parent c1, second parent f1): f1 is dangling (no one's FIRST parent)
    commits = _chain(
        {"c0": -100, "f1": -60, "c1": -50, "m": -40},
        {"f1": "c0", "c1": "c0", "m": "c1"},
    )
    kept = retained_commits(commits, _heads(main="m"), GCRules(5), NOW)
    assert kept == {"m"}
    kept = retained_commits(commits, _heads(main="m"), GCRules(70), NOW)
    assert kept == {"m", "c1", "c0", "f1"}


def test_a_longer_walk_met_from_another_child_still_keeps_the_newest_before() -> None:
    # long (60 days) reaches p from l1; short (10 days) reaches p from s1, made inside its
    # window: p is the newest commit before short's window and stays, whichever walk runs first
    commits = _chain(
        {"p": -50, "l1": -45, "s1": -2},
        {"l1": "p", "s1": "p"},
    )
    for heads in (_heads(long="l1", short="s1"), _heads(short="s1", long="l1")):
        rules = GCRules.of(0, {"long": 1, "short": 10})
        assert retained_commits(commits, heads, rules, NOW) == {"l1", "s1", "p"}


def test_commits_made_after_the_listing_are_looked_up() -> None:
    commits, _ = _linear(-3, -2)
    late = CommitNode(NOW, CommitID("c1"), MetaRangeID("m-late"))
    kept = retained_commits(commits, _heads(main="late"), GCRules(1), NOW, lambda c: late)
    assert kept == {"late", "c1"}
    with pytest.raises(KeyError):
        retained_commits(commits, _heads(main="late"), GCRules(1), NOW)


def _reference(
    commits: Mapping[CommitID, CommitNode],
    heads: list[tuple[BranchID, CommitID]],
    rules: GCRules,
    now: int,
) -> set[CommitID]:
    """The specification, walk by walk, without pruning: the union of every walk."""
    kept: set[CommitID] = set()

    def walk(child_time: int, cid: CommitID | None, threshold: int) -> None:
        while cid is not None:
            if child_time > threshold:
                kept.add(cid)
            child_time, cid = commits[cid].creation_date, commits[cid].first_parent

    head_ids = {c for _, c in heads}
    for branch, cid in heads:
        kept.add(cid)
        node = commits[cid]
        walk(node.creation_date, node.first_parent, now - rules.retention_days(branch) * DAY)
    first_parents = {n.first_parent for n in commits.values()}
    for cid, node in commits.items():
        if cid not in first_parents and cid not in head_ids:
            walk(node.creation_date, cid, now - rules.default_retention_days * DAY)
    return kept


@st.composite
def histories(
    draw: st.DrawFn,
) -> tuple[dict[CommitID, CommitNode], list[tuple[BranchID, CommitID]], GCRules]:
    size = draw(st.integers(1, 30))
    nodes: dict[CommitID, CommitNode] = {}
    for i in range(size):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        days = draw(st.integers(-60, 0))
        hours = draw(st.integers(0, 23))
        nodes[CommitID(f"c{i:02d}")] = CommitNode(
            NOW + days * DAY + hours * 3600,
            CommitID(f"c{parent:02d}") if parent is not None else None,
            MetaRangeID(f"m{i}"),
        )
    names = ["main", "dev", "feature", "release"]
    count = draw(st.integers(0, len(names)))
    ids = sorted(nodes)
    heads = [(BranchID(b), draw(st.sampled_from(ids))) for b in names[:count]]
    branch_days = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 70), max_size=3))
    rules = GCRules.of(draw(st.integers(0, 70)), branch_days)
    return nodes, heads, rules


@settings(max_examples=300, deadline=None)
@given(histories())
def test_retention_is_the_union_of_every_walk(
    history: tuple[dict[CommitID, CommitNode], list[tuple[BranchID, CommitID]], GCRules],
) -> None:
    commits, heads, rules = history
    kept = retained_commits(commits, heads, rules, NOW)
    assert kept == _reference(commits, heads, rules, NOW)
    assert {c for _, c in heads} <= kept
    # the order walks run in changes nothing
    assert retained_commits(commits, list(reversed(heads)), rules, NOW) == kept


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(1, 30))
def test_longer_retention_never_keeps_less(
    history: tuple[dict[CommitID, CommitNode], list[tuple[BranchID, CommitID]], GCRules],
    extra: int,
) -> None:
    commits, heads, rules = history
    longer = GCRules.of(
        rules.default_retention_days + extra, {b: d + extra for b, d in rules.branches}
    )
    assert retained_commits(commits, heads, rules, NOW) <= retained_commits(
        commits, heads, longer, NOW
    )


# -- run IDs ----------------------------------------------------------------------------------


def test_run_ids_sort_newest_first() -> None:
    older, newer = new_run_id(NOW), new_run_id(NOW + 1)
    assert len(older) == len(newer) == 20
    assert newer < older
    assert is_run_id(older)
    assert not is_run_id("../etc") and not is_run_id("")


# -- prepare_commits --------------------------------------------------------------------------


def _lake(clock: Clock) -> Catalog:
    catalog = open_memory(clock=clock)
    catalog.create_repository("repo", "mem://repo")
    return catalog


def _commit(catalog: Catalog, clock: Clock, branch: str, files: dict[str, bytes], days: int) -> str:
    for path, data in files.items():
        catalog.upload_object("repo", branch, path, data)
    return catalog.commit("repo", branch, f"at {days}", date=clock.now + days * DAY).commit.id


def _read_csv(catalog: Catalog, location: str) -> list[dict[str, str]]:
    key = location.removeprefix("mem://repo/")
    text = catalog.block_store(catalog.get_repository("repo")).get(key).decode()
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames or ()) == COMMITS_HEADER
    return list(reader)


def test_prepare_commits_writes_the_retained_commits(clock: Clock) -> None:
    catalog = _lake(clock)
    with pytest.raises(GCRulesNotFoundError):
        prepare_commits(catalog, "repo")
    first = catalog.get_branch("repo", "main").commit_id
    old = _commit(catalog, clock, "main", {"a": b"1"}, -30)
    mid = _commit(catalog, clock, "main", {"a": b"2"}, -20)
    new = _commit(catalog, clock, "main", {"a": b"3"}, -1)
    GCRulesStore(catalog.kv).set(catalog.get_repository("repo"), GCRules(7))
    prepared = prepare_commits(catalog, "repo", now=clock.now)
    assert prepared.commits_location == (
        f"mem://repo/_lakefs/retention/gc/commits/run_id={prepared.run_id}/commits.csv"
    )
    assert prepared.addresses_location == "mem://repo/_lakefs/retention/gc/addresses/"
    rows = _read_csv(catalog, prepared.commits_location)
    assert {r["commit_id"] for r in rows} == {new, mid}
    assert {r["expired"] for r in rows} == {"false"}
    for row in rows:
        assert row["metarange_id"] == catalog.get_commit("repo", row["commit_id"]).metarange_id
    retained = {c for c, _ in prepared.retained}
    assert old not in retained and first not in retained


def test_prepare_refused_on_read_only_repositories(clock: Clock) -> None:
    catalog = open_memory(clock=clock)
    catalog.create_repository("mirror", "mem://mirror", read_only=True, mirror_of="us-east-1/repo")
    for call in (
        lambda: prepare_commits(catalog, "mirror"),
        lambda: prepare_uncommitted(catalog, "mirror"),
    ):
        with pytest.raises(GCReadOnlyError) as info:
            call()
        message = str(info.value)
        assert message.startswith("read-only repository: ")
        assert "us-east-1/repo" in message


# -- prepare_uncommited -----------------------------------------------------------------------


def _uncommitted(catalog: Catalog, location: str) -> list[tuple[str, int]]:
    store = catalog.block_store(catalog.get_repository("repo"))
    prefix = location.removeprefix("mem://repo/")
    rows: list[tuple[str, int]] = []
    for info in store.list(prefix):
        table = pq.read_table(io.BytesIO(store.get(info.key)))
        assert table.schema.names == ["physical_address", "creation_date"]
        rows.extend(zip(*table.to_pydict().values(), strict=True))
    return rows


def test_prepare_uncommitted_lists_every_branch_once_across_pages(clock: Clock) -> None:
    catalog = _lake(clock)
    empty = prepare_uncommitted(catalog, "repo")
    assert empty.location == "" and empty.continuation_token is None
    staged = {}
    for branch in ("main", "dev", "zz"):
        if branch != "main":
            catalog.create_branch("repo", branch, "main")
        for i in range(3):
            stat = catalog.upload_object("repo", branch, f"{branch}/{i}", b"x")
            staged[stat.entry.address] = stat.entry.mtime
    # a staged deletion is no address; a deleted branch's staging is gone with it
    catalog.upload_object("repo", "main", "gone", b"y")
    catalog.delete_object("repo", "main", "gone")
    catalog.create_branch("repo", "doomed", "main")
    catalog.upload_object("repo", "doomed", "d", b"z")
    catalog.delete_branch("repo", "doomed")
    # full addresses: inside the namespace they count (relative), outside they do not
    inside = Entry("mem://repo/data/linked", 1, "c", NOW, address_type=AddressType.FULL)
    outside = Entry("mem://elsewhere/obj", 1, "c", NOW, address_type=AddressType.FULL)
    catalog.stage_objects("repo", "dev", [("in", inside), ("out", outside)])
    staged["data/linked"] = NOW

    pages = []
    token: str | None = None
    while True:
        page = prepare_uncommitted(catalog, "repo", token, page_size=2)
        pages.append(page)
        token = page.continuation_token
        if token is None:
            break
    assert len(pages) == 5  # ten addresses, two a page
    assert {p.run_id for p in pages} == {pages[0].run_id}
    assert all(p.location.endswith(f"/uncommitted/{pages[0].run_id}/uncommitted/") for p in pages)
    rows = _uncommitted(catalog, pages[-1].location)
    assert sorted(rows) == sorted(staged.items())


def test_a_page_always_progresses(clock: Clock) -> None:
    catalog = _lake(clock)
    for i in range(3):
        catalog.upload_object("repo", "main", f"p{i}", b"x")
    page = prepare_uncommitted(catalog, "repo", page_size=1, page_seconds=0)
    assert page.written == 1 and page.continuation_token is not None


def test_a_committed_staging_token_ends_its_branch(clock: Clock) -> None:
    catalog = _lake(clock)
    for i in range(3):
        catalog.upload_object("repo", "main", f"p{i}", b"x")
    first = prepare_uncommitted(catalog, "repo", page_size=1)
    assert first.continuation_token is not None
    catalog.commit("repo", "main", "take the token")
    rest = prepare_uncommitted(catalog, "repo", first.continuation_token, page_size=1)
    assert rest.continuation_token is None and rest.written == 0


@pytest.mark.parametrize(
    "token",
    ["%%%", "bm90IGpzb24=", Position("../x", BranchID("b"), "t", "p").encode()],  # type: ignore[arg-type]
)
def test_bad_continuation_token(clock: Clock, token: str) -> None:
    catalog = _lake(clock)
    with pytest.raises(InvalidContinuationTokenError) as info:
        prepare_uncommitted(catalog, "repo", token)
    assert str(info.value).startswith("invalid continuation token")


def test_public_names() -> None:
    import mirror.gc
    import mirror.spark.gc_storage

    for module in (mirror.gc, mirror.spark.gc_storage):
        assert all(hasattr(module, name) for name in module.__all__), module.__name__

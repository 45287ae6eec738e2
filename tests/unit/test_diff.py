"""Diffs through the public API: two-dot, three-dot and uncommitted, all by object identity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.core import (
    BranchNotFoundError,
    ChunkingParams,
    DiffEntry,
    DiffType,
    Entry,
    InvalidRefError,
    RefNotFoundError,
    WriteStats,
    open_memory,
)
from mirror.core.diff import diff_trees
from tests.conftest import Clock, Lake

ADDED, REMOVED, CHANGED = DiffType.ADDED, DiffType.REMOVED, DiffType.CHANGED


def _kinds(entries: list[DiffEntry]) -> list[tuple[str, DiffType]]:
    return [(d.path, d.type) for d in entries]


def _diff(lake: Lake, left: str, right: str, *, three_dot: bool = False) -> list[DiffEntry]:
    return list(lake.catalog.diff(lake.repo, left, right, three_dot=three_dot))


def _uncommitted(lake: Lake, branch: str = "main", prefix: str = "") -> list[DiffEntry]:
    return list(lake.catalog.diff_uncommitted(lake.repo, branch, prefix))


def _entry(lake: Lake, ref: str, path: str) -> Entry:
    return lake.catalog.stat_object(lake.repo, ref, path).entry


# two-dot


def test_two_dot_diff_reports_added_removed_and_changed(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1", "c": b"1", "e": b"1"})
    lake.write("main", {"b": b"22", "c": None, "d": b"1"})
    diff = _diff(lake, "main~1", "main")
    assert _kinds(diff) == [("b", CHANGED), ("c", REMOVED), ("d", ADDED)]
    b, c, d = diff
    assert (b.left, b.right) == (_entry(lake, "main~1", "b"), _entry(lake, "main", "b"))
    assert (c.left, c.right) == (_entry(lake, "main~1", "c"), None)
    assert (d.left, d.right) == (None, _entry(lake, "main", "d"))

    assert _kinds(_diff(lake, "main", "main~1")) == [("b", CHANGED), ("c", ADDED), ("d", REMOVED)]
    assert _diff(lake, "main", "main") == []
    assert _diff(lake, "main~1", lake.head("main")) == diff


def test_two_dot_diff_from_the_empty_initial_commit(lake: Lake) -> None:
    lake.write("main", {"x/1": b"1", "x/2": b"2"})
    assert _kinds(_diff(lake, "main~1", "main")) == [("x/1", ADDED), ("x/2", ADDED)]
    assert _kinds(_diff(lake, "main", "main~1")) == [("x/1", REMOVED), ("x/2", REMOVED)]


def test_two_dot_diff_ignores_staging_of_a_branch(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.put("main", "staged", b"s")
    lake.rm("main", "a")
    assert _kinds(_diff(lake, "main~1", "main")) == [("a", ADDED)]


def test_reuploading_identical_object_is_not_a_change(lake: Lake) -> None:
    same = {"metadata": {"k": "v"}, "content_type": "text/plain"}
    lake.write("main", {"base": b"0"})
    lake.branch("other")
    lake.put("main", "a", b"same", **same)
    lake.commit("main")
    lake.put("other", "a", b"same", **same)
    lake.commit("other")
    assert _entry(lake, "main", "a").address != _entry(lake, "other", "a").address
    assert _diff(lake, "main", "other") == []
    assert _diff(lake, "other", "main") == []

    lake.put("main", "a", b"same", **same)
    assert _uncommitted(lake) == []
    lake.commit("main", allow_empty=True)
    assert _diff(lake, "main~1", "main") == []


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"metadata": {"k": "1"}}, {"metadata": {"k": "2"}}),
        ({}, {"metadata": {"k": "1"}}),
        ({"content_type": "text/plain"}, {"content_type": "text/csv"}),
    ],
    ids=["metadata-value", "metadata-added", "content-type"],
)
def test_same_bytes_with_other_metadata_is_a_change(
    lake: Lake, first: dict[str, object], second: dict[str, object]
) -> None:
    lake.put("main", "a", b"same", **first)
    lake.commit("main")
    lake.put("main", "a", b"same", **second)
    assert _kinds(_uncommitted(lake)) == [("a", CHANGED)]
    lake.commit("main")
    (diff,) = _diff(lake, "main~1", "main")
    assert (diff.path, diff.type) == ("a", CHANGED)
    assert diff.left is not None and diff.right is not None
    assert diff.left.checksum == diff.right.checksum


def test_two_dot_diff_across_many_ranges(lake: Lake) -> None:
    files = {f"dir{i % 4}/file{i:03d}": b"v%d" % i for i in range(80)}
    lake.write("main", files)
    changed = sorted(files)[3::17]
    removed = sorted(files)[9::23]
    added = [f"dir{i}/new" for i in range(4)] + ["zzz"]
    lake.write(
        "main",
        {
            **{p: b"changed" for p in changed},
            **dict.fromkeys(removed),
            **{p: b"new" for p in added},
        },
    )
    expected = sorted(
        [(p, CHANGED) for p in changed]
        + [(p, REMOVED) for p in removed]
        + [(p, ADDED) for p in added]
    )
    assert _kinds(_diff(lake, "main~1", "main")) == expected


def test_diff_with_bad_refs_names_them(lake: Lake) -> None:
    with pytest.raises(RefNotFoundError) as missing:
        _diff(lake, "main", "nosuch")
    assert "'nosuch'" in str(missing.value)
    with pytest.raises(RefNotFoundError) as early:
        _diff(lake, "main~1", "main")
    assert "'main~1'" in str(early.value)
    with pytest.raises(InvalidRefError) as bad:
        _diff(lake, "main~x", "main")
    assert "'main~x'" in str(bad.value)


# three-dot


def test_three_dot_diff_shows_only_the_right_side_changes_since_the_merge_base(
    lake: Lake,
) -> None:
    lake.write("main", {"a": b"1", "b": b"1", "c": b"1"})
    lake.branch("feature")
    lake.write("feature", {"a": b"2", "f": b"1", "c": None})
    lake.write("main", {"b": b"2", "m": b"1"})

    three = _diff(lake, "main", "feature", three_dot=True)
    assert _kinds(three) == [("a", CHANGED), ("c", REMOVED), ("f", ADDED)]
    assert three[0].left == _entry(lake, "main~1", "a")
    assert three[0].right == _entry(lake, "feature", "a")

    assert _kinds(_diff(lake, "feature", "main", three_dot=True)) == [
        ("b", CHANGED),
        ("m", ADDED),
    ]
    assert _kinds(_diff(lake, "main", "feature")) == [
        ("a", CHANGED),
        ("b", CHANGED),
        ("c", REMOVED),
        ("f", ADDED),
        ("m", REMOVED),
    ]


def test_three_dot_diff_is_empty_once_merged(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.branch("feature")
    lake.write("feature", {"f": b"1"})
    lake.write("main", {"m": b"1"})
    lake.catalog.merge(lake.repo, "feature", "main")
    assert _diff(lake, "main", "feature", three_dot=True) == []
    assert _kinds(_diff(lake, "feature", "main", three_dot=True)) == [("m", ADDED)]
    lake.write("feature", {"f": b"2"})
    assert _kinds(_diff(lake, "main", "feature", three_dot=True)) == [("f", CHANGED)]


def test_three_dot_diff_of_an_ancestor_is_empty(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.write("main", {"a": b"2"})
    assert _diff(lake, "main", "main~1", three_dot=True) == []
    assert _kinds(_diff(lake, "main~1", "main", three_dot=True)) == [("a", CHANGED)]


# uncommitted


def test_uncommitted_diff_reports_staged_changes(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1", "c": b"1", "keep": b"1"})
    lake.put("main", "a", b"2")
    lake.rm("main", "b")
    lake.put("main", "c", b"1")
    lake.put("main", "n", b"new")
    lake.put("main", "tmp", b"t")
    lake.rm("main", "tmp")

    diff = _uncommitted(lake)
    assert _kinds(diff) == [("a", CHANGED), ("b", REMOVED), ("n", ADDED)]
    a, b, n = diff
    assert (a.left, a.right) == (_entry(lake, "main@", "a"), _entry(lake, "main", "a"))
    assert (b.left, b.right) == (_entry(lake, "main@", "b"), None)
    assert (n.left, n.right) == (None, _entry(lake, "main", "n"))
    assert _kinds(_uncommitted(lake, prefix="n")) == [("n", ADDED)]
    assert _uncommitted(lake, prefix="keep") == []

    lake.commit("main")
    assert _uncommitted(lake) == []
    assert lake.tree("main") == {"a": b"2", "c": b"1", "keep": b"1", "n": b"new"}


def test_deleting_an_object_staged_but_never_committed_shows_nothing(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.put("main", "tmp", b"t")
    assert _kinds(_uncommitted(lake)) == [("tmp", ADDED)]
    lake.rm("main", "tmp")
    assert _uncommitted(lake) == []
    assert lake.tree("main") == {"a": b"1"}


def test_uncommitted_diff_of_a_clean_branch_is_empty(lake: Lake) -> None:
    assert _uncommitted(lake) == []
    lake.write("main", {"a": b"1"})
    assert _uncommitted(lake) == []
    lake.branch("side")
    lake.put("side", "s", b"s")
    assert _uncommitted(lake) == []
    assert _kinds(_uncommitted(lake, "side")) == [("s", ADDED)]


def test_uncommitted_diff_of_unknown_branch(lake: Lake) -> None:
    with pytest.raises(BranchNotFoundError) as info:
        _uncommitted(lake, "ghost")
    assert "'ghost'" in str(info.value)


_KEYS = st.sampled_from([f"p{i:02d}" for i in range(20)] + ["a/b", "a/c", "zz"])
_TREE = st.dictionaries(_KEYS, st.sampled_from([b"1", b"2", b"3"]))


def _model_diff(old: dict[str, bytes], new: dict[str, bytes]) -> list[tuple[str, DiffType]]:
    kinds = []
    for path in sorted(old.keys() | new.keys()):
        if path not in new:
            kinds.append((path, REMOVED))
        elif path not in old:
            kinds.append((path, ADDED))
        elif old[path] != new[path]:
            kinds.append((path, CHANGED))
    return kinds


@settings(max_examples=40, deadline=None)
@given(old=_TREE, new=_TREE, raggedness=st.sampled_from([2, 1024]))
def test_diffs_match_a_model_for_any_trees(
    old: dict[str, bytes], new: dict[str, bytes], raggedness: int
) -> None:
    clock = Clock()
    lake = Lake(open_memory(clock=clock, chunking=ChunkingParams(raggedness=raggedness)), clock)
    lake.catalog.create_repository(lake.repo, "mem://repo")
    for path, data in old.items():
        lake.put("main", path, data)
    lake.commit("main", "old", allow_empty=True)
    for path in old.keys() - new.keys():
        lake.rm("main", path)
    for path, data in new.items():
        lake.put("main", path, data)
    expected = _model_diff(old, new)

    assert _kinds(_uncommitted(lake)) == expected
    lake.commit("main", "new", allow_empty=True)
    assert _kinds(_diff(lake, "main~1", "main")) == expected
    assert _kinds(_diff(lake, "main", "main~1")) == _model_diff(new, old)
    assert _uncommitted(lake) == []


# seeking


_SEEKS = st.lists(
    st.one_of(
        st.just("next"), st.sampled_from(["", "a/", "a/c", "b", "p05", "p1", "p19", "zz", "~"])
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(old=_TREE, new=_TREE, steps=_SEEKS, raggedness=st.sampled_from([2, 1024]))
def test_a_seeking_diff_matches_the_whole_diff_from_each_key(
    old: dict[str, bytes], new: dict[str, bytes], steps: list[str], raggedness: int
) -> None:
    clock = Clock()
    lake = Lake(open_memory(clock=clock, chunking=ChunkingParams(raggedness=raggedness)), clock)
    lake.catalog.create_repository(lake.repo, "mem://repo")
    for path, data in old.items():
        lake.put("main", path, data)
    lake.commit("main", "old", allow_empty=True)
    for path in old.keys() - new.keys():
        lake.rm("main", path)
    for path, data in new.items():
        lake.put("main", path, data)
    lake.commit("main", "new", allow_empty=True)
    whole = _diff(lake, "main~1", "main")
    diff = lake.catalog.diff(lake.repo, "main~1", "main")
    at = 0
    for step in [*steps, "next", "next"]:
        if step == "next":
            assert next(diff, None) == (whole[at] if at < len(whole) else None)
            at = min(at + 1, len(whole))
        else:
            # a seek only ever moves ahead
            at = max(at, next((i for i, d in enumerate(whole) if d.path >= step), len(whole)))
            diff.seek(step)


def test_seeking_past_a_folder_reads_none_of_its_ranges() -> None:
    catalog = open_memory(chunking=ChunkingParams(raggedness=2))
    catalog.create_repository("repo", "mem://repo")
    files = [(f"big/{i:04d}", Entry(f"a{i}", 1, f"{i:032x}", 0)) for i in range(400)]
    catalog.commit_tree(
        "repo",
        "main",
        [("a", Entry("a", 1, "0" * 32, 0)), *files, ("z", Entry("z", 1, "1" * 32, 0))],
        "all",
    )
    repo = catalog.get_repository("repo")
    store = catalog.committed(repo)
    tree = catalog.get_commit("repo", catalog.get_branch("repo", "main").commit_id).metarange_id
    ranges = len(store.read_metarange(tree))
    assert ranges > 20

    stats = WriteStats()
    diff = diff_trees(store, "", tree, stats)
    assert next(diff).path == "a"
    assert next(diff).path == "big/0000"
    diff.seek("big0")  # the least key past every "big/..."
    assert [d.path for d in diff] == ["z"]
    assert stats.ranges_read <= 3 < ranges

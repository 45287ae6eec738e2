"""Three-way merge through the public API: the lakeFS merge table, strategies, merge commits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.core import (
    MERGE_STRATEGY_KEY,
    BranchNotFoundError,
    ChunkingParams,
    DirtyBranchError,
    Entry,
    InvalidRefError,
    MergeConflictError,
    MergeStrategy,
    NoChangesError,
    ObjectNotFoundError,
    RefNotFoundError,
    open_memory,
)
from tests.conftest import Clock, Lake

A, B, C = b"A", b"B", b"C"
X = None  # the path is absent
CONFLICT = "conflict"

# (base, source, destination, result) exactly as in the lakeFS merge table
MERGE_TABLE = {
    "unchanged": (A, A, A, A),
    "changed-both-same-way": (A, B, B, B),
    "changed-both-differently": (A, B, C, CONFLICT),
    "changed-in-destination": (A, A, B, B),
    "changed-in-source": (A, B, A, B),
    "deleted-both": (A, X, X, X),
    "changed-in-source-deleted-in-destination": (A, B, X, CONFLICT),
    "deleted-in-source-changed-in-destination": (A, X, B, CONFLICT),
    "deleted-in-destination": (A, A, X, X),
    "deleted-in-source": (A, X, A, X),
}

STRATEGIES = [None, "source-wins", "dest-wins"]


def _set(lake: Lake, branch: str, path: str, value: bytes | None, base: bytes | None) -> None:
    """Make ``path`` on ``branch`` hold ``value``, touching nothing when it equals ``base``."""
    if value == base:
        return
    if value is None:
        lake.rm(branch, path)
    else:
        lake.put(branch, path, value)


def _entry(lake: Lake, ref: str, path: str) -> Entry | None:
    try:
        return lake.catalog.stat_object(lake.repo, ref, path).entry
    except ObjectNotFoundError:
        return None


def _diverge(
    lake: Lake,
    base: dict[str, bytes],
    source: dict[str, bytes | None],
    dest: dict[str, bytes | None],
) -> tuple[str, str]:
    """Commit ``base`` on main, then ``source`` on a new branch "src" and ``dest`` on main.

    Each side also adds a path of its own, so that neither side's tree equals the base's.
    """
    lake.write("main", base, "base")
    lake.branch("src")
    for path, value in source.items():
        _set(lake, "src", path, value, base.get(path))
    lake.put("src", "only-in-source", b"s")
    src = lake.commit("src", "source side")
    for path, value in dest.items():
        _set(lake, "main", path, value, base.get(path))
    lake.put("main", "only-in-destination", b"d")
    dst = lake.commit("main", "destination side")
    return src.id, dst.id


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(
    ("base", "source", "dest", "result"), list(MERGE_TABLE.values()), ids=list(MERGE_TABLE)
)
def test_merge_table_row(
    lake: Lake,
    base: bytes,
    source: bytes | None,
    dest: bytes | None,
    result: bytes | str | None,
    strategy: str | None,
) -> None:
    src, dst = _diverge(lake, {"f": base, "untouched": b"u"}, {"f": source}, {"f": dest})
    src_entry, dst_entry = _entry(lake, "src", "f"), _entry(lake, "main", "f")
    dest_tree = lake.tree("main")

    if result == CONFLICT and strategy is None:
        with pytest.raises(MergeConflictError) as info:
            lake.catalog.merge(lake.repo, "src", "main")
        assert info.value.paths == ["f"]
        assert "'f'" in str(info.value)
        assert lake.head("main") == dst
        assert lake.tree("main") == dest_tree
        return

    merged = lake.catalog.merge(lake.repo, "src", "main", strategy=strategy).commit
    if result == CONFLICT:
        winner = source if strategy == "source-wins" else dest
        want = src_entry if strategy == "source-wins" else dst_entry
    else:
        winner = result  # type: ignore[assignment]
        want = dst_entry if result == dest else src_entry

    expected = {"untouched": b"u", "only-in-source": b"s", "only-in-destination": b"d"}
    if winner is not None:
        expected["f"] = winner
    assert lake.tree("main") == expected
    assert lake.head("main") == merged.id
    assert merged.parents == (dst, src)
    got = _entry(lake, "main", "f")
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert got.identity == want.identity
        one_sided = (
            src_entry is None or dst_entry is None or src_entry.identity != dst_entry.identity
        )
        if one_sided:
            assert got == want  # the very object of the winning side, not a copy


@pytest.mark.parametrize("strategy", ["source-wins", "dest-wins"])
def test_merge_table_all_rows_at_once(lake: Lake, strategy: str) -> None:
    base = {name: row[0] for name, row in MERGE_TABLE.items()}
    src = {name: row[1] for name, row in MERGE_TABLE.items()}
    dst = {name: row[2] for name, row in MERGE_TABLE.items()}
    _, head_dst = _diverge(lake, base, src, dst)
    conflicts = sorted(n for n, row in MERGE_TABLE.items() if row[3] == CONFLICT)

    with pytest.raises(MergeConflictError) as info:
        lake.catalog.merge(lake.repo, "src", "main")
    assert info.value.paths == conflicts
    for name in conflicts:
        assert repr(name) in str(info.value)
    assert lake.head("main") == head_dst

    lake.catalog.merge(lake.repo, "src", "main", strategy=strategy)
    tree = lake.tree("main")
    for name, (_, source, dest, result) in MERGE_TABLE.items():
        if result == CONFLICT:
            want = source if strategy == "source-wins" else dest
        else:
            want = result  # type: ignore[assignment]
        assert tree.get(name) == want, name
    assert tree["only-in-source"] == b"s"
    assert tree["only-in-destination"] == b"d"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_both_sides_add_same_path_with_different_content_conflicts(
    lake: Lake, strategy: str | None
) -> None:
    src, dst = _diverge(lake, {"old": b"o"}, {"new": b"from source"}, {"new": b"from dest"})
    if strategy is None:
        with pytest.raises(MergeConflictError) as info:
            lake.catalog.merge(lake.repo, "src", "main")
        assert info.value.paths == ["new"]
        assert "'new'" in str(info.value)
        assert lake.head("main") == dst
        return
    lake.catalog.merge(lake.repo, "src", "main", strategy=strategy)
    want = b"from source" if strategy == "source-wins" else b"from dest"
    assert lake.catalog.read_object(lake.repo, "main", "new") == want
    assert src != dst


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_both_sides_add_same_path_with_same_content_merges(
    lake: Lake, strategy: str | None
) -> None:
    _diverge(lake, {"old": b"o"}, {"new": b"same"}, {"new": b"same"})
    lake.catalog.merge(lake.repo, "src", "main", strategy=strategy)
    assert lake.tree("main") == {
        "old": b"o",
        "new": b"same",
        "only-in-source": b"s",
        "only-in-destination": b"d",
    }


def test_same_bytes_with_different_metadata_conflict(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.put("src", "f", B, metadata={"k": "source"})
    lake.commit("src")
    lake.put("main", "f", B, metadata={"k": "dest"})
    lake.commit("main")
    with pytest.raises(MergeConflictError) as info:
        lake.catalog.merge(lake.repo, "src", "main")
    assert info.value.paths == ["f"]


def test_every_conflicting_path_is_reported_sorted(lake: Lake) -> None:
    filler = {f"fill/{i:03d}": b"x%d" % i for i in range(40)}
    conflicting = ["a/one", "m/two", "z/three"]
    base = {**filler, **dict.fromkeys(conflicting, A)}
    source: dict[str, bytes | None] = {"a/one": B, "m/two": None, "z/three": B, "fill/007": B}
    dest: dict[str, bytes | None] = {"a/one": C, "m/two": C, "z/three": None, "fill/020": C}
    _, dst = _diverge(lake, base, source, dest)
    with pytest.raises(MergeConflictError) as info:
        lake.catalog.merge(lake.repo, "src", "main")
    assert info.value.paths == conflicting
    for path in conflicting:
        assert repr(path) in str(info.value)
    assert lake.head("main") == dst
    assert lake.catalog.read_object(lake.repo, "main", "fill/007") == filler["fill/007"]


@pytest.mark.parametrize(
    ("strategy", "recorded"),
    [
        (None, "default"),
        ("", "default"),
        ("source-wins", "source-wins"),
        ("dest-wins", "dest-wins"),
        (MergeStrategy.SOURCE_WINS, "source-wins"),
        (MergeStrategy.DEST_WINS, "dest-wins"),
    ],
)
def test_merge_commit_records_parents_strategy_and_metadata(
    lake: Lake, strategy: str | None, recorded: str
) -> None:
    src, dst = _diverge(lake, {"f": A}, {"g": B}, {"h": C})
    merged = lake.catalog.merge(
        lake.repo,
        "src",
        "main",
        strategy=strategy,
        committer="merger",
        message="bring src in",
        metadata={"ticket": "42"},
    ).commit
    assert merged.parents == (dst, src)
    assert merged.metadata == {"ticket": "42", MERGE_STRATEGY_KEY: recorded}
    assert merged.committer == "merger"
    assert merged.message == "bring src in"
    assert lake.catalog.get_commit(lake.repo, merged.id) == merged
    assert merged.compute_id() == merged.id


def test_default_merge_message_names_source_and_destination(lake: Lake) -> None:
    _diverge(lake, {"f": A}, {"g": B}, {"h": C})
    merged = lake.catalog.merge(lake.repo, "src", "main").commit
    assert "'src'" in merged.message
    assert "'main'" in merged.message


def test_merge_into_unchanged_destination_still_makes_a_merge_commit(lake: Lake) -> None:
    base = lake.write("main", {"f": A, "g": A})
    lake.branch("src")
    src = lake.write("src", {"f": B, "g": None, "h": C})
    merged = lake.catalog.merge(lake.repo, "src", "main").commit
    assert merged.parents == (base.id, src.id)
    assert merged.metarange_id == src.metarange_id
    assert lake.tree("main") == {"f": B, "h": C}


def test_merge_does_not_take_uncommitted_changes_of_the_source(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    lake.put("src", "staged-only", C)
    lake.catalog.merge(lake.repo, "src", "main")
    assert lake.tree("main") == {"f": A, "g": B}


def test_merge_source_may_be_any_ref_expression(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    first = lake.write("src", {"g": B})
    lake.write("src", {"h": C})
    merged = lake.catalog.merge(lake.repo, "src~1", "main").commit
    assert merged.parents[1] == first.id
    assert lake.tree("main") == {"f": A, "g": B}


def test_squash_merge_has_only_the_destination_parent(lake: Lake) -> None:
    dst = lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    merged = lake.catalog.merge(lake.repo, "src", "main", squash=True).commit
    assert merged.parents == (dst.id,)
    assert lake.tree("main") == {"f": A, "g": B}


@pytest.mark.parametrize("staged", ["upload", "delete"])
def test_merge_into_dirty_branch_is_refused(lake: Lake, staged: str) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    head = lake.head("main")
    if staged == "upload":
        lake.put("main", "wip", C)
    else:
        lake.rm("main", "f")
    with pytest.raises(DirtyBranchError) as info:
        lake.catalog.merge(lake.repo, "src", "main")
    assert "'main'" in str(info.value)
    assert lake.head("main") == head
    assert [d.path for d in lake.catalog.diff_uncommitted(lake.repo, "main")] == [
        "wip" if staged == "upload" else "f"
    ]


def test_merge_of_a_source_without_changes_needs_allow_empty(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    head = lake.write("main", {"g": B})
    with pytest.raises(NoChangesError) as info:
        lake.catalog.merge(lake.repo, "src", "main")
    assert "'src'" in str(info.value)
    assert lake.head("main") == head.id

    merged = lake.catalog.merge(lake.repo, "src", "main", allow_empty=True).commit
    assert merged.parents == (head.id, lake.head("src"))
    assert merged.metarange_id == head.metarange_id
    assert lake.head("main") == merged.id


def test_merge_of_a_source_whose_changes_cancel_out_is_empty(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    lake.write("src", {"g": None})
    with pytest.raises(NoChangesError, match="'src'"):
        lake.catalog.merge(lake.repo, "src", "main")


def test_merging_the_same_source_twice_brings_no_changes(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    lake.write("main", {"h": C})
    lake.catalog.merge(lake.repo, "src", "main")
    with pytest.raises(NoChangesError, match="'src'"):
        lake.catalog.merge(lake.repo, "src", "main")


def test_merge_back_and_forth(lake: Lake) -> None:
    lake.write("main", {"f": A})
    lake.branch("src")
    lake.write("src", {"g": B})
    lake.write("main", {"h": C})
    lake.catalog.merge(lake.repo, "src", "main")
    lake.catalog.merge(lake.repo, "main", "src")
    assert lake.tree("src") == lake.tree("main") == {"f": A, "g": B, "h": C}
    lake.write("src", {"f": B})
    lake.catalog.merge(lake.repo, "src", "main")
    assert lake.tree("main") == {"f": B, "g": B, "h": C}


def test_merge_with_unknown_strategy_is_refused(lake: Lake) -> None:
    _diverge(lake, {"f": A}, {"g": B}, {"h": C})
    with pytest.raises(InvalidRefError) as info:
        lake.catalog.merge(lake.repo, "src", "main", strategy="theirs")
    assert "'theirs'" in str(info.value)


def test_merge_from_unknown_source_or_into_unknown_branch(lake: Lake) -> None:
    lake.write("main", {"f": A})
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.merge(lake.repo, "nosuch", "main")
    assert "'nosuch'" in str(info.value)
    with pytest.raises(BranchNotFoundError) as binfo:
        lake.catalog.merge(lake.repo, "main", "nobranch")
    assert "'nobranch'" in str(binfo.value)


def _model_merge(
    rows: dict[str, tuple[bytes | None, bytes | None, bytes | None]], strategy: str | None
) -> tuple[dict[str, bytes], list[str]]:
    """Return the merged tree and the conflicting paths that the lakeFS table prescribes."""
    merged: dict[str, bytes] = {}
    conflicts = []
    for path, (base, source, dest) in sorted(rows.items()):
        if source == base or source == dest:
            value = dest
        elif dest == base:
            value = source
        elif strategy == "source-wins":
            value = source
        elif strategy == "dest-wins":
            value = dest
        else:
            conflicts.append(path)
            continue
        if value is not None:
            merged[path] = value
    return merged, conflicts


_VALUE = st.sampled_from([None, A, B, C])


@settings(max_examples=60, deadline=None)
@given(
    rows=st.dictionaries(
        st.sampled_from([f"k{i:02d}" for i in range(16)] + ["d/x", "d/y", "z"]),
        st.tuples(_VALUE, _VALUE, _VALUE),
        min_size=1,
    ),
    strategy=st.sampled_from(STRATEGIES),
    raggedness=st.sampled_from([2, 1024]),
)
def test_merge_matches_the_table_for_any_trees(
    rows: dict[str, tuple[bytes | None, bytes | None, bytes | None]],
    strategy: str | None,
    raggedness: int,
) -> None:
    clock = Clock()
    lake = Lake(open_memory(clock=clock, chunking=ChunkingParams(raggedness=raggedness)), clock)
    lake.catalog.create_repository(lake.repo, "mem://repo")
    for path, (base, _, _) in rows.items():
        _set(lake, "main", path, base, None)
    lake.commit("main", "base", allow_empty=True)
    lake.branch("src")
    for path, (base, source, dest) in rows.items():
        _set(lake, "src", path, source, base)
        _set(lake, "main", path, dest, base)
    src = lake.commit("src", "source", allow_empty=True)
    dst = lake.commit("main", "destination", allow_empty=True)
    merged, conflicts = _model_merge(rows, strategy)

    if all(source == base for base, source, _ in rows.values()):
        with pytest.raises(NoChangesError, match="'src'"):
            lake.catalog.merge(lake.repo, "src", "main", strategy=strategy)
    elif conflicts and strategy is None:
        with pytest.raises(MergeConflictError) as info:
            lake.catalog.merge(lake.repo, "src", "main")
        assert info.value.paths == conflicts
        assert lake.head("main") == dst.id
    else:
        commit = lake.catalog.merge(lake.repo, "src", "main", strategy=strategy).commit
        assert commit.parents == (dst.id, src.id)
        assert lake.tree("main") == merged

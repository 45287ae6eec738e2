"""Ref expressions and tags through the public API: resolution order, modifiers, errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mirror.core import (
    CommitID,
    InvalidNameError,
    InvalidRefError,
    ObjectNotFoundError,
    RefNotFoundError,
    ResolvedRef,
    TagExistsError,
    TagNotFoundError,
)

if TYPE_CHECKING:
    from tests.conftest import Lake


def _history(lake: Lake) -> dict[str, CommitID]:
    """Build main: c0 - c1 - c2 - M - c3 where M merges feature (c1 - f1 - f2) as second parent."""
    ids = {"c0": lake.head("main")}
    ids["c1"] = lake.write("main", {"a": b"1"}, "c1").id
    lake.branch("feature")
    ids["f1"] = lake.write("feature", {"b": b"1"}, "f1").id
    ids["f2"] = lake.write("feature", {"b": b"2"}, "f2").id
    ids["c2"] = lake.write("main", {"a": b"2"}, "c2").id
    lake.clock.tick()
    ids["M"] = lake.catalog.merge(lake.repo, "feature", "main").commit.id
    ids["c3"] = lake.write("main", {"a": b"3"}, "c3").id
    return ids


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("main~0", "c3"),
        ("main^0", "c3"),
        ("main~", "M"),
        ("main~1", "M"),
        ("main^", "M"),
        ("main^1", "M"),
        ("main~2", "c2"),
        ("main^^", "c2"),
        ("main~~", "c2"),
        ("main~1~1", "c2"),
        ("main~3", "c1"),
        ("main~4", "c0"),
        ("main~2~2", "c0"),
        ("main~1^2", "f2"),
        ("main^^2", "f2"),
        ("main~1^2^0", "f2"),
        ("main~1^2~0", "f2"),
        ("main~1^2~1", "f1"),
        ("main~1^2^", "f1"),
        ("main~1^2~2", "c1"),
        ("main~1^1", "c2"),
        ("main~1^1~1", "c1"),
        ("main~1^2~3", "c0"),
        ("main~10", None),
        ("feature~2", "c1"),
        ("feature^0", "f2"),
    ],
)
def test_ancestry_modifiers(lake: Lake, expr: str, expected: str | None) -> None:
    ids = _history(lake)
    if expected is None:
        with pytest.raises(RefNotFoundError) as info:
            lake.catalog.resolve_ref(lake.repo, expr)
        assert repr(expr) in str(info.value)
        return
    assert lake.catalog.resolve_ref(lake.repo, expr) == ResolvedRef(ids[expected])


@pytest.mark.parametrize(
    "expr",
    ["main~5", "main~4^", "main~4~", "main^2", "main~1^3", "main~1^2~4", "feature~3^", "main^^^3"],
)
def test_not_enough_ancestors_is_not_found(lake: Lake, expr: str) -> None:
    _history(lake)
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.resolve_ref(lake.repo, expr)
    assert repr(expr) in str(info.value)


def test_initial_commit_has_no_parent(lake: Lake) -> None:
    for expr in ("main^", "main~", "main~1", "main^1"):
        with pytest.raises(RefNotFoundError) as info:
            lake.catalog.resolve_ref(lake.repo, expr)
        assert repr(expr) in str(info.value)


def test_branch_resolves_to_head_with_staging(lake: Lake) -> None:
    ids = _history(lake)
    assert lake.catalog.resolve_ref(lake.repo, "main") == ResolvedRef(ids["c3"], "main", True)
    assert lake.catalog.resolve_ref(lake.repo, "main$") == ResolvedRef(ids["c3"], "main", True)
    assert lake.catalog.resolve_ref(lake.repo, "main@") == ResolvedRef(ids["c3"], "main", False)
    assert lake.catalog.resolve_ref(lake.repo, "feature") == ResolvedRef(ids["f2"], "feature", True)


def test_tag_full_id_and_prefixes_resolve_to_commits(lake: Lake) -> None:
    ids = _history(lake)
    lake.catalog.create_tag(lake.repo, "v1", "main~3")
    f1 = ids["f1"]
    assert lake.catalog.resolve_ref(lake.repo, "v1") == ResolvedRef(ids["c1"])
    assert lake.catalog.resolve_ref(lake.repo, "v1~1") == ResolvedRef(ids["c0"])
    assert lake.catalog.resolve_ref(lake.repo, f1) == ResolvedRef(f1)
    assert lake.catalog.resolve_ref(lake.repo, f1[:12]) == ResolvedRef(f1)
    assert lake.catalog.resolve_ref(lake.repo, f1[:12].upper()) == ResolvedRef(f1)
    assert lake.catalog.resolve_ref(lake.repo, f1[:12] + "~1") == ResolvedRef(ids["c1"])
    assert lake.catalog.resolve_ref(lake.repo, ids["M"] + "^2") == ResolvedRef(ids["f2"])


def test_shortest_unique_prefix_resolves_and_ambiguous_one_does_not(lake: Lake) -> None:
    ids = list(_history(lake).values())
    while len({c[0] for c in ids}) == len(ids):
        ids.append(lake.commit("main", "filler", allow_empty=True).id)
    by_digit: dict[str, list[CommitID]] = {}
    for c in ids:
        by_digit.setdefault(c[0], []).append(c)
    shared = next(d for d, cs in by_digit.items() if len(cs) > 1)
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.resolve_ref(lake.repo, shared)
    assert repr(shared) in str(info.value)
    for reader in (
        lambda: lake.catalog.stat_object(lake.repo, shared, "a"),
        lambda: lake.catalog.read_object(lake.repo, shared, "a"),
        lambda: lake.catalog.list_objects(lake.repo, shared),
    ):
        with pytest.raises(RefNotFoundError) as info:
            reader()
        assert repr(shared) in str(info.value)

    for c in by_digit[shared]:
        length = next(
            n for n in range(2, 65) if sum(o.startswith(c[:n]) for o in by_digit[shared]) == 1
        )
        assert lake.resolve(c[:length]) == c


def test_prefix_matching_no_commit_is_not_found(lake: Lake) -> None:
    ids = _history(lake).values()
    unused = next(
        p for p in (f"{i:02x}" for i in range(256)) if not any(c.startswith(p) for c in ids)
    )
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.resolve_ref(lake.repo, unused)
    assert repr(unused) in str(info.value)


def test_unknown_name_is_not_found(lake: Lake) -> None:
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.resolve_ref(lake.repo, "nosuch")
    assert "'nosuch'" in str(info.value)


def test_full_commit_id_wins_over_a_branch_of_that_name(lake: Lake) -> None:
    ids = _history(lake)
    c1 = ids["c1"]
    lake.catalog.create_branch(lake.repo, c1, ids["c0"])
    lake.put(c1, "staged", b"s")
    assert lake.catalog.resolve_ref(lake.repo, c1) == ResolvedRef(c1)
    assert lake.tree(c1) == {"a": b"1"}


def test_branch_named_like_a_prefix_shadows_the_commit(lake: Lake) -> None:
    ids = _history(lake)
    prefix = ids["f1"][:6]
    assert lake.resolve(prefix) == ids["f1"]
    lake.catalog.create_branch(lake.repo, prefix, ids["c0"])
    assert lake.catalog.resolve_ref(lake.repo, prefix) == ResolvedRef(ids["c0"], prefix, True)
    assert lake.resolve(ids["f1"][:7]) == ids["f1"]


def test_tag_named_like_a_prefix_shadows_the_commit(lake: Lake) -> None:
    ids = _history(lake)
    prefix = ids["f1"][:6]
    lake.catalog.create_tag(lake.repo, prefix, ids["c0"])
    assert lake.catalog.resolve_ref(lake.repo, prefix) == ResolvedRef(ids["c0"])


def test_branch_wins_over_tag_of_the_same_name(lake: Lake) -> None:
    ids = _history(lake)
    lake.catalog.create_tag(lake.repo, "dup", ids["c1"])
    lake.catalog.create_branch(lake.repo, "dup", ids["c2"])
    assert lake.catalog.resolve_ref(lake.repo, "dup") == ResolvedRef(ids["c2"], "dup", True)
    assert lake.catalog.resolve_ref(lake.repo, "dup~1") == ResolvedRef(ids["c1"])
    lake.catalog.delete_branch(lake.repo, "dup")
    assert lake.catalog.resolve_ref(lake.repo, "dup") == ResolvedRef(ids["c1"])


def test_committed_view_hides_staging(lake: Lake) -> None:
    lake.write("main", {"a": b"committed", "gone": b"g"})
    lake.put("main", "a", b"staged")
    lake.put("main", "new", b"n")
    lake.rm("main", "gone")
    cat, repo = lake.catalog, lake.repo

    with pytest.raises(ObjectNotFoundError) as info:
        cat.stat_object(repo, "main@", "new")
    assert "'new'" in str(info.value)
    assert cat.stat_object(repo, "main", "new").entry.size == 1
    assert cat.stat_object(repo, "main$", "new").entry.size == 1

    assert cat.read_object(repo, "main@", "a") == b"committed"
    assert cat.read_object(repo, "main", "a") == b"staged"
    assert cat.read_object(repo, "main$", "a") == b"staged"
    assert cat.read_object(repo, "main@", "gone") == b"g"
    with pytest.raises(ObjectNotFoundError, match="'gone'"):
        cat.read_object(repo, "main", "gone")

    def paths(ref: str) -> list[str]:
        return [o.path for o in cat.list_objects(repo, ref).objects]

    assert paths("main@") == ["a", "gone"]
    assert paths("main") == paths("main$") == ["a", "new"]


def test_ancestry_modifiers_read_committed_data_only(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.write("main", {"a": b"2"})
    lake.put("main", "a", b"staged")
    assert lake.catalog.read_object(lake.repo, "main~0", "a") == b"2"
    assert lake.catalog.read_object(lake.repo, "main^0", "a") == b"2"
    assert lake.catalog.read_object(lake.repo, "main~1", "a") == b"1"
    assert lake.tree("main~2") == {}


@pytest.mark.parametrize("modifier", ["@", "$"])
def test_branch_modifier_on_a_tag_or_commit_is_invalid(lake: Lake, modifier: str) -> None:
    ids = _history(lake)
    lake.catalog.create_tag(lake.repo, "v1", "main")
    for base in ("v1", ids["c1"], ids["c1"][:10]):
        expr = base + modifier
        with pytest.raises(InvalidRefError) as info:
            lake.catalog.resolve_ref(lake.repo, expr)
        assert repr(expr) in str(info.value)
        with pytest.raises(InvalidRefError) as info:
            lake.catalog.stat_object(lake.repo, expr, "a")
        assert repr(expr) in str(info.value)


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "~1",
        "^",
        "@",
        "main~x",
        "main^-1",
        "main~1.5",
        "main^\u0661",
        "main@1",
        "main$x",
        "main@@",
        "main@~1",
        "main~1@",
        "main$@",
        "main^$",
        "ma in",
        "main\t",
        "main\x00",
    ],
)
def test_malformed_ref_is_invalid_and_named(lake: Lake, expr: str) -> None:
    lake.write("main", {"a": b"1"})
    cat, repo = lake.catalog, lake.repo
    for call in (
        lambda: cat.resolve_ref(repo, expr),
        lambda: cat.stat_object(repo, expr, "a"),
        lambda: cat.read_object(repo, expr, "a"),
        lambda: cat.list_objects(repo, expr),
    ):
        with pytest.raises(InvalidRefError) as info:
            call()
        assert repr(expr) in str(info.value)


@pytest.mark.parametrize("expr", ["nosuch", "main~9", "main^2", "main~1^"])
def test_reads_at_unresolvable_ref_are_not_found(lake: Lake, expr: str) -> None:
    lake.write("main", {"a": b"1"})
    cat, repo = lake.catalog, lake.repo
    for call in (
        lambda: cat.stat_object(repo, expr, "a"),
        lambda: cat.read_object(repo, expr, "a"),
        lambda: cat.list_objects(repo, expr),
    ):
        with pytest.raises(RefNotFoundError) as info:
            call()
        assert repr(expr) in str(info.value)


def test_reads_at_tag_commit_and_prefix(lake: Lake) -> None:
    first = lake.write("main", {"a": b"1"})
    lake.catalog.create_tag(lake.repo, "v1", "main")
    lake.write("main", {"a": b"2", "b": b"2"})
    for ref in ("v1", first.id, first.id[:9], "main~1", "main^"):
        assert lake.tree(ref) == {"a": b"1"}, ref
        assert lake.catalog.stat_object(lake.repo, ref, "a").entry.size == 1
        with pytest.raises(ObjectNotFoundError, match="'b'"):
            lake.catalog.stat_object(lake.repo, ref, "b")


# tags


def test_tag_is_immutable(lake: Lake) -> None:
    first = lake.write("main", {"a": b"1"})
    assert lake.catalog.create_tag(lake.repo, "v1", "main") == first.id
    second = lake.write("main", {"a": b"2"})
    with pytest.raises(TagExistsError) as info:
        lake.catalog.create_tag(lake.repo, "v1", "main")
    assert "'v1'" in str(info.value)
    assert lake.catalog.get_tag(lake.repo, "v1") == first.id
    assert lake.resolve("v1") == first.id
    assert list(lake.catalog.list_tags(lake.repo)) == [("v1", first.id)]

    lake.catalog.delete_tag(lake.repo, "v1")
    with pytest.raises(TagNotFoundError) as missing:
        lake.catalog.get_tag(lake.repo, "v1")
    assert "'v1'" in str(missing.value)
    assert lake.catalog.create_tag(lake.repo, "v1", "main") == second.id
    assert lake.catalog.get_tag(lake.repo, "v1") == second.id


def test_tag_on_ref_expression_and_branch_with_staging(lake: Lake) -> None:
    ids = _history(lake)
    assert lake.catalog.create_tag(lake.repo, "side", "main~1^2~1") == ids["f1"]
    assert lake.catalog.get_tag(lake.repo, "side") == ids["f1"]
    lake.put("main", "staged", b"s")
    assert lake.catalog.create_tag(lake.repo, "head", "main") == ids["c3"]
    assert "staged" not in lake.tree("head")
    lake.write("main", {"a": b"moved"})
    assert lake.catalog.get_tag(lake.repo, "head") == ids["c3"]
    assert lake.catalog.read_object(lake.repo, "head", "a") == b"3"


def test_tag_on_unknown_ref_is_not_created(lake: Lake) -> None:
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.create_tag(lake.repo, "v1", "main~3")
    assert "'main~3'" in str(info.value)
    with pytest.raises(TagNotFoundError, match="'v1'"):
        lake.catalog.get_tag(lake.repo, "v1")


def test_tag_errors_name_the_tag(lake: Lake) -> None:
    with pytest.raises(TagNotFoundError) as missing:
        lake.catalog.delete_tag(lake.repo, "ghost")
    assert "'ghost'" in str(missing.value)
    with pytest.raises(InvalidNameError) as bad:
        lake.catalog.create_tag(lake.repo, "bad^name", "main")
    assert "'bad^name'" in str(bad.value)
    with pytest.raises(InvalidRefError) as badref:
        lake.catalog.create_tag(lake.repo, "v1", "main~x")
    assert "'main~x'" in str(badref.value)

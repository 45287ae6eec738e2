"""Branch protection in the core: gobwas/glob patterns, rules with ETags, what they refuse."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.core import Catalog, open_memory
from mirror.core.errors import (
    ProtectedBranchCommitError,
    ProtectedBranchError,
    ProtectedBranchWriteError,
)
from mirror.core.model import Entry
from mirror.core.protection import (
    InvalidPatternError,
    RuleExistsError,
    RuleNotFoundError,
    RulesChangedError,
    add_rule,
    compile_pattern,
    delete_rule,
    get_rules,
    protecting_pattern,
    set_rules,
)
from tests.conftest import Clock

# (pattern, names it matches, names it does not), as gobwas/glob compiled without separators
GLOBS = [
    ("main", ["main"], ["mainline", "xmain", "Main", ""]),
    ("*", ["", "main", "a/b/c"], []),
    ("release-*", ["release-", "release-1.0", "release-a/b"], ["release", "pre-release-1"]),
    ("*/prod", ["team/prod", "a/b/prod", "/prod"], ["prod", "team/prod2"]),
    ("**", ["", "x/y"], []),
    ("v?", ["v1", "vx", "v/"], ["v", "v10"]),
    ("[abc]-*", ["a-1", "c-"], ["d-1", "ab-1", "-1"]),
    ("[!abc]x", ["dx", "-x", "/x"], ["ax", "x", "ddx"]),
    ("[a-c]1", ["a1", "b1", "c1"], ["d1", "A1", "-1"]),
    ("[!a-c]1", ["d1", "Z1"], ["b1", "1"]),
    ("[z-a]", [], ["z", "a", "m"]),
    ("[]x", [], ["x", "]x"]),
    ("[!]x", ["ax", "]x"], ["x"]),
    ("{main,master}", ["main", "master"], ["mai", "mainmaster", "{main,master}"]),
    ("{dev,feat-*}/x", ["dev/x", "feat-a/b/x"], ["feat/x", "devx"]),
    ("{a,{b,c}d}", ["a", "bd", "cd"], ["b", "ad"]),
    ("{,x}y", ["y", "xy"], ["xxy"]),
    ("a,b}", ["a,b}"], ["a", "b"]),
    (r"\*", ["*"], ["a", "\\*"]),
    (r"a\?", ["a?"], ["ab"]),
    (r"[\]]", ["]"], ["\\"]),
    ("a.b+c", ["a.b+c"], ["aXb+c", "a.bbc"]),
    ("", [""], ["a"]),
]


@pytest.mark.parametrize(("pattern", "matching", "other"), GLOBS)
def test_patterns_match_as_gobwas_glob_does(
    pattern: str, matching: list[str], other: list[str]
) -> None:
    matcher = compile_pattern(pattern)
    for name in matching:
        assert matcher.fullmatch(name), (pattern, name)
    for name in other:
        assert not matcher.fullmatch(name), (pattern, name)


@pytest.mark.parametrize("pattern", ["[abc", "[a-", "[a-z", "[a-zA-Z]", "{a,b", "x{a{b}", "[!"])
def test_malformed_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(InvalidPatternError, match="invalid branch pattern syntax"):
        compile_pattern(pattern)


@given(st.text(alphabet=st.characters(blacklist_characters="*?[]{},\\"), max_size=20))
def test_a_pattern_without_special_characters_matches_only_itself(name: str) -> None:
    matcher = compile_pattern(name)
    assert matcher.fullmatch(name)
    assert not matcher.fullmatch(name + "x")


@pytest.fixture
def catalog() -> Catalog:
    catalog = open_memory(clock=Clock())
    catalog.create_repository("repo", "mem://repo")
    return catalog


def test_rules_round_trip_with_etags(catalog: Catalog) -> None:
    repo = catalog.get_repository("repo")
    assert get_rules(catalog.kv, repo).patterns == ()
    assert get_rules(catalog.kv, repo).etag == ""
    etag = set_rules(catalog.kv, repo, ["main", "release-*", "main"], None)
    rules = get_rules(catalog.kv, repo)
    assert rules.patterns == ("main", "release-*")
    assert rules.etag == etag
    stored = catalog.kv.get(f"refs/repo:{repo.instance_uid}/settings/branch_protection".encode())
    assert etag == hashlib.sha256(stored).hexdigest()
    # the same rules are the same bytes: the ETag depends on the rules only
    assert set_rules(catalog.kv, repo, ["release-*", "main"], etag) == etag


def test_if_match_semantics(catalog: Catalog) -> None:
    repo = catalog.get_repository("repo")
    # "" writes only while no rules were ever stored
    first = set_rules(catalog.kv, repo, ["main"], "")
    with pytest.raises(RulesChangedError, match=r"^Precondition failed"):
        set_rules(catalog.kv, repo, ["dev"], "")
    with pytest.raises(RulesChangedError):
        set_rules(catalog.kv, repo, ["dev"], "0" * 64)
    second = set_rules(catalog.kv, repo, ["dev"], first)
    with pytest.raises(RulesChangedError):
        set_rules(catalog.kv, repo, ["x"], first)
    # clearing stores an empty list, which has an ETag of its own
    cleared = set_rules(catalog.kv, repo, [], second)
    assert get_rules(catalog.kv, repo).patterns == ()
    assert cleared not in ("", second)
    with pytest.raises(RulesChangedError):
        set_rules(catalog.kv, repo, ["main"], "")
    # absent If-Match writes whatever is stored
    set_rules(catalog.kv, repo, ["main"], None)
    assert get_rules(catalog.kv, repo).patterns == ("main",)


def test_invalid_patterns_are_not_stored(catalog: Catalog) -> None:
    repo = catalog.get_repository("repo")
    with pytest.raises(InvalidPatternError):
        set_rules(catalog.kv, repo, ["main", "{open"], None)
    with pytest.raises(InvalidPatternError):
        add_rule(catalog.kv, repo, "[a-")
    assert get_rules(catalog.kv, repo).etag == ""


def test_single_rules_add_and_delete(catalog: Catalog) -> None:
    repo = catalog.get_repository("repo")
    add_rule(catalog.kv, repo, "main")
    add_rule(catalog.kv, repo, "dev-*")
    with pytest.raises(RuleExistsError, match="already exists: not unique"):
        add_rule(catalog.kv, repo, "main")
    delete_rule(catalog.kv, repo, "main")
    with pytest.raises(RuleNotFoundError, match="not found"):
        delete_rule(catalog.kv, repo, "main")
    assert get_rules(catalog.kv, repo).patterns == ("dev-*",)
    assert protecting_pattern(catalog.kv, repo, "dev-a/b") == "dev-*"
    assert protecting_pattern(catalog.kv, repo, "main") is None


def test_rules_go_with_the_repository(catalog: Catalog) -> None:
    set_rules(catalog.kv, catalog.get_repository("repo"), ["main"], None)
    catalog.delete_repository("repo")
    catalog.create_repository("repo", "mem://repo")
    assert get_rules(catalog.kv, catalog.get_repository("repo")).etag == ""


def _entry(catalog: Catalog, data: bytes) -> Entry:
    repo = catalog.get_repository("repo")
    address = catalog.paths.new_path()
    info = catalog.block_store(repo).put(address, data)
    return Entry(address=address, size=info.size, checksum=info.etag, mtime=0)


def test_a_protected_branch_refuses_writes_commits_and_hard_resets(catalog: Catalog) -> None:
    catalog.upload_object("repo", "main", "a", b"1")
    base = catalog.commit("repo", "main", "base").commit.id
    catalog.upload_object("repo", "main", "staged", b"s")
    set_rules(catalog.kv, catalog.get_repository("repo"), ["ma*"], None)
    writes: list[Callable[[], object]] = [
        lambda: catalog.upload_object("repo", "main", "b", b"2"),
        lambda: catalog.stage_object("repo", "main", "b", _entry(catalog, b"2")),
        lambda: catalog.delete_object("repo", "main", "a"),
        lambda: catalog.delete_objects("repo", "main", ["a", "nope"]),
        lambda: catalog.update_user_metadata("repo", "main", "a", {"k": "v"}),
        lambda: catalog.reset_branch("repo", "main"),
        lambda: catalog.reset_objects("repo", "main", "staged", exact=True),
    ]
    for write in writes:
        with pytest.raises(ProtectedBranchWriteError, match=r"^cannot write to protected branch"):
            write()
    with pytest.raises(ProtectedBranchCommitError, match=r"^cannot commit to protected branch"):
        catalog.commit("repo", "main", "direct")
    with pytest.raises(ProtectedBranchCommitError):
        catalog.commit_tree("repo", "main", [("z", None)], "direct")
    with pytest.raises(ProtectedBranchError, match=r"^protected branch: branch 'main'"):
        catalog.hard_reset_branch("repo", "main", base)
    assert catalog.get_branch("repo", "main").commit_id == base
    assert [d.path for d in catalog.diff_uncommitted("repo", "main")] == ["staged"]


def test_merges_reverts_cherry_picks_and_refs_still_work(catalog: Catalog) -> None:
    catalog.upload_object("repo", "main", "a", b"1")
    catalog.commit("repo", "main", "base")
    set_rules(catalog.kv, catalog.get_repository("repo"), ["main"], None)
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "b", b"2")
    picked = catalog.commit("repo", "dev", "add b").commit
    catalog.upload_object("repo", "dev", "c", b"3")
    catalog.commit("repo", "dev", "add c")
    merged = catalog.merge("repo", "dev", "main").commit
    assert catalog.get_branch("repo", "main").commit_id == merged.id
    catalog.revert("repo", "main", "main", parent_number=1)
    assert {o.path for o in catalog.iter_objects("repo", "main")} == {"a"}
    catalog.cherry_pick("repo", "main", picked.id)
    assert {o.path for o in catalog.iter_objects("repo", "main")} == {"a", "b"}
    catalog.create_tag("repo", "v1", "main")
    catalog.delete_tag("repo", "v1")
    catalog.create_branch("repo", "main2", "main")
    catalog.delete_branch("repo", "main2")
    catalog.delete_branch("repo", "dev")


def test_mirror_head_moves_ignore_rules_a_mirror_carries() -> None:
    source = open_memory(clock=Clock())
    source.create_repository("src", "mem://src")
    source.upload_object("src", "main", "a", b"1")
    head = source.commit("src", "main", "one").commit
    mirror = open_memory(clock=Clock())
    mirror.create_repository("mir", "mem://mir", read_only=True, mirror_of="x/src")
    set_rules(mirror.kv, mirror.get_repository("mir"), ["*"], None)
    chain = list(source.log("src", "main"))
    for commit in reversed(chain):
        mirror.import_commit("mir", commit, force=True)
    current = mirror.list_branches("mir")
    expected = next((b.commit_id for b in current if b.id == "main"), None)
    mirror.set_branch_head("mir", "main", head.id, expected, force=True)
    mirror.create_tag("mir", "v1", head.id, force=True)
    assert mirror.get_branch("mir", "main").commit_id == head.id

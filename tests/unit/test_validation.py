"""Input validation: names, object paths, ref expressions, lakefs:// URIs, and the catalog's use."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.block import InvalidNamespaceError
from mirror.core import (
    Catalog,
    InvalidNameError,
    InvalidPathError,
    InvalidRefError,
    InvalidURIError,
    LakeFSURI,
    RefExpr,
    open_memory,
    parse_ref,
    parse_uri,
)
from mirror.core.refexpr import Modifier
from mirror.core.validate import (
    MAX_PATH_LENGTH,
    validate_branch_id,
    validate_path,
    validate_repository_id,
    validate_tag_id,
)
from mirror.errors import InvalidValueError


def _raises_naming(
    error: type[InvalidValueError], call: Callable[[], object], bad: object, shown: str = ""
) -> InvalidValueError:
    """Assert ``call`` raises ``error`` whose message shows ``bad`` (or ``shown``)."""
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, ValueError)
    assert (shown or repr(bad)) in str(info.value), str(info.value)
    return info.value


# repository names: ^[a-z0-9][a-z0-9-]{2,62}$


@pytest.mark.parametrize(
    "name", ["abc", "a-b", "0ab", "repo-1", "ab-", "a--", "123", "a" * 63, "x" + "-" * 62]
)
def test_valid_repository_names(name: str) -> None:
    assert validate_repository_id(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "a",
        "ab",
        "a" * 64,
        "-abc",
        "Abc",
        "abC",
        "ab_c",
        "ab.c",
        "ab/c",
        " abc",
        "abc ",
        "abc\n",
        "\u00e1bc",
        "abc\x00",
    ],
)
def test_invalid_repository_names(name: str) -> None:
    _raises_naming(InvalidNameError, lambda: validate_repository_id(name), name)


# branch names: ^\w[-\w]*$ over ASCII


@pytest.mark.parametrize(
    "name", ["main", "a", "_", "0", "A", "feature-1", "a_b-c", "dev--x", "x-", "b" * 300]
)
def test_valid_branch_names(name: str) -> None:
    assert validate_branch_id(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "-a",
        "a/b",
        "a b",
        "a.b",
        "main\n",
        "a~1",
        "a@",
        "a$",
        "a^",
        "\u00fc",
        "main\u00e9",
        "\u0663",
        "a\x00",
    ],
)
def test_invalid_branch_names(name: str) -> None:
    _raises_naming(InvalidNameError, lambda: validate_branch_id(name), name)


# tag names: git-check-ref-format as lakeFS applies it


@pytest.mark.parametrize(
    "name",
    [
        "v1.0",
        "release-2024-01",
        "a~b",
        # lakeFS counts only characters up to the space as control characters
        "a\x7fb",
        "v1.0-rc1",
        "@a",
        "a@b",
        "x.lockx",
        "_",
        "a{b}",
        "\u00e9t\u00e9",
    ],
)
def test_valid_tag_names(name: str) -> None:
    assert validate_tag_id(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        ("@", "'@' alone"),
        ("v1.", "end with"),
        ("v1.lock", "end with"),
        ("release/2024-01", "contain"),
        ("release/", "contain"),
        ("a..b", "contain"),
        ("..", "end with"),
        ("a//b", "contain"),
        ("a@{b", "contain"),
        ("a^b", "^"),
        ("a:b", "^"),
        ("a?b", "^"),
        ("a*b", "^"),
        ("a[b", "^"),
        ("a\\b", "^"),
        ("a b", "spaces"),
        ("a\tb", "control"),
        ("a\x00b", "control"),
        ("\x1f", "control"),
    ],
)
def test_invalid_tag_names(name: str, why: str) -> None:
    error = _raises_naming(InvalidNameError, lambda: validate_tag_id(name), name)
    assert why in str(error)


# object paths


@pytest.mark.parametrize(
    "path",
    [
        "a",
        "a/b.csv",
        " leading space",
        "dir/",
        "/leading",
        "a//b",
        "\u00e9",
        "a" * MAX_PATH_LENGTH,
        "\u00e9" * (MAX_PATH_LENGTH // 2),
    ],
)
def test_valid_paths(path: str) -> None:
    assert validate_path(path) == path


@pytest.mark.parametrize("path", ["", "a\x00b", "\x00", "\ud800"])
def test_invalid_paths(path: str) -> None:
    _raises_naming(InvalidPathError, lambda: validate_path(path), path)


@pytest.mark.parametrize(
    "path", ["a" * (MAX_PATH_LENGTH + 1), "\u00e9" * (MAX_PATH_LENGTH // 2 + 1)]
)
def test_path_too_long(path: str) -> None:
    size = len(path.encode())
    error = _raises_naming(
        InvalidPathError, lambda: validate_path(path), path, shown=repr(path[:40])
    )
    assert str(size) in str(error)


# ref expressions

F, P, AT, DOLLAR = Modifier.FIRST_PARENT, Modifier.PARENT, Modifier.COMMITTED, Modifier.STAGING


@pytest.mark.parametrize(
    ("ref", "base", "steps"),
    [
        ("main", "main", ()),
        ("main~", "main", ((F, 1),)),
        ("main~3", "main", ((F, 3),)),
        ("main~0", "main", ((F, 0),)),
        ("main^2", "main", ((P, 2),)),
        ("main^", "main", ((P, 1),)),
        ("main@", "main", ((AT, 0),)),
        ("main$", "main", ((DOLLAR, 0),)),
        ("abc123^^~2", "abc123", ((P, 1), (P, 1), (F, 2))),
        ("v1.0~1^2", "v1.0", ((F, 1), (P, 2))),
        ("release/x~10", "release/x", ((F, 10),)),
    ],
)
def test_valid_refs(ref: str, base: str, steps: tuple[tuple[Modifier, int], ...]) -> None:
    parsed = parse_ref(ref)
    assert parsed == RefExpr(base, steps)
    assert parsed.branch_modifier == (
        steps[0][0] if steps and steps[0][0] in (AT, DOLLAR) else None
    )


@pytest.mark.parametrize(
    "ref",
    [
        "",
        " main",
        "main ",
        "ma in",
        "main\n",
        "main\x00",
        "~1",
        "^",
        "@",
        "$",
        "main~x",
        "main~-1",
        "main~1.5",
        "main^\u00b2",
        "main~\u0663",
        "main@1",
        "main@~1",
        "main~1@",
        "main$^",
        "main@@",
        "main@$",
        "main~" + "9" * 30,
        "main^" + "9" * 5000,
    ],
)
def test_invalid_refs(ref: str) -> None:
    _raises_naming(InvalidRefError, lambda: parse_ref(ref), ref)


@given(st.text(alphabet=st.sampled_from("ma~^@$0129 \t\x00\u00b2\u0663/._-"), max_size=12))
def test_parse_ref_raises_only_invalid_ref_on_biased_text(ref: str) -> None:
    _parse_or_invalid(ref)


@given(st.text(max_size=30))
def test_parse_ref_raises_only_invalid_ref_on_any_text(ref: str) -> None:
    _parse_or_invalid(ref)


def _parse_or_invalid(ref: str) -> None:
    try:
        parsed = parse_ref(ref)
    except InvalidRefError as exc:
        assert repr(ref) in str(exc)
        return
    assert parsed.base and ref.startswith(parsed.base)
    assert not any(c.isspace() for c in ref)


@given(
    st.from_regex(r"[A-Za-z0-9_][-A-Za-z0-9_./]{0,10}", fullmatch=True),
    st.lists(st.tuples(st.sampled_from([F, P]), st.none() | st.integers(0, 10**6)), max_size=5),
)
def test_ref_round_trip(base: str, steps: list[tuple[Modifier, int | None]]) -> None:
    text = base + "".join(m.value + ("" if n is None else str(n)) for m, n in steps)
    want = tuple((m, 1 if n is None else n) for m, n in steps)
    assert parse_ref(text) == RefExpr(base, want)


# lakefs:// URIs


@pytest.mark.parametrize(
    ("uri", "want"),
    [
        ("lakefs://repo", LakeFSURI("repo")),
        ("lakefs://repo/main", LakeFSURI("repo", "main")),
        ("lakefs://repo/main/", LakeFSURI("repo", "main", "")),
        ("lakefs://repo/main/a/b.csv", LakeFSURI("repo", "main", "a/b.csv")),
        ("lakefs://repo/main~1/a", LakeFSURI("repo", "main~1", "a")),
        ("lakefs://repo/main/a//b/", LakeFSURI("repo", "main", "a//b/")),
        ("lakefs://my-repo/v1.0/x y", LakeFSURI("my-repo", "v1.0", "x y")),
    ],
)
def test_valid_uris(uri: str, want: LakeFSURI) -> None:
    assert parse_uri(uri) == want
    assert str(want) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "s3://repo/main/x",
        "lakefs:/repo/main",
        "lakefs:repo",
        "lakefs://",
        "lakefs:///main",
        "lakefs://Repo/main",
        "lakefs://ab/main",
        "lakefs://re_po",
        "lakefs://repo//x",
        "lakefs://repo/ma in/x",
        "lakefs://repo/~1/x",
        "lakefs://repo/main@1",
        "lakefs://repo/main/a\x00b",
    ],
)
def test_invalid_uris(uri: str) -> None:
    _raises_naming(InvalidURIError, lambda: parse_uri(uri), uri)


# the catalog validates before it writes anything


@pytest.fixture
def catalog() -> Catalog:
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    catalog.upload_object("repo", "main", "existing", b"x")
    catalog.create_tag("repo", "v1", "main")
    return catalog


def _state(catalog: Catalog) -> tuple[object, ...]:
    repo = catalog.get_repository("repo")
    return (
        list(catalog.kv.scan(b"")),
        [info.key for info in catalog.block_store(repo).list()],
        [r.id for r in catalog.list_repositories()],
        [b.id for b in catalog.list_branches("repo")],
        list(catalog.list_tags("repo")),
    )


@pytest.mark.parametrize(
    ("error", "bad", "call"),
    [
        (InvalidNameError, "Bad_Repo", lambda c: c.create_repository("Bad_Repo", "mem://x")),
        (InvalidNameError, "ab", lambda c: c.create_repository("ab", "mem://x")),
        (InvalidNameError, "ma in", lambda c: c.create_repository("repo2", "mem://x", "ma in")),
        (InvalidNamespaceError, "gs://b", lambda c: c.create_repository("repo2", "gs://b")),
        (InvalidNamespaceError, "", lambda c: c.create_repository("repo2", "")),
        (InvalidNamespaceError, "mem:/x", lambda c: c.create_repository("repo2", "mem:/x")),
        (InvalidNameError, "feat/x", lambda c: c.create_branch("repo", "feat/x", "main")),
        (InvalidNameError, "-dev", lambda c: c.create_branch("repo", "-dev", "main")),
        (InvalidNameError, "Repo", lambda c: c.create_branch("Repo", "dev", "main")),
        (InvalidRefError, "main@1", lambda c: c.create_branch("repo", "dev", "main@1")),
        (InvalidNameError, "v1.lock", lambda c: c.create_tag("repo", "v1.lock", "main")),
        (InvalidNameError, "a b", lambda c: c.create_tag("repo", "a b", "main")),
        (InvalidNameError, "@", lambda c: c.create_tag("repo", "@", "main")),
        (InvalidRefError, "~1", lambda c: c.create_tag("repo", "v2", "~1")),
        (InvalidPathError, "", lambda c: c.upload_object("repo", "main", "", b"data")),
        (InvalidPathError, "a\x00b", lambda c: c.upload_object("repo", "main", "a\x00b", b"d")),
        (InvalidNameError, "ma/in", lambda c: c.upload_object("repo", "ma/in", "p", b"data")),
        (InvalidNameError, "RE", lambda c: c.upload_object("RE", "main", "p", b"data")),
    ],
)
def test_catalog_rejects_bad_input_without_writing(
    catalog: Catalog,
    error: type[InvalidValueError],
    bad: str,
    call: Callable[[Catalog], object],
) -> None:
    before = _state(catalog)
    _raises_naming(error, lambda: call(catalog), bad)
    assert _state(catalog) == before


def test_catalog_rejects_too_long_path_without_writing(catalog: Catalog) -> None:
    before = _state(catalog)
    path = "p" * (MAX_PATH_LENGTH + 1)
    with pytest.raises(InvalidPathError):
        catalog.upload_object("repo", "main", path, b"data")
    assert _state(catalog) == before

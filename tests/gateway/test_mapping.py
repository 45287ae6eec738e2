"""The error tree → S3 errors mapping and the write-target checks, on an in-memory catalog."""

from __future__ import annotations

import pytest

from mirror.block.errors import BlockNotFoundError, InvalidRangeError
from mirror.core import Catalog, open_memory
from mirror.core.errors import (
    BranchNotFoundError,
    InvalidRefError,
    NotYetReplicatedError,
    ObjectNotFoundError,
    ProtectedBranchWriteError,
    RepositoryNotFoundError,
    RepositoryReadOnlyError,
    TooManyTriesError,
)
from mirror.errors import LakeMirrorError, PreconditionFailedError
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.mapping import check_path, resolve_write_target, s3_errors, to_s3_error


@pytest.fixture
def catalog() -> Catalog:
    cat = open_memory()
    cat.create_repository("repo", "mem://repo")
    cat.create_tag("repo", "v1", "main")
    cat.create_repository("mir", "mem://mir", read_only=True, mirror_of="origin/repo", bare=True)
    cat.create_repository("frozen", "mem://frozen", read_only=True, bare=True)
    return cat


@pytest.mark.parametrize(
    ("exc", "write", "code"),
    [
        (RepositoryNotFoundError("x"), False, S3Code.NO_SUCH_BUCKET),
        (ObjectNotFoundError("a"), False, S3Code.NO_SUCH_KEY),
        (BranchNotFoundError("b"), False, S3Code.NO_SUCH_KEY),
        (BranchNotFoundError("b"), True, S3Code.NO_SUCH_BUCKET),
        (InvalidRefError("main~~x"), False, S3Code.NO_SUCH_KEY),
        (InvalidRefError("main~~x"), True, S3Code.INVALID_ARGUMENT),
        (InvalidRangeError("beyond"), False, S3Code.INVALID_RANGE),
        (ProtectedBranchWriteError("main"), True, S3Code.PROTECTED_BRANCH),
        (PreconditionFailedError("x"), True, S3Code.PRECONDITION_FAILED),
        (TooManyTriesError("x"), True, S3Code.SLOW_DOWN),
        (NotYetReplicatedError("data of object 'a'"), False, S3Code.SLOW_DOWN),
        (LakeMirrorError("boom"), False, S3Code.INTERNAL_ERROR),
        (RuntimeError("secret internals"), False, S3Code.INTERNAL_ERROR),
    ],
)
def test_codes(exc: BaseException, write: bool, code: S3Code) -> None:
    err = to_s3_error(exc, bucket="repo", key="a/b", write=write)
    assert err.code is code
    assert err.message.startswith(code.description)
    assert "secret internals" not in err.message


def test_slow_down_says_when_to_retry() -> None:
    err = to_s3_error(NotYetReplicatedError("x"), bucket="mir", key="k")
    assert err.status == 503 and err.headers["Retry-After"] == "1"


def test_read_only_mirror_names_itself(catalog: Catalog) -> None:
    err = to_s3_error(RepositoryReadOnlyError("mir"), bucket="mir", key="k", catalog=catalog)
    assert err.code is S3Code.ACCESS_DENIED
    assert err.message.startswith("Access Denied: repository mir is a mirror (read-only)")
    assert "origin/repo" in err.message
    frozen = RepositoryReadOnlyError("frozen")
    plain = to_s3_error(frozen, bucket="frozen", key="k", catalog=catalog)
    assert plain.code is S3Code.READ_ONLY_REPOSITORY


def test_missing_data_of_a_mirror_is_not_yet_replicated(catalog: Catalog) -> None:
    mirror = to_s3_error(BlockNotFoundError("data/x"), bucket="mir", key="k", catalog=catalog)
    assert mirror.code is S3Code.SLOW_DOWN
    gone = to_s3_error(BlockNotFoundError("data/x"), bucket="repo", key="k", catalog=catalog)
    assert gone.code is S3Code.NO_SUCH_VERSION


def test_context_manager_maps_and_keeps_s3_errors() -> None:
    with pytest.raises(S3Error) as info, s3_errors("repo", "k"):
        raise ObjectNotFoundError("k")
    assert info.value.code is S3Code.NO_SUCH_KEY and info.value.key == "k"
    with pytest.raises(KeyError), s3_errors("repo", "k"):
        raise KeyError("a bug passes through, answered by the app as InternalError")


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("", S3Code.INVALID_ARGUMENT),
        ("/abs", S3Code.INVALID_ARGUMENT),
        ("a/../b", S3Code.INVALID_ARGUMENT),
        ("./b", S3Code.INVALID_ARGUMENT),
        ("a/..", S3Code.INVALID_ARGUMENT),
        ("x" * 1030, S3Code.KEY_TOO_LONG),
        ("é" * 512, S3Code.KEY_TOO_LONG),
    ],
)
def test_bad_paths(path: str, code: S3Code) -> None:
    with pytest.raises(S3Error) as info:
        check_path("main", path, bucket="repo")
    assert info.value.code is code


def test_good_paths() -> None:
    for path in ("a", "a b/c+d", "ünï/кот", "dir/", "a..b/c.d", "x" * 1000):
        check_path("main", path, bucket="repo")


def test_write_targets(catalog: Catalog) -> None:
    target = resolve_write_target(catalog, "repo", "main", "a/b")
    assert (target.branch, target.path, target.repository.id) == ("main", "a/b", "repo")
    commit = catalog.get_branch("repo", "main").commit_id
    cases = [
        ("repo", "v1", S3Code.NO_SUCH_BUCKET),
        ("repo", commit, S3Code.NO_SUCH_BUCKET),
        ("repo", "nobranch", S3Code.NO_SUCH_BUCKET),
        ("repo", "main~1", S3Code.INVALID_ARGUMENT),
        ("nope", "main", S3Code.NO_SUCH_BUCKET),
        ("mir", "main", S3Code.ACCESS_DENIED),
        ("frozen", "main", S3Code.READ_ONLY_REPOSITORY),
    ]
    for bucket, ref, code in cases:
        with pytest.raises(S3Error) as info:
            resolve_write_target(catalog, bucket, ref, "a/b")
        assert info.value.code is code, (bucket, ref)
        if bucket == "repo":
            assert "is not a branch of repository repo" in info.value.message

"""Refs dump and restore in the core (in memory): the round trip, and every refusal.

The round trip runs once per chunking (one range, ragged ranges), over a history with a merge
commit, commit metadata, several branches and tags. Refusals leave the target bare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mirror.core import CommitNotFoundError, InvalidRefError
from mirror.core.committed import WriteStats
from mirror.core.dump import (
    COMMIT_RECORD,
    MANIFEST_KEY,
    InvalidDumpError,
    NotBareRepositoryError,
    RefsDump,
    dump_refs,
    restore_refs,
)
from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import Commit, Entry
from mirror.core.tree_writer import MetaRangeWriter
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from tests.conftest import Lake


def _history(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1"}, "c1")
    lake.branch("feature")
    lake.write("feature", {"f": b"1"}, "f1")
    lake.write("main", {"a": b"2"}, "c2")
    lake.clock.tick()
    lake.catalog.merge(lake.repo, "feature", "main")
    for i in range(12):
        lake.put("main", f"dir/{i:03}", str(i).encode())
        lake.commit("main", f"step {i}", metadata={"step": str(i)})
        if i % 3 == 0:
            lake.catalog.create_tag(lake.repo, f"v{i}", "main")
    lake.branch("stale", "main~5")
    lake.write("feature", {"f": None}, "f gone")


def _refs(lake: Lake, repo: str) -> dict[str, object]:
    catalog = lake.catalog
    record = catalog.get_repository(repo)
    ids = catalog.refs.commits_with_prefix(record, "", limit=1 << 20)
    return {
        "commits": {c: catalog.refs.get_commit(record, c) for c in ids},
        "branches": {b.id: b.commit_id for b in catalog.list_branches(repo)},
        "tags": dict(catalog.list_tags(repo)),
    }


def _bare(lake: Lake, name: str = "copy", **options: object) -> str:
    namespace = lake.catalog.get_repository(lake.repo).storage_namespace
    lake.catalog.create_repository(name, namespace, bare=True, **options)  # type: ignore[arg-type]
    return name


def test_round_trip_is_identical(lake: Lake) -> None:
    _history(lake)
    dump = dump_refs(lake.catalog, lake.repo)
    manifest = lake.catalog.block_store(lake.catalog.get_repository(lake.repo)).get(MANIFEST_KEY)
    assert b'"commits_meta_range_id": "' + dump.commits_meta_range_id.encode() in manifest
    copy = _bare(lake)
    restore_refs(lake.catalog, copy, dump)
    source = _refs(lake, lake.repo)
    assert _refs(lake, copy) == source
    assert len(source["commits"]) >= 18  # type: ignore[arg-type]
    assert any(len(c.parents) == 2 for c in source["commits"].values())  # type: ignore[attr-defined]
    for ref in ("main", "feature", "stale", "v9", "main~7"):
        assert [c.id for c in lake.catalog.log(copy, ref)] == [
            c.id for c in lake.catalog.log(lake.repo, ref)
        ]
        assert {s.path for s in lake.catalog.iter_objects(copy, ref)} == {
            s.path for s in lake.catalog.iter_objects(lake.repo, ref)
        }
    assert lake.catalog.read_object(copy, "v3", "dir/003") == b"3"
    # the same refs dump to the same metaranges
    assert dump_refs(lake.catalog, copy) == dump


def test_not_bare_and_read_only_are_refused(lake: Lake) -> None:
    _history(lake)
    dump = dump_refs(lake.catalog, lake.repo)
    with pytest.raises(NotBareRepositoryError) as not_bare:
        restore_refs(lake.catalog, lake.repo, dump)
    assert str(not_bare.value).startswith("can only restore into a bare repository")
    assert isinstance(not_bare.value, InvalidValueError)

    mirror = _bare(lake, "mirror", read_only=True, mirror_of="elsewhere/repo")
    for force in (False, True):
        with pytest.raises(RepositoryReadOnlyError):
            restore_refs(lake.catalog, mirror, dump, force=force)
    frozen = _bare(lake, "frozen", read_only=True)
    with pytest.raises(RepositoryReadOnlyError):
        restore_refs(lake.catalog, frozen, dump)
    # lakeFS's force: a read-only repository that is no mirror may be restored
    restore_refs(lake.catalog, frozen, dump, force=True)
    assert _refs(lake, frozen) == _refs(lake, lake.repo)


def _write_commits(lake: Lake, commits: list[Commit]) -> str:
    catalog = lake.catalog
    store = catalog.committed(catalog.get_repository(lake.repo))
    writer = MetaRangeWriter(store, catalog.chunking, WriteStats())
    for c in sorted(commits, key=lambda c: c.id):
        record = c.encode()
        entry = Entry(
            c.metarange_id, len(record), "x", 0, COMMIT_RECORD, {"record": record.decode()}
        )
        writer.add(c.id, entry)
    return str(writer.close())


def test_bad_dumps_are_refused_before_anything_is_written(lake: Lake) -> None:
    _history(lake)
    dump = dump_refs(lake.catalog, lake.repo)
    copy = _bare(lake)
    source = _refs(lake, lake.repo)
    commits: dict[str, Commit] = source["commits"]  # type: ignore[assignment]
    head = commits[lake.head("main")]

    forged = Commit(
        head.id,
        head.committer,
        "another message",
        head.metarange_id,
        head.creation_date,
        head.parents,
        head.metadata,
        head.generation,
    )
    others = [c for c in commits.values() if c.id != head.id]
    cases: list[tuple[RefsDump, type[Exception]]] = [
        # a record that does not match its ID
        (
            RefsDump(
                _write_commits(lake, [*others, forged]),
                dump.tags_meta_range_id,
                dump.branches_meta_range_id,
            ),
            InvalidRefError,
        ),
        # a parent missing from the dump
        (
            RefsDump(
                _write_commits(lake, [head]), dump.tags_meta_range_id, dump.branches_meta_range_id
            ),
            CommitNotFoundError,
        ),
        # branches pointing at commits not dumped
        (
            RefsDump(
                _write_commits(lake, others), dump.tags_meta_range_id, dump.branches_meta_range_id
            ),
            CommitNotFoundError,
        ),
        # tags where commits are expected
        (
            RefsDump(dump.tags_meta_range_id, dump.tags_meta_range_id, dump.branches_meta_range_id),
            InvalidDumpError,
        ),
        # no metarange named
        (RefsDump("", dump.tags_meta_range_id, dump.branches_meta_range_id), InvalidDumpError),
    ]
    for bad, error in cases:
        with pytest.raises(error):
            restore_refs(lake.catalog, copy, bad)
        assert _refs(lake, copy) == {"commits": {}, "branches": {}, "tags": {}}
    restore_refs(lake.catalog, copy, dump)
    assert _refs(lake, copy) == source

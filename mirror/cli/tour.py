"""``lakemirror tour``: a short session with the versioning core on the embedded default."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TextIO

__all__ = ["run_tour"]


def run_tour(data_dir: str, out: TextIO) -> int:
    """Create a repository under ``data_dir``, branch, commit, merge and print what happened."""
    from mirror.core import MergeConflictError, open_embedded

    catalog = open_embedded(data_dir)
    name = f"tour-{int(time.time())}"
    repo = catalog.create_repository(name, f"local://{name}")
    root = Path(data_dir).resolve() / name

    def say(text: str) -> None:
        print(text, file=out)

    say(f"repository {repo.id} at {root} (refs in {Path(data_dir).resolve() / 'kv.sqlite'})")
    for i in range(3):
        catalog.upload_object(name, "main", f"tables/events/part-{i:04}.csv", f"id\n{i}\n".encode())
    first = catalog.commit(name, "main", "load events", committer="tour").commit
    say(f"commit {first.id[:12]} 'load events' wrote {first.metarange_id[:12]} ...")
    catalog.create_branch(name, "experiment", "main")
    catalog.upload_object(name, "experiment", "tables/events/part-0001.csv", b"id\n1\n10\n")
    catalog.delete_object(name, "experiment", "tables/events/part-0002.csv")
    say("uncommitted on experiment:")
    for d in catalog.diff_uncommitted(name, "experiment"):
        say(f"  {d.type.value:8} {d.path}")
    catalog.commit(name, "experiment", "fix events", committer="tour")
    catalog.upload_object(name, "main", "tables/events/part-0001.csv", b"id\n1\n11\n")
    catalog.commit(name, "main", "conflicting fix", committer="tour")
    try:
        catalog.merge(name, "experiment", "main", committer="tour")
    except MergeConflictError as exc:
        say(f"merge experiment -> main: {exc}")
    merged = catalog.merge(name, "experiment", "main", committer="tour", strategy="source-wins")
    say(f"merge with source-wins: commit {merged.commit.id[:12]}")
    catalog.create_tag(name, "v1", "main")
    say("log of main:")
    for c in catalog.log(name, "main"):
        say(f"  {c.id[:12]} {c.message}")
    say("objects at v1:")
    for stat in catalog.iter_objects(name, "v1"):
        body = catalog.read_object(name, "v1", stat.path)
        say(f"  {stat.path} {stat.entry.size} bytes -> {stat.physical_address}: {body!r}")
    return 0

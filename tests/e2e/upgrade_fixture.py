"""Write the data directory of an earlier release, for the upgrade test (``test_upgrade.py``).

``python -m tests.e2e.upgrade_fixture --sources DIR --out FILE.tar.gz`` runs ``lakemirror
server`` from the sources in ``DIR`` (an earlier revision, e.g. ``git archive REV mirror`` unpacked
there) with this environment's installed packages, on an empty data directory (embedded default:
SQLite + ``local://``), writes through lakeFS's SDK the history :func:`write_history` describes,
stops the server and packs the data directory, with a ``manifest.json`` naming what was written
(commit IDs, object contents), into ``FILE``. The upgrade test unpacks it as region ``a``'s data
directory and serves it with the current sources.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import lakefs

from tests.integration.harness import (
    ADMIN_KEY_ENV,
    ADMIN_SECRET_ENV,
    free_port,
    stop_process,
    wait_healthy,
)

ADMIN = ("AKIAREGIONA0000000001", "upgrade-fixture-secret-not-for-use")
"""Region ``a``'s administrator in the fixture (the key the e2e regions give region ``a``)."""
REPOSITORY = "legacy"
MANIFEST = "manifest.json"


def content(path: str, version: int = 1) -> bytes:
    """Return the bytes the fixture stores at ``path`` (``version``: which write of it)."""
    return f"{path} v{version}\n".encode() * (version * 40)


def write_history(client: lakefs.Client, url: str) -> dict[str, Any]:
    """Write the fixture's repository; return its manifest.

    ``main``: two commits (the second changes, adds and deletes objects) and a staged change
    left uncommitted; ``scratch.txt`` is staged twice before the first commit, so the first
    version's file is garbage nothing references; tag ``v1`` on the first commit; branch ``dev``
    with a commit of its own; GC rules retaining 1 day.
    """
    repo = lakefs.Repository(REPOSITORY, client=client).create(f"local://{REPOSITORY}")
    main = repo.branch("main")
    first_paths = ["README.md", "data/a.csv", "data/b.csv", "scratch.txt"]
    main.object("scratch.txt").upload(content("scratch.txt", 0))
    for path in first_paths:
        main.object(path).upload(content(path), metadata={"written-by": "fixture"})
    first = main.commit("first", metadata={"step": "1"}).get_commit().id
    main.object("data/a.csv").upload(content("data/a.csv", 2))
    main.object("data/c.csv").upload(content("data/c.csv"))
    main.object("data/b.csv").delete()
    second = main.commit("second").get_commit().id
    repo.tag("v1").create(first)
    dev = repo.branch("dev").create(main)
    dev.object("dev/x.txt").upload(content("dev/x.txt"))
    dev_head = dev.commit("dev work").get_commit().id
    main.object("staged.txt").upload(content("staged.txt"))
    rules = httpx.put(
        f"{url}/api/v1/repositories/{REPOSITORY}/settings/gc_rules",
        json={"default_retention_days": 1, "branches": []},
        auth=ADMIN,
        timeout=30,
    )
    rules.raise_for_status()
    return {
        "repository": REPOSITORY,
        "commits": {"first": first, "second": second, "dev": dev_head},
        "objects": {
            "v1": {p: content(p).decode() for p in first_paths},
            "main": {
                "README.md": content("README.md").decode(),
                "data/a.csv": content("data/a.csv", 2).decode(),
                "data/c.csv": content("data/c.csv").decode(),
                "scratch.txt": content("scratch.txt").decode(),
            },
            "dev": {"dev/x.txt": content("dev/x.txt").decode()},
            "staged": {"staged.txt": content("staged.txt").decode()},
        },
    }


def write_fixture(sources: Path, out: Path) -> dict[str, Any]:
    """Run the server of ``sources`` on a new data directory, write the history, pack it."""
    with tempfile.TemporaryDirectory(prefix="upgrade-fixture-") as name:
        data = Path(name) / "data"
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
        env |= {ADMIN_KEY_ENV: ADMIN[0], ADMIN_SECRET_ENV: ADMIN[1], "PYTHONPATH": str(sources)}
        command = [sys.executable, "-m", "mirror.cli.main", "server", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--data-dir", str(data)]
        log = Path(name) / "server.log"
        with open(log, "wb") as out_log:
            process = subprocess.Popen(
                command, cwd=sources, env=env, stdout=out_log, stderr=subprocess.STDOUT
            )
        try:
            wait_healthy(process, url, log)
            client = lakefs.Client(host=url, username=ADMIN[0], password=ADMIN[1])
            manifest = write_history(client, url)
        finally:
            stop_process(process)
        manifest["written_by"] = _revision(sources)
        with tarfile.open(out, "w:gz") as tar:
            tar.add(data, arcname="data")
            raw = json.dumps(manifest, indent=2, sort_keys=True).encode()
            info = tarfile.TarInfo(MANIFEST)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return manifest


def _revision(sources: Path) -> str:
    marker = sources / "REVISION"
    return marker.read_text().strip() if marker.exists() else str(sources)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the fixture."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.upgrade_fixture")
    parser.add_argument("--sources", type=Path, required=True, help="the earlier release's tree")
    parser.add_argument("--out", type=Path, required=True, help="the .tar.gz to write")
    args = parser.parse_args(argv)
    manifest = write_fixture(args.sources.resolve(), args.out)
    print(json.dumps(manifest["commits"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

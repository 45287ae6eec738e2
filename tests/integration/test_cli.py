"""The `lakemirror` client commands, run as subprocesses against a live `lakemirror server`."""

from __future__ import annotations

import errno
import json
import os
import pty
import random
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest

from tests.integration.harness import Server, free_port, unique


@dataclass(frozen=True)
class Result:
    code: int
    stdout: bytes
    stderr: str

    @property
    def out(self) -> str:
        return self.stdout.decode()

    def json(self) -> Any:
        return json.loads(self.stdout)


class CLI:
    """Run `python -m mirror.cli.main` with a clean environment plus the given variables."""

    def __init__(self, home: Path, env: Mapping[str, str]) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
        base["HOME"] = str(home)
        self.home = home
        self.base = base
        self.env = dict(env)

    def start(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        replace_env: bool = False,
        stdin: bytes | None = None,
        cwd: Path | None = None,
    ) -> Callable[[], Result]:
        """Start the command; return a function that waits for its result."""
        full = dict(self.base)
        if not replace_env:
            full.update(self.env)
        full.update(env or {})
        process = subprocess.Popen(
            [sys.executable, "-m", "mirror.cli.main", *args],
            env=full,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or self.home,
        )

        def finish() -> Result:
            out, err = process.communicate(stdin or b"", timeout=60)
            return Result(process.returncode, out, err.decode())

        return finish

    def __call__(self, *args: str, **kwargs: Any) -> Result:
        return self.start(*args, **kwargs)()

    def all(self, *commands: Sequence[str]) -> list[Result]:
        """Run independent commands at the same time; results in order."""
        waits = [self.start(*command) for command in commands]
        return [finish() for finish in waits]

    def ok(self, *args: str, **kwargs: Any) -> Result:
        result = self(*args, **kwargs)
        assert result.code == 0, result.stderr
        assert result.stderr == ""
        return result


def assert_one_line_error(result: Result, code: int, *needles: str) -> None:
    assert result.code == code, (result.code, result.stderr)
    assert result.stdout == b""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lakemirror: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.fixture(scope="session")
def cli(server: Server, tmp_path_factory: pytest.TempPathFactory) -> CLI:
    return CLI(
        tmp_path_factory.mktemp("home"),
        {
            "LAKECTL_SERVER_ENDPOINT_URL": server.url,
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": server.access_key_id,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": server.secret_access_key,
        },
    )


@pytest.fixture
def name(repo: lakefs.Repository) -> str:
    """A fresh repository (created through the SDK) with `main` as its default branch."""
    return repo.id


def put(http: httpx.Client, repo: str, branch: str, path: str, data: bytes) -> None:
    response = http.post(
        f"/repositories/{repo}/branches/{branch}/objects", params={"path": path}, content=data
    )
    assert response.status_code == 201, response.text


def commit(http: httpx.Client, repo: str, branch: str, message: str) -> str:
    response = http.post(
        f"/repositories/{repo}/branches/{branch}/commits", json={"message": message}
    )
    assert response.status_code == 201, response.text
    commit_id: str = response.json()["id"]
    return commit_id


def read(http: httpx.Client, repo: str, ref: str, path: str) -> bytes:
    response = http.get(f"/repositories/{repo}/refs/{ref}/objects", params={"path": path})
    assert response.status_code == 200, response.text
    return response.content


def uncommitted(http: httpx.Client, repo: str, branch: str) -> list[str]:
    response = http.get(f"/repositories/{repo}/branches/{branch}/diff")
    assert response.status_code == 200, response.text
    return [d["path"] for d in response.json()["results"]]


# -- repo ----------------------------------------------------------------------------------------


def test_repo_create_show_list_delete(cli: CLI, http: httpx.Client, tmp_path: Path) -> None:
    repo = unique("cli-repo")
    uri = f"lakefs://{repo}"
    created = cli.ok("repo", "create", uri, "--default-branch", "trunk", "--read-only")
    assert uri in created.out and f"local://{repo}" in created.out and "trunk" in created.out

    (tmp_path / "f").write_bytes(b"x")
    shown, listed, table, again, upload, refused = cli.all(
        ("repo", "show", uri, "--output", "json"),
        ("-o", "json", "repo", "list", "--prefix", repo),
        ("repo", "list", "--prefix", repo),
        ("repo", "create", uri),
        ("fs", "upload", f"{uri}/trunk/f", "-s", str(tmp_path / "f")),
        ("repo", "delete", uri, "--yes"),
    )
    assert shown.json()["id"] == repo
    assert (shown.json()["default_branch"], shown.json()["read_only"]) == ("trunk", True)
    assert [r["id"] for r in listed.json()] == [repo]
    lines = table.out.splitlines()
    assert lines[0].split()[:2] == ["REPOSITORY", "CREATED"]
    assert lines[1].startswith(repo + " ")
    assert_one_line_error(again, 5, "already exists", "409 Conflict")
    assert_one_line_error(upload, 3, repo, "read-only", "403")
    assert_one_line_error(refused, 3, "read-only")

    deleted = cli.ok("repo", "delete", uri, "--force", "-y", "-o", "json").json()
    assert deleted == {"deleted": uri}
    assert http.get(f"/repositories/{repo}").status_code == 404
    assert_one_line_error(cli("repo", "show", uri), 4, repo, "404 Not Found")


# -- branch --------------------------------------------------------------------------------------


def test_branch_create_list_show_delete(cli: CLI, name: str, http: httpx.Client) -> None:
    main_head = http.get(f"/repositories/{name}/branches/main").json()["commit_id"]
    created = cli.ok(
        "branch", "create", f"lakefs://{name}/dev", "-s", f"lakefs://{name}/main", "-o", "json"
    ).json()
    assert created == {"id": "dev", "commit_id": main_head}
    cli.ok("branch", "create", f"lakefs://{name}/feature", "-s", "dev")

    listed, first, shown, again = cli.all(
        ("branch", "list", f"lakefs://{name}", "-o", "json"),
        ("branch", "list", f"lakefs://{name}", "--amount", "1", "-o", "json"),
        ("branch", "show", f"lakefs://{name}/dev"),
        ("branch", "create", f"lakefs://{name}/dev", "-s", "main"),
    )
    assert [b["id"] for b in listed.json()] == ["dev", "feature", "main"]
    assert [b["id"] for b in first.json()] == ["dev"]
    assert f"lakefs://{name}/dev" in shown.out and main_head in shown.out
    assert_one_line_error(again, 5, "already exists")

    assert "deleted branch" in cli.ok("branch", "delete", f"lakefs://{name}/feature", "-y").out
    assert http.get(f"/repositories/{name}/branches/feature").status_code == 404
    assert_one_line_error(cli("branch", "delete", f"lakefs://{name}/feature"), 4, "feature")


def test_branch_reset_and_revert(cli: CLI, name: str, http: httpx.Client) -> None:
    for path in ("keep/a", "drop/b", "drop/c", "x"):
        put(http, name, "main", path, b"data")
    cli.ok("branch", "reset", f"lakefs://{name}/main", "--object", "x", "--yes")
    assert uncommitted(http, name, "main") == ["drop/b", "drop/c", "keep/a"]
    cli.ok("branch", "reset", f"lakefs://{name}/main", "--prefix", "drop/")
    assert uncommitted(http, name, "main") == ["keep/a"]
    reset = cli.ok("branch", "reset", f"lakefs://{name}/main", "-o", "json").json()
    assert reset == {"branch": f"lakefs://{name}/main", "type": "reset", "path": None}
    assert uncommitted(http, name, "main") == []

    put(http, name, "main", "v", b"1")
    commit(http, name, "main", "v=1")
    put(http, name, "main", "v", b"2")
    second = commit(http, name, "main", "v=2")
    head = cli.ok("branch", "revert", f"lakefs://{name}/main", second, "-o", "json").json()
    assert head["parents"] == [second]
    assert read(http, name, "main", "v") == b"1"
    assert_one_line_error(cli("branch", "revert", f"lakefs://{name}/main", "nosuchref"), 4)


# -- tag -----------------------------------------------------------------------------------------


def test_tag_create_list_show_delete(cli: CLI, name: str, http: httpx.Client) -> None:
    put(http, name, "main", "a", b"a")
    first = commit(http, name, "main", "one")
    put(http, name, "main", "b", b"b")
    second = commit(http, name, "main", "two")

    tag = cli.ok("tag", "create", f"lakefs://{name}/v1", f"lakefs://{name}/main~1", "-o", "json")
    assert tag.json() == {"id": "v1", "commit_id": first}
    again, elsewhere = cli.all(
        ("tag", "create", f"lakefs://{name}/v1", "main"),
        ("tag", "create", f"lakefs://{name}/v2", "lakefs://other-repo/main"),
    )
    assert_one_line_error(again, 5, "v1", "already exists")
    assert_one_line_error(elsewhere, 2, "other-repo")
    moved = cli.ok("tag", "create", f"lakefs://{name}/v1", "main", "--force", "-o", "json").json()
    assert moved["commit_id"] == second
    cli.ok("tag", "create", f"lakefs://{name}/v0", first)

    listed, shown = cli.all(
        ("tag", "list", f"lakefs://{name}", "-o", "json"),
        ("tag", "show", f"lakefs://{name}/v1"),
    )
    assert listed.json() == [{"id": "v0", "commit_id": first}, {"id": "v1", "commit_id": second}]
    assert second in shown.out
    cli.ok("tag", "delete", f"lakefs://{name}/v1", "-y")
    assert_one_line_error(cli("tag", "show", f"lakefs://{name}/v1", "-o", "json"), 4, "v1")


# -- commit, log, show ---------------------------------------------------------------------------


def test_commit_log_and_show(cli: CLI, name: str, http: httpx.Client) -> None:
    uri = f"lakefs://{name}/main"
    put(http, name, "main", "a", b"a")
    made = cli.ok(
        "commit", uri, "-m", "add a", "--meta", "team=data", "--meta", "run=7", "-o", "json"
    ).json()
    assert made["message"] == "add a"
    assert made["metadata"] == {"team": "data", "run": "7"}

    nothing, no_message, bad_meta = cli.all(
        ("commit", uri, "-m", "nothing"),
        ("commit", uri),
        ("commit", uri, "-m", "x", "--meta", "novalue"),
    )
    assert_one_line_error(nothing, 6, "no changes", "400")
    assert_one_line_error(no_message, 2, "message")
    assert_one_line_error(bad_meta, 2, "key=value")
    empty = cli.ok("commit", uri, "-m", "empty", "--allow-empty").out
    assert "committed to" in empty and "empty" in empty

    log, oneline, text, shown, pretty = cli.all(
        ("log", uri, "-o", "json"),
        ("log", uri, "--oneline", "--amount", "1"),
        ("log", uri, "--amount", "2"),
        ("show", "commit", f"lakefs://{name}/{made['id'][:12]}", "-o", "json"),
        ("show", "commit", f"lakefs://{name}/main~1", "--show-meta-range-id"),
    )
    history = log.json()
    assert [c["message"] for c in history] == ["empty", "add a", "Repository created"]
    assert oneline.out.splitlines() == [f"{history[0]['id'][:16]} empty"]
    assert "team = data" in text.out and made["id"] in text.out
    assert "Repository created" not in text.out
    assert shown.json() == made
    assert made["meta_range_id"] in pretty.out and "add a" in pretty.out


def test_log_first_parent(cli: CLI, name: str, http: httpx.Client) -> None:
    http.post(f"/repositories/{name}/branches", json={"name": "side", "source": "main"})
    put(http, name, "side", "s", b"s")
    side = commit(http, name, "side", "on side")
    cli.ok("merge", f"lakefs://{name}/side", f"lakefs://{name}/main")
    full, first = cli.all(
        ("log", f"lakefs://{name}/main", "-o", "json"),
        ("log", f"lakefs://{name}/main", "--first-parent", "-o", "json"),
    )
    assert side in [c["id"] for c in full.json()]
    assert side not in [c["id"] for c in first.json()]
    assert len(first.json()) == len(full.json()) - 1


# -- diff ----------------------------------------------------------------------------------------


def test_diff_two_way_three_dot_and_uncommitted(cli: CLI, name: str, http: httpx.Client) -> None:
    put(http, name, "main", "base", b"base")
    commit(http, name, "main", "base")
    http.post(f"/repositories/{name}/branches", json={"name": "dev", "source": "main"})
    put(http, name, "dev", "dev-only", b"d")
    commit(http, name, "dev", "dev change")
    put(http, name, "main", "main-only", b"m")
    commit(http, name, "main", "main change")
    put(http, name, "dev", "base", b"changed")
    http.delete(f"/repositories/{name}/branches/dev/objects", params={"path": "dev-only"})

    left, right = f"lakefs://{name}/main", f"lakefs://{name}/dev"
    three, two, table, staged, missing = cli.all(
        ("diff", left, right, "-o", "json"),
        ("diff", left, "dev", "--two-way", "-o", "json"),
        ("diff", left, right, "--two-way"),
        ("diff", right, "-o", "json"),
        ("diff", left, "nosuch"),
    )
    assert [(d["type"], d["path"]) for d in three.json()] == [("added", "dev-only")]
    assert [(d["type"], d["path"]) for d in two.json()] == [
        ("added", "dev-only"),
        ("removed", "main-only"),
    ]
    assert table.out.splitlines() == ["+ added    dev-only  (1 B)", "- removed  main-only"]
    assert [(d["type"], d["path"]) for d in staged.json()] == [
        ("changed", "base"),
        ("removed", "dev-only"),
    ]
    assert_one_line_error(missing, 4, "nosuch")
    assert cli.ok("diff", left).out == "no differences\n"


# -- merge, cherry-pick --------------------------------------------------------------------------


def test_merge_conflict_strategies_and_empty(cli: CLI, name: str, http: httpx.Client) -> None:
    put(http, name, "main", "f", b"base")
    commit(http, name, "main", "base")
    for branch in ("left", "right"):
        http.post(f"/repositories/{name}/branches", json={"name": branch, "source": "main"})
    put(http, name, "left", "f", b"left")
    commit(http, name, "left", "left")
    put(http, name, "right", "f", b"right")
    commit(http, name, "right", "right")

    src, dest = f"lakefs://{name}/left", f"lakefs://{name}/right"
    conflict, bad_strategy = cli.all(
        ("merge", src, dest), ("merge", src, dest, "--strategy", "both-win")
    )
    assert_one_line_error(conflict, 5, "conflict", "'f'")
    assert bad_strategy.code == 2 and "both-win" in bad_strategy.stderr
    assert read(http, name, "right", "f") == b"right"

    kept = cli.ok("merge", src, dest, "--strategy", "dest-wins", "-o", "json").json()
    assert read(http, name, "right", "f") == b"right"
    assert http.get(f"/repositories/{name}/branches/right").json()["commit_id"] == kept["reference"]

    put(http, name, "left", "f", b"left again")
    commit(http, name, "left", "left again")
    put(http, name, "right", "f", b"right again")
    commit(http, name, "right", "right again")
    taken = cli.ok("merge", src, "right", "--strategy", "source-wins", "-m", "take left").out
    assert taken.startswith(f"merged {src} into {dest}: ")
    assert read(http, name, "right", "f") == b"left again"
    assert http.get(f"/repositories/{name}/commits/right").json()["message"] == "take left"

    assert_one_line_error(cli("merge", src, dest), 6, "no changes")
    cli.ok("merge", src, dest, "--allow-empty")
    put(http, name, "right", "dirty", b"x")
    dirty = cli("merge", f"lakefs://{name}/main", dest, "--allow-empty")
    assert_one_line_error(dirty, 6, "uncommitted changes")


def test_cherry_pick(cli: CLI, name: str, http: httpx.Client) -> None:
    http.post(f"/repositories/{name}/branches", json={"name": "dev", "source": "main"})
    put(http, name, "dev", "one", b"1")
    picked_id = commit(http, name, "dev", "one")
    put(http, name, "dev", "two", b"2")
    commit(http, name, "dev", "two")

    picked, missing = cli.all(
        ("cherry-pick", f"lakefs://{name}/{picked_id}", f"lakefs://{name}/main", "-o", "json"),
        ("cherry-pick", f"lakefs://{name}/nosuch", "main"),
    )
    assert picked.json()["message"] == "one"
    listed = http.get(f"/repositories/{name}/refs/main/objects/ls").json()["results"]
    assert [o["path"] for o in listed] == ["one"]
    assert_one_line_error(missing, 4, "nosuch")


# -- fs ------------------------------------------------------------------------------------------


def test_fs_upload_stat_cat_ls_rm(cli: CLI, name: str, http: httpx.Client, tmp_path: Path) -> None:
    data = random.Random(1).randbytes(70_000)
    file = tmp_path / "blob.bin"
    file.write_bytes(data)
    base = f"lakefs://{name}/main"
    uploaded = cli.ok(
        "fs", "upload", f"{base}/in/", "-s", str(file),
        "--content-type", "application/x-test", "--meta", "Origin=cli", "-o", "json",
    ).json()  # fmt: skip
    assert uploaded["path"] == "in/blob.bin"
    assert uploaded["size_bytes"] == len(data)
    cli.ok("fs", "upload", f"{base}/in/deep/s.txt", "-s", "-", stdin=b"from stdin")
    assert read(http, name, "main", "in/deep/s.txt") == b"from stdin"

    stat, pretty, cat, top, table, everything = cli.all(
        ("fs", "stat", f"{base}/in/blob.bin", "-o", "json"),
        ("fs", "stat", f"{base}/in/blob.bin"),
        ("fs", "cat", f"{base}/in/blob.bin"),
        ("fs", "ls", f"{base}/in/", "-o", "json"),
        ("fs", "ls", f"{base}/"),
        ("fs", "ls", "-r", f"{base}/", "-o", "json"),
    )
    assert stat.json()["content_type"] == "application/x-test"
    assert stat.json()["metadata"] == {"origin": "cli"}
    assert "70000 bytes" in pretty.out and "origin = cli" in pretty.out
    assert cat.stdout == data
    assert [(o["path_type"], o["path"]) for o in top.json()] == [
        ("object", "in/blob.bin"),
        ("common_prefix", "in/deep/"),
    ]
    assert [line.split() for line in table.out.splitlines()] == [
        ["TYPE", "MODIFIED", "SIZE", "PATH"],
        ["prefix", "in/"],
    ]
    assert [o["path"] for o in everything.json()] == ["in/blob.bin", "in/deep/s.txt"]

    cli.ok("fs", "rm", f"{base}/in/blob.bin")
    assert uncommitted(http, name, "main") == ["in/deep/s.txt"]
    gone, cat_gone, no_source, a_directory = cli.all(
        ("fs", "rm", f"{base}/in/blob.bin"),
        ("fs", "cat", f"{base}/in/blob.bin"),
        ("fs", "upload", f"{base}/x", "-s", str(tmp_path / "missing")),
        ("fs", "upload", f"{base}/x", "-s", str(tmp_path)),
    )
    assert_one_line_error(gone, 4, "blob.bin")
    assert_one_line_error(cat_gone, 4, "blob.bin")
    assert_one_line_error(no_source, 4, "missing")
    assert_one_line_error(a_directory, 2, "--recursive")


def make_tree(root: Path) -> dict[str, bytes]:
    rng = random.Random(7)
    files = {
        "top.txt": b"top level\n",
        "empty": b"",
        "a/one.csv": b"id,value\n1,2\n",
        "a/b/c/deep.bin": rng.randbytes(1_500_000),
        "a/b/sibling.bin": rng.randbytes(4096),
        "x y/with space.txt": "ünïcode ✓\n".encode(),
        "z/z/z/z/last": rng.randbytes(33),
    }
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return files


def tree_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_recursive_upload_and_download_round_trip(
    cli: CLI, name: str, http: httpx.Client, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    files = make_tree(source)
    uploaded = cli.ok(
        "fs", "upload", f"lakefs://{name}/main/tree", "-s", str(source), "--recursive", "-o", "json"
    ).json()  # fmt: skip
    assert sorted(o["path"] for o in uploaded) == sorted(f"tree/{p}" for p in files)
    commit_id = commit(http, name, "main", "tree")
    # "tree" is a directory-like prefix: the sibling "treehouse" stays out of downloads
    put(http, name, "main", "treehouse/not-me", b"no")

    copy, work, single = tmp_path / "copy", tmp_path / "work", tmp_path / "single"
    work.mkdir()
    single.mkdir()
    by_commit, into_dir, renamed = cli.all(
        ("fs", "download", f"lakefs://{name}/{commit_id}/tree/", str(copy), "-r"),
        ("fs", "download", f"lakefs://{name}/main/tree/a/b/c/deep.bin", str(single)),
        ("fs", "download", f"lakefs://{name}/main/tree/top.txt", str(single / "renamed")),
    )
    for result in (by_commit, into_dir, renamed):
        assert result.code == 0, result.stderr
    assert by_commit.out.startswith(f"downloaded {len(files)} objects (1.4 MiB) from ")
    assert tree_of(copy) == files
    assert not list(copy.rglob(".lakemirror-*"))
    assert (single / "deep.bin").read_bytes() == files["a/b/c/deep.bin"]
    assert (single / "renamed").read_bytes() == files["top.txt"]
    rows = cli.ok(
        "fs", "download", f"lakefs://{name}/main/tree", "-r", "-p", "1", "-o", "json", cwd=work
    ).json()  # fmt: skip
    assert sorted(r["path"] for r in rows) == sorted(f"tree/{p}" for p in files)
    assert tree_of(work) == files

    removed = cli.ok("fs", "rm", "-r", f"lakefs://{name}/main/tree", "-o", "json").json()
    assert sorted(removed["deleted"]) == sorted(f"tree/{p}" for p in files)
    left = http.get(f"/repositories/{name}/refs/main/objects/ls").json()["results"]
    assert [o["path"] for o in left] == ["treehouse/not-me"]


def test_download_refuses_paths_that_leave_the_target(
    cli: CLI, name: str, http: httpx.Client, tmp_path: Path
) -> None:
    put(http, name, "main", "d/../../escape", b"x")
    refused = cli("fs", "download", f"lakefs://{name}/main/d/", str(tmp_path / "t"), "-r")
    assert_one_line_error(refused, 1, "not a safe local file name")
    assert not (tmp_path / "escape").exists()


def test_progress_bar_only_on_a_terminal(cli: CLI, name: str, tmp_path: Path) -> None:
    source = tmp_path / "source"
    make_tree(source)
    command = ("fs", "upload", f"lakefs://{name}/main/t/", "-s", str(source), "-r")
    quiet = cli.ok(*command)
    assert quiet.stderr == ""
    assert quiet.out == f"uploaded 7 objects (1.4 MiB) to lakefs://{name}/main/t/\n"

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror.cli.main", *command],
        env={**cli.base, **cli.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
        cwd=tmp_path,
    )
    os.close(secondary)
    drawn = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError as exc:  # EIO: the child closed the terminal
            assert exc.errno == errno.EIO
            break
        if not chunk:
            break
        drawn += chunk
    os.close(primary)
    assert process.wait(timeout=60) == 0
    bar = drawn.decode()
    assert "uploading [" in bar
    assert "100%" in bar and "7/7 files" in bar
    assert bar.endswith("\n")


# -- exit codes, errors, configuration -----------------------------------------------------------


def test_usage_errors_exit_2(cli: CLI) -> None:
    missing, unknown, zero, not_uri, no_ref, no_path = cli.all(
        ("branch", "create", "lakefs://repo1/b"),
        ("nosuchcommand",),
        ("fs", "ls", "lakefs://repo1/main", "--amount", "0"),
        ("repo", "show", "not-a-uri"),
        ("branch", "show", "lakefs://repo1"),
        ("fs", "stat", "lakefs://repo1/main/"),
    )
    for result in (missing, unknown, zero):
        assert result.code == 2
        assert result.stderr.startswith("usage: ") and "Traceback" not in result.stderr
    assert "--source" in missing.stderr
    assert_one_line_error(not_uri, 2, "lakefs://")
    assert_one_line_error(no_ref, 2, "lakefs://<repository>/<ref>")
    assert_one_line_error(no_path, 2, "object path")


def test_auth_failures_exit_3_without_leaking_secrets(
    cli: CLI, server: Server, name: str, http: httpx.Client
) -> None:
    user = unique("reader")
    assert http.post("/auth/users", json={"id": user}).status_code == 201
    assert http.put(f"/auth/groups/Readers/members/{user}").status_code == 201
    key = http.post(f"/auth/users/{user}/credentials").json()
    reader = {
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": key["access_key_id"],
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": key["secret_access_key"],
    }
    wrong = "wrong-" + server.secret_access_key[::-1]
    waits = (
        cli.start("repo", "list", env={"LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": wrong}),
        cli.start("branch", "list", f"lakefs://{name}", env=reader),
        cli.start("branch", "create", f"lakefs://{name}/nope", "-s", "main", env=reader),
    )
    bad_secret, listed, denied = (finish() for finish in waits)
    assert_one_line_error(bad_secret, 3, "401", "error authenticating request: invalid credentials")
    assert listed.code == 0 and listed.out.startswith("BRANCH")
    assert_one_line_error(denied, 3, "403")
    for result in (bad_secret, denied):
        for secret in (wrong, server.secret_access_key, key["secret_access_key"]):
            assert secret not in result.stderr
    assert http.delete(f"/auth/users/{user}").status_code == 204


def test_unreachable_server_exits_7(cli: CLI) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"
    result = cli("repo", "list", env={"LAKECTL_SERVER_ENDPOINT_URL": endpoint})
    assert_one_line_error(result, 7, "cannot reach the server", endpoint + "/api/v1")


def write_config(path: Path, endpoint: str, key: str, secret: str) -> Path:
    path.write_text(
        f"server:\n  endpoint_url: {endpoint}\n"
        f"credentials:\n  access_key_id: {key}\n  secret_access_key: {secret}\n"
    )
    return path


def test_config_file_locations_and_env_precedence(cli: CLI, server: Server, tmp_path: Path) -> None:
    key, secret = server.access_key_id, server.secret_access_key
    good = write_config(tmp_path / "good.yaml", server.url, key, secret)
    bad = write_config(tmp_path / "bad.yaml", server.url + "/api/v1/", key, "not-the-secret")
    home = tmp_path / "home"
    home.mkdir()
    write_config(home / ".lakectl.yaml", server.url.removeprefix("http://"), key, secret)
    elsewhere = f"http://127.0.0.1:{free_port()}"

    def run(*args: str, **env: str) -> Callable[[], Result]:
        return cli.start("repo", "list", *args, replace_env=True, env=env)

    cases = {
        # the file alone: --config, LAKECTL_CONFIG_FILE, ~/.lakectl.yaml (no scheme: http)
        "flag": (run("--config", str(good)), 0),
        "variable": (run(LAKECTL_CONFIG_FILE=str(good)), 0),
        "home": (run(HOME=str(home)), 0),
        # --config beats LAKECTL_CONFIG_FILE, which beats ~/.lakectl.yaml
        "flag over variable": (run("-c", str(bad), LAKECTL_CONFIG_FILE=str(good)), 3),
        "variable over home": (run(HOME=str(home), LAKECTL_CONFIG_FILE=str(bad)), 3),
        # the environment beats the file, key by key
        "env fixes secret": (run("-c", str(bad), LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=secret), 0),
        "env breaks secret": (
            run("-c", str(good), LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY="not-the-secret"),
            3,
        ),
        "env moves endpoint": (run("-c", str(good), LAKECTL_SERVER_ENDPOINT_URL=elsewhere), 7),
    }
    codes = {case: finish().code for case, (finish, _) in cases.items()}
    assert codes == {case: expected for case, (_, expected) in cases.items()}


def test_config_errors_exit_2(cli: CLI, server: Server, tmp_path: Path) -> None:
    secret = "s3cr3t-value-that-must-not-print"
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"credentials:\n  secret_access_key: {secret}\n\tbad: [\n")
    absent, invalid, nothing, bad_url = (
        cli.start("repo", "list", "--config", str(tmp_path / "absent.yaml")),
        cli.start("repo", "list", "--config", str(broken), replace_env=True),
        cli.start(
            "repo", "list", replace_env=True, env={"LAKECTL_SERVER_ENDPOINT_URL": server.url}
        ),
        cli.start("repo", "list", env={"LAKECTL_SERVER_ENDPOINT_URL": "ftp://host"}),
    )
    assert_one_line_error(absent(), 2, "absent.yaml")
    result = invalid()
    assert_one_line_error(result, 2, "not valid YAML")
    assert secret not in result.stderr
    assert_one_line_error(nothing(), 2, "no credentials")
    assert_one_line_error(bad_url(), 2, "endpoint")

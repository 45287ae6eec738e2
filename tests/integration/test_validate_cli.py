"""`lakemirror validate`: a commit read through a live server, or a metarange, checked in place."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import lakefs
import pytest

from mirror.cli.validate_cmd import register_validate_command, run_validate
from mirror.core.committed import METADATA_PREFIX
from tests.integration.harness import Server

ROOT = Path(__file__).resolve().parents[2]
FILES = {f"tables/t/part-{i:03d}.parquet": b"x" * (i + 1) for i in range(30)}


def parser() -> argparse.ArgumentParser:
    """The command line as `lakemirror` builds it: a top-level lakectl `-c`, the subcommand."""
    top = argparse.ArgumentParser(prog="lakemirror")
    top.add_argument("-c", "--config", default=None)
    register_validate_command(top.add_subparsers(dest="command", required=True))
    return top


def validate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_validate(parser().parse_args(["validate", *args]), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def signed_in(server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Server:
    """Point lakectl's variables at the server; keep ~/.lakectl.yaml and LAKEMIRROR_* out."""
    for name in list(os.environ):
        if name.startswith(("LAKECTL_", "LAKEMIRROR_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", server.url)
    monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", server.access_key_id)
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", server.secret_access_key)
    return server


@pytest.fixture
def committed(repo: lakefs.Repository) -> tuple[lakefs.Repository, str]:
    """A repository with one commit of 30 objects; returns it and the commit's metarange ID."""
    main = repo.branch("main")
    for path, data in FILES.items():
        main.object(path).upload(data)
    commit = main.commit("thirty objects").get_commit()
    return repo, commit.meta_range_id


def namespace_dir(server: Server, repo: lakefs.Repository) -> Path:
    name = repo.properties.storage_namespace.removeprefix("local://")
    return server.data_dir / name


def data_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "data").rglob("*") if p.is_file())


def test_commit_through_the_server(
    signed_in: Server, committed: tuple[lakefs.Repository, str]
) -> None:
    repo, metarange_id = committed
    common = ["--repository", repo.id, "--data-dir", str(signed_in.data_dir)]
    code, out, err = validate(*common, "--commit", "main")
    assert (code, err) == (0, "")
    assert out.startswith(f"complete: metarange {metarange_id} in local://")
    assert "30 objects checked" in out

    victim = data_files(namespace_dir(signed_in, repo))[3]
    victim.unlink()
    code, out, _ = validate(*common, "--commit", "main", "-o", "json", "--server", signed_in.url)
    assert code == 1
    report = json.loads(out)
    assert report["complete"] is False
    assert report["missing_count"] == 1
    assert report["missing"] == [str(victim.relative_to(namespace_dir(signed_in, repo)))]
    assert report["requests"]["get"] >= 2  # the metarange and its range


def test_metarange_in_a_namespace(
    signed_in: Server, committed: tuple[lakefs.Repository, str]
) -> None:
    repo, metarange_id = committed
    root = namespace_dir(signed_in, repo)
    where = ["--namespace", f"local://{root}"]
    code, out, _ = validate(*where, "--metarange", metarange_id)
    assert code == 0, out
    (root / METADATA_PREFIX / metarange_id).unlink()
    code, out, _ = validate(*where, "--metarange", metarange_id)
    assert code == 1
    assert f"missing: 1\n  {METADATA_PREFIX}{metarange_id}" in out


def test_server_errors_keep_their_exit_codes(
    signed_in: Server, committed: tuple[lakefs.Repository, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = committed
    code, _, err = validate("--repository", repo.id, "--commit", "no-such-ref")
    assert code == 4 and err.startswith("lakemirror validate: ")
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", "wrong")
    code, _, _ = validate("--repository", repo.id, "--commit", "main")
    assert code == 3


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--metarange", "abc"],  # no namespace
        ["--metarange", "abc", "--commit", "main", "--namespace", "local:///x"],
        ["--commit", "main"],  # no repository
        ["--metarange", "abc", "--namespace", "mem://x"],
        ["--metarange", "abc", "--namespace", "not a uri"],
        ["--metarange", "abc", "--namespace", "local:///x", "--sample", "-1"],
        ["--metarange", "abc", "--namespace", "local:///x", "--concurrency", "0"],
        ["--metarange", "abc", "--namespace", "local:///x", "--listing", "/l.parquet"],
    ],
)
def test_bad_usage_exits_2(args: list[str]) -> None:
    code, out, err = validate(*args)
    assert (code, out) == (2, "")
    assert err.startswith("lakemirror validate: ") and err.count("\n") == 1


def test_unknown_engine_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["validate", "--engine", "hadoop", "--metarange", "a"])
    assert exc.value.code == 2


@pytest.mark.spark
@pytest.mark.slow
def test_spark_engine(signed_in: Server, committed: tuple[lakefs.Repository, str]) -> None:
    repo, metarange_id = committed
    root = namespace_dir(signed_in, repo)
    victims = data_files(root)[:2]
    for victim in victims:
        victim.unlink()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror.cli.validate_cmd",
            "validate",
            "--engine",
            "spark",
            "--namespace",
            f"local://{root}",
            "--metarange",
            metarange_id,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["engine"] == "spark"
    assert report["missing"] == sorted(str(v.relative_to(root)) for v in victims)
    assert (report["objects_checked"], report["external_count"]) == (30, 0)

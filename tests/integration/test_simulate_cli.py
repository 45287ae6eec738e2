"""`lakemirror simulate-replication`: files arrive, signals stop it, bad input exits 2."""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from mirror.cli.simulate_cmd import register_simulate_command, run_simulate
from tests.integration.moto_fixtures import (
    ACCESS_KEY,
    SECRET_KEY,
    MotoServer,
    create_bucket,
    s3_settings,
    unique_name,
)

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mirror.cli.simulate_cmd", "simulate-replication", *args]


def environment(tmp_path: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Return the environment without LAKEMIRROR_* or AWS_* settings, data under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEMIRROR_", "AWS_"))}
    env["LAKEMIRROR_DATA_DIR"] = str(tmp_path / "data")
    env.update(extra or {})
    return env


def run(args: Sequence[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args),
        capture_output=True,
        text=True,
        env=environment(tmp_path),
        cwd=ROOT,
        timeout=DEADLINE,
    )


def start(
    args: Sequence[str], tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(tmp_path, env),
        cwd=ROOT,
    )


def wait_for(condition: Callable[[], bool], what: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if process.poll() is not None:
            out, err = process.communicate()
            raise AssertionError(f"exited with {process.returncode} before {what}: {out}{err}")
        if time.monotonic() > deadline:
            process.kill()
            process.communicate()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not str(p.relative_to(root)).startswith(".lakemirror-tmp")
    }


def write(root: Path, files: dict[str, bytes]) -> None:
    for key, body in files.items():
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def test_copies_every_file_within_the_duration(tmp_path: Path) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    files = {f"data/p{i % 3}/obj-{i}": os.urandom(i * 37) for i in range(30)}
    files["_lakefs/meta"] = b"metarange"
    write(source, files)
    result = run(
        [
            f"--from=local://{source}",
            f"--to=local://{destination}",
            "--delay=0:0.3",
            "--drop=0.2",
            "--drop-for=0.02:0.1",
            "--small-first",
            "--seed=5",
            "--poll=0.05",
            "--duration=1.5",
        ],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert tree(destination) == files
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"replicating local://{source} -> local://{destination}")
    assert len(lines) >= 3  # the banner, about one progress line a second, the last one
    assert "copied=31 pending=0" in lines[-1]


def test_resume_copies_only_what_the_destination_lacks(tmp_path: Path) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    files = {f"data/obj-{i}": os.urandom(40 + i) for i in range(12)}
    write(source, files)
    # an earlier run got two thirds across before it was killed
    write(destination, {key: files[key] for key in sorted(files)[:8]})
    args = [f"--from=local://{source}", f"--to=local://{destination}", "--poll=0.05"]
    result = run([*args, "--resume", "--duration=0.5"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert tree(destination) == files
    assert "copied=4 pending=0" in result.stdout.splitlines()[-1]
    assert "resumed=8" in result.stdout.splitlines()[-1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_replicates_files_written_while_running_until_signalled(tmp_path: Path, sig: int) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    process = start(
        [f"--from=local://{source}", f"--to=local://{destination}", "--delay=0:0.2", "--poll=0.05"],
        tmp_path,
    )
    try:
        files: dict[str, bytes] = {}
        for batch in range(3):
            new = {f"data/{batch}/{i}": f"{batch}-{i}".encode() for i in range(5)}
            write(source, new)
            files |= new
            expected = dict(files)
            wait_for(
                lambda expected=expected: tree(destination) == expected,  # type: ignore[misc]
                f"batch {batch} to arrive",
                process,
            )
        process.send_signal(sig)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert err == ""
    assert "copied=15 pending=0" in out.splitlines()[-1]


def test_replicates_deletions_when_asked(tmp_path: Path) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    process = start(
        [
            f"--from=local://{source}",
            f"--to=local://{destination}",
            "--replicate-deletes",
            "--delay=0:0.3",
            "--drop=0.2",
            "--drop-for=0.02:0.1",
            "--seed=9",
            "--poll=0.05",
        ],
        tmp_path,
    )
    try:
        files = {f"data/p{i % 4}/obj-{i}": os.urandom(50 + i) for i in range(20)}
        write(source, files)
        wait_for(lambda: tree(destination) == files, "every file to arrive", process)
        for key in sorted(files)[::2]:
            (source / key).unlink()
            del files[key]
        # a file written after the deletions still arrives
        write(source, {"data/late": b"late"})
        files["data/late"] = b"late"
        wait_for(lambda: tree(destination) == files, "the deletions to replicate", process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert err == ""
    lines = out.splitlines()
    assert "deletes replicated" in lines[0]
    assert "copied=21 pending=0" in lines[-1]
    assert "deleted=10" in lines[-1] and "deletes_pending" not in lines[-1]
    assert tree(destination) == tree(source) == files


def test_deletions_are_not_replicated_by_default(tmp_path: Path) -> None:
    source, destination = tmp_path / "a", tmp_path / "b"
    files = {f"data/{i}": f"{i}".encode() for i in range(6)}
    write(source, files)
    process = start(
        [f"--from=local://{source}", f"--to=local://{destination}", "--poll=0.05"], tmp_path
    )
    try:
        wait_for(lambda: tree(destination) == files, "every file to arrive", process)
        for key in ("data/0", "data/1"):
            (source / key).unlink()
        write(source, {"data/late": b"late"})
        wait_for(lambda: "data/late" in tree(destination), "the file written last", process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "deletes replicated" not in out.splitlines()[0]
    assert "deleted=" not in out.splitlines()[-1]
    assert tree(destination) == {**files, "data/late": b"late"}


BAD_ARGUMENTS = [
    (["--to=local:///tmp/x"], "--from URI is required"),
    (["--from=local:///tmp/x"], "--to URI is required"),
    (
        ["--from=local:///tmp/a", "--to=local:///tmp/b", "--delay=3:1"],
        "MIN must not exceed MAX",
    ),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--delay=soon"], "not a number"),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--drop=1"], "must lie in [0, 1)"),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--drop-for=-1:2"], "--drop-for"),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--poll=0"], "--poll"),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--duration=nan"], "--duration"),
    (["--from=local:///tmp/a", "--to=local:///tmp/b", "--seed=x"], "--seed"),
    (["--from=ftp://host/a", "--to=local:///tmp/b"], "local:///abs/path or s3://"),
    (["--from=/tmp/a", "--to=local:///tmp/b"], "not a URI"),
    (["--from=local:///tmp/a", "--to=local:///tmp/a/copy"], "overlap"),
    (["--from=local:///tmp/a", "--to=local:///tmp/a"], "overlap"),
    (["--from=local:///tmp/a", "--to=s3://b/p", "--to-region=mars"], "'mars'"),
]


def parse(args: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_simulate_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["simulate-replication", *args])


@pytest.mark.parametrize(("args", "message"), BAD_ARGUMENTS)
def test_invalid_arguments_return_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    for name in list(os.environ):
        if name.startswith("LAKEMIRROR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LAKEMIRROR_DATA_DIR", str(tmp_path / "data"))
    out, err = io.StringIO(), io.StringIO()
    assert run_simulate(parse(args), out, err) == 2
    assert out.getvalue() == ""
    assert len(err.getvalue().splitlines()) == 1, err.getvalue()
    assert err.getvalue().startswith("lakemirror simulate-replication: ")
    assert message in err.getvalue()


@pytest.mark.parametrize(("args", "message"), [BAD_ARGUMENTS[0], BAD_ARGUMENTS[2]])
def test_invalid_arguments_exit_2_with_one_line(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = run(args, tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("lakemirror simulate-replication: ")
    assert message in result.stderr


@pytest.mark.s3
def test_replicates_between_two_s3_regions(
    tmp_path: Path, moto_region: MotoServer, moto_second_region: MotoServer
) -> None:
    from mirror.block.s3 import make_s3_client

    east, west = (
        make_s3_client(s3_settings(moto_region)),
        make_s3_client(s3_settings(moto_second_region)),
    )
    source_bucket, destination_bucket = (
        create_bucket(moto_region, east),
        create_bucket(moto_second_region, west),
    )
    regions: dict[str, Any] = {
        name: {"endpoint_url": server.url, "region": server.region}
        for name, server in (("east", moto_region), ("west", moto_second_region))
    }
    config = tmp_path / "lakemirror.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "blockstore": {
                    "s3": {
                        "access_key_id": ACCESS_KEY,
                        "secret_access_key": SECRET_KEY,
                        "addressing_style": "path",
                        "max_attempts": 3,
                        "regions": regions,
                    }
                }
            }
        )
    )
    files = {f"repo/data/{i}": f"object {i}".encode() for i in range(5)}
    for key, body in files.items():
        east.put_object(Bucket=source_bucket, Key=key, Body=body)
    prefix = unique_name("ns")
    process = start(
        [
            f"--from=s3://{source_bucket}/repo",
            "--from-region=east",
            f"--to=s3://{destination_bucket}/{prefix}",
            "--to-region=west",
            f"--config={config}",
            "--poll=0.1",
            "--replicate-deletes",
        ],
        tmp_path,
    )

    def arrived() -> dict[str, bytes] | None:
        listed = west.list_objects_v2(Bucket=destination_bucket, Prefix=f"{prefix}/")
        try:
            return {
                "repo/" + item["Key"].removeprefix(f"{prefix}/"): west.get_object(
                    Bucket=destination_bucket, Key=item["Key"]
                )["Body"].read()
                for item in listed.get("Contents", [])
            }
        except west.exceptions.NoSuchKey:
            return None  # deleted between the listing and the read: look again

    try:
        wait_for(lambda: arrived() == files, "the objects to reach the second region", process)
        for key in ("repo/data/0", "repo/data/3"):
            east.delete_object(Bucket=source_bucket, Key=key)
            del files[key]
        wait_for(lambda: arrived() == files, "the deletions to reach the second region", process)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err


def documented_two_endpoint_example(doc: str) -> tuple[dict[str, Any], list[str], str]:
    """Return the two-S3-endpoint example of ``docs/<doc>``: its configuration file, the
    command's arguments after ``lakemirror simulate-replication``, and the banner it shows."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", (ROOT / "docs" / doc).read_text(), re.DOTALL)
    configs = [b for lang, b in blocks if lang == "yaml" and b.startswith("# replication.yaml")]
    commands = [
        b for lang, b in blocks if lang == "sh" and "simulate-replication --config replication" in b
    ]
    assert len(configs) == len(commands) == 1, f"{doc}: one example of each, not {blocks}"
    lines = commands[0].replace("\\\n", " ").splitlines()
    banner = [line.removeprefix("# ") for line in lines if line.startswith("# replicating ")]
    words = shlex.split(lines[0])
    assert words[:2] == ["lakemirror", "simulate-replication"], words
    return yaml.safe_load(configs[0]), words[2:], banner[0]


@pytest.mark.s3
def test_the_documented_two_endpoint_example_replicates(
    tmp_path: Path, moto_region: MotoServer, moto_second_region: MotoServer
) -> None:
    """docs/mirroring.md and docs/configuration.md show one example: run it as written, only
    the endpoints (and bucket names, unique per run) being the test's moto servers'."""
    from mirror.block.s3 import make_s3_client

    config, args, banner = documented_two_endpoint_example("mirroring.md")
    assert documented_two_endpoint_example("configuration.md") == (config, args, banner)
    servers = {"a": moto_region, "b": moto_second_region}
    entries = config["blockstore"]["s3"]["regions"]
    assert set(entries) == set(servers)
    for name, server in servers.items():
        assert entries[name]["region"] == server.region
        entries[name]["endpoint_url"] = server.url
    (tmp_path / "replication.yaml").write_text(yaml.safe_dump(config))
    clients = {name: make_s3_client(s3_settings(server)) for name, server in servers.items()}
    buckets = {name: create_bucket(servers[name], clients[name]) for name in servers}
    renamed = {f"s3://lakemirror-{name}/": f"s3://{bucket}/" for name, bucket in buckets.items()}
    for documented, actual in renamed.items():
        assert documented in banner
        banner = banner.replace(documented, actual)
        args = [arg.replace(documented, actual) for arg in args]
    files = {f"tables/{i}.csv": f"row {i}\n".encode() for i in range(5)}
    for key, body in files.items():
        clients["a"].put_object(Bucket=buckets["a"], Key=f"origin/{key}", Body=body)
    lakemirror = Path(sys.executable).with_name("lakemirror")  # the installed command
    process = subprocess.Popen(
        [str(lakemirror), "simulate-replication", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(tmp_path),
        cwd=tmp_path,  # where replication.yaml is, as in the documented command
    )

    def arrived() -> dict[str, bytes]:
        west = clients["b"]
        listed = west.list_objects_v2(Bucket=buckets["b"], Prefix="origin-mirror/")
        return {
            item["Key"].removeprefix("origin-mirror/"): west.get_object(
                Bucket=buckets["b"], Key=item["Key"]
            )["Body"].read()
            for item in listed.get("Contents", [])
        }

    try:
        wait_for(lambda: arrived() == files, "the objects to reach region b", process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out.splitlines()[0] == banner


@pytest.mark.s3
def test_missing_bucket_exits_1(tmp_path: Path, moto_region: MotoServer) -> None:
    env = {
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": moto_region.url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": moto_region.region,
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
    }
    result = subprocess.run(
        command(f"--from=s3://{unique_name('missing')}/x", f"--to=local://{tmp_path / 'b'}"),
        capture_output=True,
        text=True,
        env=environment(tmp_path, env),
        cwd=ROOT,
        timeout=DEADLINE,
    )
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "is missing" in result.stderr

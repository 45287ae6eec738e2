"""The AWS CLI against the gateway of a live server: ``aws s3 cp``, ``ls``, ``sync`` and
``rm --recursive`` with ``--endpoint-url``, credentials from the environment, no network."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.live import REGION, Live

CLI_TIMEOUT = 120.0


def _aws_binary() -> Path:
    path = Path(sys.executable).parent / "aws"
    if not path.exists():
        pytest.fail(f"the AWS CLI is missing: run `{sys.executable} -m pip install awscli`")
    return path


class Cli:
    """Runs ``aws`` with the gateway's endpoint and a key in the environment."""

    def __init__(self, live: Live, home: Path) -> None:
        self.binary = _aws_binary()
        config = home / "config"
        config.write_text(f"[default]\nregion = {REGION}\ns3 =\n    addressing_style = path\n")
        self.endpoint = live.url
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HTTP_", "HTTPS_"))
        }
        self.env.update(
            AWS_ACCESS_KEY_ID=live.key[0],
            AWS_SECRET_ACCESS_KEY=live.key[1],
            AWS_CONFIG_FILE=str(config),
            AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="127.0.0.1",
        )

    def __call__(self, *args: str | Path) -> str:
        command = [str(self.binary), "--endpoint-url", self.endpoint, *map(str, args)]
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False
        )
        assert done.returncode == 0, f"{command}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture(scope="module")
def aws(live: Live, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    return Cli(live, tmp_path_factory.mktemp("aws-home"))


def _requests(live: Live, route: str) -> float:
    """Return how many requests the server answered for ``route`` (its /metrics)."""
    text = httpx.get(f"{live.url}/metrics", timeout=30.0).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lakemirror_http_requests_total" and sample.labels["route"] == route
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_cp_up_and_down_a_small_file(aws: Cli, live: Live, repo: str, tmp_path: Path) -> None:
    source = tmp_path / "small file.csv"
    source.write_bytes(b"id,name\n1,a b\n")
    aws("s3", "cp", source, f"s3://{repo}/main/in/small file.csv")
    assert live.read(repo, "main", "in/small file.csv") == source.read_bytes()
    back = tmp_path / "back.csv"
    aws("s3", "cp", f"s3://{repo}/main/in/small file.csv", back)
    assert back.read_bytes() == source.read_bytes()


def test_ls_lists_branches_prefixes_and_keys(aws: Cli, live: Live, repo: str) -> None:
    live.upload(repo, "main", "top.txt", b"1")
    live.upload(repo, "main", "dir/a.txt", b"22")
    live.upload(repo, "main", "dir/sub/b.txt", b"333")
    live.create_branch(repo, "dev")
    root = aws("s3", "ls", f"s3://{repo}/")
    assert [line.split() for line in root.splitlines()] == [["PRE", "dev/"], ["PRE", "main/"]]
    top = aws("s3", "ls", f"s3://{repo}/main/")
    assert [line.split()[-1] for line in top.splitlines()] == ["dir/", "top.txt"]
    assert top.splitlines()[0].split() == ["PRE", "dir/"]
    recursive = aws("s3", "ls", "--recursive", f"s3://{repo}/main/")
    rows = [line.split() for line in recursive.splitlines()]
    assert [(r[-2], r[-1]) for r in rows] == [
        ("2", "main/dir/a.txt"),
        ("3", "main/dir/sub/b.txt"),
        ("1", "main/top.txt"),
    ]


def test_sync_both_ways_then_rm_recursive(aws: Cli, live: Live, repo: str, tmp_path: Path) -> None:
    local = tmp_path / "up"
    files = {
        "a.csv": b"a\n",
        "nested/b.csv": b"b" * 5000,
        "nested/deeper/c d.csv": b"c\n",
        "plus+ünï.txt": "ünï".encode(),
    }
    for name, data in files.items():
        (local / name).parent.mkdir(parents=True, exist_ok=True)
        (local / name).write_bytes(data)
        # made an hour before the sync: LastModified has whole seconds, as S3's
        hour_ago = time.time() - 3600
        os.utime(local / name, (hour_ago, hour_ago))
    out = aws("s3", "sync", local, f"s3://{repo}/main/synced/")
    assert out.count("upload:") == len(files)
    assert sorted(live.paths(repo, "main", "synced/")) == sorted(f"synced/{n}" for n in files)
    # nothing changed: a second sync uploads nothing
    assert "upload:" not in aws("s3", "sync", local, f"s3://{repo}/main/synced/")
    live.commit(repo, message="synced")
    down = tmp_path / "down"
    aws("s3", "sync", f"s3://{repo}/main/synced/", down)
    assert _tree(down) == files
    removed = aws("s3", "rm", "--recursive", f"s3://{repo}/main/synced/nested/")
    assert removed.count("delete:") == 2
    assert sorted(live.paths(repo, "main", "synced/")) == [
        "synced/a.csv",
        "synced/plus+ünï.txt",
    ]


def test_cp_of_a_file_over_the_multipart_threshold(
    aws: Cli, live: Live, repo: str, tmp_path: Path
) -> None:
    big = tmp_path / "big.bin"
    # 9 MiB: over the CLI's 8 MiB threshold, so it uploads in parts and downloads in ranges
    big.write_bytes(os.urandom(1 << 20) * 9)
    completed = _requests(live, "s3:CompleteMultipartUpload")
    out = aws("s3", "cp", big, f"s3://{repo}/main/big.bin")
    assert "upload:" in out
    assert _requests(live, "s3:CompleteMultipartUpload") == completed + 1
    assert live.read(repo, "main", "big.bin") == big.read_bytes()
    back = tmp_path / "back.bin"
    aws("s3", "cp", f"s3://{repo}/main/big.bin", back)
    assert back.read_bytes() == big.read_bytes()

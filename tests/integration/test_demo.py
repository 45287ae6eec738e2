"""`lakemirror demo`: two regions, a mirror, a writer, and a consistency report that holds."""

from __future__ import annotations

import argparse
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mirror.cli.demo import demo_regions, register_demo_command, run_demo

ROOT = Path(__file__).resolve().parents[2]
RUN_DEADLINE = 240.0
REPORT = "CONSISTENT: the mirror matches the source byte for byte at the mirrored commit"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mirror.cli.main", "demo", *args]


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}


def field(report: str, name: str) -> str:
    found = re.search(rf"^  {name} +(.*)$", report, re.MULTILINE)
    assert found, f"no {name!r} line in:\n{report}"
    return found.group(1)


def leftover_processes(data_dir: Path) -> list[str]:
    """Return the command lines of processes still running with ``data_dir`` in them."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(data_dir) in cmdline:
            found.append(cmdline)
    return found


def check_report(stdout: str, stderr: str, data_dir: Path) -> None:
    assert "Traceback" not in stdout + stderr, stdout + stderr
    assert REPORT in stdout, stdout + stderr
    mirrored = field(stdout, "mirrored commit").split()[0]
    history = int(field(stdout, "history").split()[0])
    written = int(field(stdout, "commits written").split()[0])
    advances = int(field(stdout, "head advances").split()[0])
    compared = int(field(stdout, "listing").split()[0])
    assert re.fullmatch(r"[0-9a-f]{64}", mirrored)
    assert written >= 1
    # past the repository's initial commit: the mirror advanced to a commit the writer made
    assert history >= 2 and advances >= 2, stdout
    assert compared >= 2 and f"{compared} of {compared} objects equal byte for byte" in stdout
    # every object the mirror holds arrived through simulated replication, counted as it went
    copied = re.search(r"^  replication +(\d+) objects copied", stdout, re.MULTILINE)
    assert copied and int(copied.group(1)) >= compared, stdout
    assert f"logs: {data_dir}" in stdout
    for log in ("region-a.log", "region-b.log", "replicant.log"):
        assert (data_dir / log).stat().st_size > 0
    assert leftover_processes(data_dir) == []


@pytest.mark.slow
def test_demo_runs_for_its_duration_and_reports_a_consistent_mirror(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    # an old run's leftovers are cleared, not mirrored
    (data_dir / "region-a" / "stale").mkdir(parents=True)
    result = subprocess.run(
        command("--data-dir", str(data_dir), "--duration", "6", "--seed", "7"),
        capture_output=True,
        text=True,
        env=environment(),
        cwd=tmp_path,
        timeout=RUN_DEADLINE,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    check_report(result.stdout, result.stderr, data_dir)
    assert not (data_dir / "region-a" / "stale").exists()
    # both regions' web UI, and the key to sign in with, are on the terminal
    assert re.search(
        r"^  web UI +region a http://127\.0\.0\.1:\d+/ui/, region b http://127\.0\.0\.1:\d+/ui/ ",
        result.stdout,
        re.M,
    ), result.stdout
    assert re.search(r"^  region b +http://\S+ +admin key AKIADEMOB\w+ / \w+$", result.stdout, re.M)
    # without a terminal the view is plain progress lines, no cursor movement
    assert "\x1b[" not in result.stdout
    assert re.search(
        r"^ +\d+\.\ds source [0-9a-f]{12} \(\d+ commits\) mirror ", result.stdout, re.M
    )


@pytest.mark.slow
def test_ctrl_c_stops_writing_and_still_reports(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    out_path, err_path = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        process = subprocess.Popen(
            command("--data-dir", str(data_dir), "--no-live", "--commit-interval", "0.5"),
            stdout=out,
            stderr=err,
            env=environment(),
            cwd=tmp_path,
        )
    try:
        deadline = time.monotonic() + RUN_DEADLINE
        # running once a progress line shows a commit the writer made
        while not re.search(r"\(([1-9]\d*) commits\)", out_path.read_text()):
            assert process.poll() is None, out_path.read_text() + err_path.read_text()
            assert time.monotonic() < deadline, "the demo wrote no commit in time"
            time.sleep(0.2)  # polling interval of a deadline-bounded wait
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=RUN_DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stdout, stderr = out_path.read_text(), err_path.read_text()
    assert code == 0, stdout + stderr
    check_report(stdout, stderr, data_dir)


@pytest.mark.slow
def test_region_bs_web_ui_shows_the_demo_mirror_through_its_replicant(tmp_path: Path) -> None:
    out = io.StringIO()
    with demo_regions(tmp_path / "demo", out=out) as regions:
        said = out.getvalue()
        found = re.search(r"^  region b +(http://\S+) +admin key (\S+) / (\S+)$", said, re.M)
        assert found, said
        url, key, secret = found.groups()
        assert f"region b {url}/ui/ (its mirrors: {url}/ui/mirrors)" in said
        login = {"access_key_id": key, "secret_access_key": secret}
        token = httpx.post(f"{url}/api/v1/auth/login", json=login, timeout=30.0).json()["token"]
        with httpx.Client(base_url=url, cookies={"internal_auth_session": token}) as browser:
            mirrors = browser.get("/ui/mirrors")
            assert mirrors.status_code == 200, mirrors.text
            assert "Mirrors in region b" in mirrors.text
            assert f">{regions.mirror_repo}</a>" in mirrors.text
            page = browser.get(f"/ui/mirrors/{regions.source_repo}/{regions.mirror_repo}")
            assert page.status_code == 200, page.text
            assert "Lag history" in page.text and "<svg" in page.text


def parse(*args: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_demo_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["demo", *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--delay", "3:1"], "--delay '3:1': MIN must not exceed MAX"),
        (["--delay", "x"], "--delay 'x': not a number of seconds"),
        (["--duration", "-1"], "--duration '-1': must be a finite number zero or more"),
        (["--commit-interval", "0"], "--commit-interval '0': must be a finite number positive"),
        (["--seed", "abc"], "--seed 'abc': not an integer"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(args: list[str], message: str, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert run_demo(parse("--data-dir", str(tmp_path / "demo"), *args), out, err) == 2
    assert err.getvalue() == f"lakemirror demo: {message}\n"
    assert out.getvalue() == ""
    assert not (tmp_path / "demo").exists()

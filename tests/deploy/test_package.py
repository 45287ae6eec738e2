"""The package as a user installs it: the core alone names the missing extra; with it, it serves.

A fresh virtual environment gets ``lakemirror`` from a wheelhouse of the project (``pip install
--no-index --find-links``), first without extras, then with the ``server`` extra.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.wheelhouse import dependency_wheelhouse, pip_env, project_wheel, run
from tests.integration.harness import free_port, wait_healthy

pytestmark = pytest.mark.slow


def _pip_install(venv: Path, requirement: str) -> None:
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(project_wheel().parent),
            "--find-links",
            str(dependency_wheelhouse()),
            requirement,
        ],
        timeout=300,
        env=pip_env(),
    )


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment with ``lakemirror`` installed without extras."""
    venv = tmp_path_factory.mktemp("core") / "venv"
    run([sys.executable, "-m", "venv", str(venv)], timeout=120, env=pip_env())
    _pip_install(venv, "lakemirror")
    yield venv


def _lakemirror(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "lakemirror"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=pip_env(),
        check=False,
    )


def _has(venv: Path, module: str) -> bool:
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=False, timeout=60)
    return done.returncode == 0


@pytest.mark.parametrize("command", ["server", "replicant", "demo"])
def test_the_core_install_names_the_extra_in_one_line(
    core_venv: Path, command: str, tmp_path: Path
) -> None:
    assert not _has(core_venv, "fastapi") and not _has(core_venv, "uvicorn")
    done = _lakemirror(core_venv, command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"lakemirror {command}: needs the 'server' extra: pip install 'lakemirror[server]'"
    ]
    assert not (tmp_path / "lakemirror-data").exists()


def test_the_core_install_runs_what_needs_no_extra(core_venv: Path, tmp_path: Path) -> None:
    shown = _lakemirror(core_venv, "config", "show", "-o", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert '"workers": 1' in shown.stdout
    tour = _lakemirror(core_venv, "tour", "--data-dir", str(tmp_path / "tour"), cwd=tmp_path)
    assert tour.returncode == 0, tour.stderr


def test_with_the_server_extra_it_serves(core_venv: Path, tmp_path: Path) -> None:
    _pip_install(core_venv, "lakemirror[server]")
    assert _has(core_venv, "fastapi") and not _has(core_venv, "boto3")
    port = free_port()
    log = tmp_path / "server.log"
    command = [str(core_venv / "bin" / "lakemirror"), "server", "--port", str(port)]
    command += ["--host", "127.0.0.1", "--data-dir", str(tmp_path / "data")]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=pip_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(process, url, log)
        # the web UI's templates and static files ship in the wheel
        page = httpx.get(f"{url}/ui/login")
        assert page.status_code == 200 and "Sign in" in page.text, page.text
        assert httpx.get(f"{url}/ui/static/ui.css").status_code == 200
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0, log.read_text()

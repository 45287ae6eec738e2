"""The container image, built with buildah from ``deploy/Containerfile`` and started as UID 10001.

No public registry is reachable here, so the base image is made locally: ``debootstrap`` of
Debian bookworm with ``python3`` and ``python3-venv`` (what ``python:3.11-slim-bookworm`` is, less
its own build of Python), imported with ``buildah from scratch``. It is cached under
``.tools/images/`` (the root file system as a tar, keyed by suite, packages and mirror) and in
buildah's storage, so only the first run pays for debootstrap. The builder stage installs from
the project's wheelhouse (build argument ``WHEELHOUSE``), as an offline build does.

The image runs with ``buildah run --isolation chroot`` (no container engine here) on the host's
network: the server listens on a free port of 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.tools import ROOT, require_tool, run_tool
from tests.deploy.wheelhouse import dependency_wheelhouse
from tests.integration.harness import free_port

pytestmark = pytest.mark.slow

CONTAINERFILE = ROOT / "deploy" / "Containerfile"
IMAGES = ROOT / ".tools" / "images"
"""Where the local base image's root file system is cached."""
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
UID = 10001
START_DEADLINE = 60.0
STOP_DEADLINE = 60.0
# What debootstrap leaves that an image does not need (package caches, lists, docs, locales).
PRUNED = (
    "var/cache/apt/archives",
    "var/lib/apt/lists",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
)
COMPILERS = re.compile(r"^(cc|c\+\+|gcc|g\+\+|clang|clang\+\+|cpp|.*-gcc(-\d+)?|.*-g\+\+(-\d+)?)$")


def debian_mirror() -> str:
    """Return the Debian mirror this machine's apt uses for ``bookworm``."""
    sources = Path("/etc/apt")
    for path in sorted(sources.glob("sources.list.d/*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1)
                for line in stanza.splitlines()
                if re.match(r"^[A-Za-z-]+:", line)
            )
            if SUITE in fields.get("Suites", "").split() and "deb" in fields.get("Types", ""):
                return fields["URIs"].split()[0]
    listed = sources / "sources.list"
    if listed.exists():
        for line in listed.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and parts[2] == SUITE:
                return parts[1]
    return "http://deb.debian.org/debian"


def _base_tar(mirror: str, key: str) -> Path:
    """Return the cached root file system of the base image (debootstrapped on first use)."""
    tar = IMAGES / f"debian-{SUITE}-python3-{key}.tar"
    if tar.exists():
        return tar
    if os.geteuid() != 0:
        pytest.fail("debootstrap of the local base image needs root: run the tests as root")
    IMAGES.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="base-", dir=IMAGES))
    try:
        root = work / "root"
        run_tool(
            "debootstrap",
            [
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(root),
                mirror,
            ],
            timeout=600,
        )
        for pruned in PRUNED:
            for entry in (root / pruned).glob("*"):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        partial = work / "root.tar"
        with tarfile.open(partial, "w") as out:
            for entry in sorted(root.iterdir()):
                out.add(entry, arcname=entry.name)
        partial.rename(tar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tar


def local_base() -> str:
    """Return the name of the local Debian + python3 base image, importing it when missing."""
    mirror = debian_mirror()
    key = hashlib.sha256(f"{SUITE} {' '.join(PACKAGES)} {mirror} {PRUNED}".encode()).hexdigest()
    name = f"localhost/lakemirror-test-base:{SUITE}-{key[:12]}"
    if run_tool("buildah", ["inspect", "--type", "image", name], check=False).returncode == 0:
        return name
    tar = _base_tar(mirror, key[:12])
    container = run_tool("buildah", ["from", "scratch"]).stdout.strip()
    try:
        run_tool("buildah", ["add", container, str(tar), "/"])
        run_tool(
            "buildah",
            [
                "config",
                "--env",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "--env",
                "LANG=C.UTF-8",
                "--cmd",
                '["python3"]',
                container,
            ],
        )
        run_tool("buildah", ["commit", "--quiet", container, name])
    finally:
        run_tool("buildah", ["rm", container], check=False)
    return name


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """Build ``deploy/Containerfile`` on the local base, offline from the wheelhouse."""
    require_tool("buildah")
    base = local_base()
    wheelhouse = dependency_wheelhouse().relative_to(ROOT)
    name = f"localhost/lakemirror-test:{uuid.uuid4().hex[:12]}"
    run_tool(
        "buildah",
        [
            "bud",
            "--isolation",
            "chroot",
            "--pull-never",
            "--file",
            str(CONTAINERFILE),
            "--build-arg",
            f"BASE_IMAGE={base}",
            "--build-arg",
            f"WHEELHOUSE={wheelhouse}",
            "--tag",
            name,
            str(ROOT),
        ],
        timeout=600,
    )
    try:
        yield name
    finally:
        run_tool("buildah", ["rmi", name], check=False)


@pytest.fixture(scope="module")
def config(image: str) -> dict[str, Any]:
    """The image's OCI configuration."""
    found: dict[str, Any] = json.loads(
        run_tool("buildah", ["inspect", "--type", "image", image]).stdout
    )["OCIv1"]["config"]
    return found


@pytest.fixture
def container(image: str) -> Iterator[str]:
    """A working container of the image, removed afterwards."""
    name = run_tool("buildah", ["from", "--pull-never", image]).stdout.strip()
    try:
        yield name
    finally:
        run_tool("buildah", ["rm", name], check=False)


def test_the_image_runs_lakemirror_as_a_fixed_non_root_user(config: dict[str, Any]) -> None:
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["/opt/lakemirror/bin/lakemirror"]
    assert config["Cmd"] == ["server"]
    assert set(config["ExposedPorts"]) == {"8000/tcp", "8001/tcp"}
    assert set(config["Volumes"]) == {"/var/lib/lakemirror"}
    assert config["WorkingDir"] == "/var/lib/lakemirror"
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["LAKEMIRROR_SERVER__HOST"] == "0.0.0.0"
    assert env["LAKEMIRROR_REPLICANT__HOST"] == "0.0.0.0"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "LakeMirror"
    assert labels["org.opencontainers.image.version"] == "0.1.0"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.base.name"].startswith("localhost/lakemirror-test-base")


def test_the_runtime_holds_the_venv_but_no_compiler_pip_or_sources(container: str) -> None:
    mount = Path(run_tool("buildah", ["mount", container]).stdout.strip())
    try:
        compilers = [
            str(path.relative_to(mount))
            for directory in ("usr/bin", "usr/local/bin", "bin", "opt/lakemirror/bin")
            for path in (mount / directory).glob("*")
            if COMPILERS.match(path.name)
        ]
        assert compilers == []
        assert not (mount / "usr" / "include").exists() or not any(
            (mount / "usr" / "include").rglob("*.h")
        )
        venv = mount / "opt" / "lakemirror"
        assert (venv / "bin" / "lakemirror").exists()
        assert not (venv / "bin" / "pip").exists()
        site = next((venv / "lib").glob("python3*/site-packages"))
        for needed in ("mirror", "fastapi", "uvicorn", "boto3", "aioboto3"):
            assert (site / needed).is_dir(), needed
        assert not (site / "pyspark").exists()
        assert not (mount / "root" / ".cache" / "pip").exists()
        assert not (mount / "src").exists() and not (mount / "wheels").exists()
        data = (mount / "var" / "lib" / "lakemirror").stat()
        assert (data.st_uid, data.st_gid) == (UID, UID)
        passwd = (mount / "etc" / "passwd").read_text()
        assert f"lakemirror:x:{UID}:{UID}:" in passwd
    finally:
        run_tool("buildah", ["umount", container], check=False)


def _serving_pids(port: int) -> list[int]:
    """Return the host PIDs of processes running ``lakemirror server ... --port <port>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(port).encode() in argv and any(a.endswith(b"/lakemirror") for a in argv[:2]):
            if (entry / "status").read_text().startswith("Name:\tlakemirror"):
                found.append(int(entry.name))
    return found


def _uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


def test_the_image_serves_healthz_and_the_ui_as_uid_10001_and_stops_on_sigterm(
    config: dict[str, Any], container: str, tmp_path: Path
) -> None:
    port = free_port()
    # the image's own entrypoint and command, with flags a pod's `args` would add
    argv = [*config["Entrypoint"], *config["Cmd"], "--host", "127.0.0.1", "--port", str(port)]
    log = tmp_path / "container.log"
    command = [require_tool("buildah"), "run", "--isolation", "chroot"]
    command += ["--user", config["User"], container, "--", *argv]
    with open(log, "wb") as out:
        runner = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_DEADLINE
        with httpx.Client(timeout=2.0) as http:
            while True:
                try:
                    health = http.get(f"http://127.0.0.1:{port}/healthz")
                    if health.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if runner.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the image did not serve /healthz:\n{log.read_text()}")
                time.sleep(0.1)  # polling interval of a deadline-bounded wait
        assert health.json()["status"] == "ok"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5.0) as http:
            # the web UI ships in the image: its sign-in page and its own assets, nothing remote
            sign_in = http.get("/ui/login")
            assert sign_in.status_code == 200, sign_in.text
            assert 'name="access_key_id"' in sign_in.text
            style = http.get("/ui/static/ui.css")
            assert style.status_code == 200
            assert style.headers["content-type"].startswith("text/css")
        (pid,) = _serving_pids(port)
        assert _uid(pid) == UID
        os.kill(pid, signal.SIGTERM)
        assert runner.wait(timeout=STOP_DEADLINE) == 0, log.read_text()
        text = log.read_text()
        assert "serving /var/lib/lakemirror/lakemirror-data" in text
        assert "Traceback" not in text
    finally:
        if runner.poll() is None:
            for pid in _serving_pids(port):
                os.kill(pid, signal.SIGKILL)
            runner.wait(timeout=STOP_DEADLINE)

"""Wheels of the project and of its dependencies, built once and shared by the packaging tests.

The dependencies of the ``server`` and ``s3`` extras (and the build backend, so that a builder
without an index can build the project's own wheel) are fetched once with ``pip wheel`` and kept
under ``.tools/wheelhouse/<key>/``, where the key is a hash of the requirements and the
interpreter: a second run reuses them. The project's own wheel is built fresh from a clean copy
of the sources for each test session, so it always holds the code under test.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

from tests.deploy.tools import ROOT

WHEELHOUSE_ROOT = ROOT / ".tools" / "wheelhouse"
"""Where the dependency wheelhouses live (in the image's build context: .containerignore)."""
BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")
"""The build backend's requirements (``[build-system] requires``), for offline builders."""
EXTRAS = ("server", "s3")
"""The extras the image installs."""


def requirements() -> list[str]:
    """Return the project's runtime requirements plus those of :data:`EXTRAS`."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found: list[str] = list(project["dependencies"])
    for extra in EXTRAS:
        found += project["optional-dependencies"][extra]
    return sorted(set(found))


def pip_env() -> dict[str, str]:
    """Return the environment of a pip that sees only what it is told (no user configuration)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    """Run ``command``; on failure, fail the test showing the end of its output."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, env=env
    )
    if done.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {done.returncode}:\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )


@functools.cache
def dependency_wheelhouse() -> Path:
    """Return the directory of wheels of every dependency (built on the first call ever)."""
    wanted = [*requirements(), *BUILD_REQUIREMENTS]
    tag = f"{sys.implementation.cache_tag}-{platform.machine()}"
    key = hashlib.sha256("\n".join([tag, *wanted]).encode()).hexdigest()[:16]
    target = WHEELHOUSE_ROOT / key
    if (target / ".complete").exists():
        return target
    WHEELHOUSE_ROOT.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=WHEELHOUSE_ROOT))
    try:
        # from the ordinary package index (the one step that needs it), as a developer would
        run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(partial), *wanted],
            timeout=900,
        )
        (partial / ".complete").write_text("\n".join(wanted) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


@functools.cache
def project_wheel() -> Path:
    """Return a wheel of the project built now from a clean copy of its sources."""
    work = Path(tempfile.mkdtemp(prefix="lakemirror-wheel-"))
    source = work / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "mirror", source / "mirror", ignore=shutil.ignore_patterns("__pycache__")
    )
    out = work / "dist"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--find-links",
            str(dependency_wheelhouse()),
            "--wheel-dir",
            str(out),
            str(source),
        ],
        timeout=300,
    )
    (wheel,) = out.glob("lakemirror-*.whl")
    return wheel

"""Set up one pod's filesystem in a fresh mount namespace, then become its container's process.

Run as ``unshare --mount --propagation private -- python -m tests.deploy.podinit SPEC.json``
(see :mod:`tests.deploy.pods`). The spec lists the pod's mounts in order (tmpfs for an
``emptyDir``, bind mounts of prepared directories or files for ``configMap``, ``secret`` and
``persistentVolumeClaim`` volumes), whether the root filesystem is read-only, and the command.
The command is executed without capabilities and with ``no_new_privs``, as a container with
``capabilities: {drop: [ALL]}`` and ``allowPrivilegeEscalation: false`` runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _hidden(path: str, targets: list[str]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in targets)


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    # the program's own directories must stay visible under the pod's mounts (a project under
    # /tmp would vanish under an emptyDir on /tmp): hold each one that a mount would hide
    targets = [m["target"] for m in spec["mounts"]]
    kept: list[tuple[str, str]] = []
    for index, path in enumerate(spec.get("keep_visible", [])):
        if _hidden(path, targets):
            holder = os.path.join(spec["keep_dir"], str(index))
            os.makedirs(holder, exist_ok=True)
            _mount("--bind", path, holder)
            kept.append((holder, path))
    for mount in spec["mounts"]:
        target = mount["target"]
        if mount["type"] == "tmpfs":
            _mount("-t", "tmpfs", "-o", f"mode={mount.get('mode', '1777')}", "tmpfs", target)
        else:
            _mount("--bind", mount["source"], target)
            if mount.get("read_only"):
                _mount("-o", "remount,bind,ro", target)
    for holder, path in kept:
        os.makedirs(path, exist_ok=True)
        _mount("--bind", holder, path)
    if spec["read_only_root"]:
        _mount("-o", "remount,bind,ro", "/")
    os.chdir(spec.get("working_dir") or "/")
    command = [
        "setpriv",
        "--no-new-privs",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--",
        *spec["command"],
    ]
    os.execvpe(command[0], command, spec["env"])


if __name__ == "__main__":
    main()

"""Run what a Helm chart renders as local processes: Deployments' pods and their Services.

Each replica of a rendered Deployment becomes one process started the way its container would
start: the image's entrypoint with the container's ``command``/``args``, the container's
environment (literal values, ``secretKeyRef``/``configMapKeyRef`` resolved from the rendered
Secrets and ConfigMaps, ``fieldRef``), and its volumes mounted at their ``mountPath`` in a mount
namespace of its own (:mod:`tests.deploy.podinit`): ConfigMaps and Secrets as read-only files,
``emptyDir`` as tmpfs, a ``persistentVolumeClaim`` as a directory that outlives the process. A
read-only root filesystem is made read-only, and the process runs without capabilities.

What differs from a cluster, on purpose: the pods share the machine's network, so each
replica listens on its own loopback port (the caller maps each declared container port to an
environment override), and a Service is a round-robin TCP proxy on 127.0.0.1 in front of its
ready replicas. The process runs as root without capabilities instead of the pod's
``runAsUser``, because the interpreter lives under a directory only root may enter; the image
test (``tests/deploy/test_image.py``) proves the non-root user.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deploy.tools import ROOT, require_tool
from tests.integration.harness import free_port

ENTRYPOINT = [str(Path(sys.executable).with_name("lakemirror"))]
"""The image's ``ENTRYPOINT`` (``deploy/Containerfile``): the ``lakemirror`` command."""
START_DEADLINE = 60.0

Doc = dict[str, Any]
ListenEnv = Callable[[str, int, int], Mapping[str, str]]
"""``(container, container_port, local_port)`` → variables that make it listen on 127.0.0.1."""


class Manifests:
    """The objects of one rendering, by kind and name."""

    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs

    def get(self, kind: str, name: str) -> Doc:
        """Return the object of ``kind`` called ``name``."""
        for doc in self.docs:
            if doc.get("kind") == kind and doc["metadata"]["name"] == name:
                return doc
        raise KeyError(f"no {kind} {name!r} in the rendering")

    def of_kind(self, kind: str) -> list[Doc]:
        """Return every object of ``kind``."""
        return [d for d in self.docs if d.get("kind") == kind]

    def secret_data(self, name: str) -> dict[str, str]:
        """Return a Secret's values, decoded."""
        secret = self.get("Secret", name)
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        data.update(secret.get("stringData") or {})
        return data

    def config_map_data(self, name: str) -> dict[str, str]:
        """Return a ConfigMap's values."""
        return dict(self.get("ConfigMap", name).get("data") or {})

    def container_env(self, container: Doc, field_values: Mapping[str, str]) -> dict[str, str]:
        """Return the environment ``container`` gets (``envFrom`` first, then ``env``)."""
        env: dict[str, str] = {}
        for source in container.get("envFrom") or []:
            prefix = source.get("prefix", "")
            if "secretRef" in source:
                values = self._optional(self.secret_data, source["secretRef"])
            else:
                values = self._optional(self.config_map_data, source["configMapRef"])
            env.update({prefix + k: v for k, v in values.items()})
        for var in container.get("env") or []:
            if "value" in var:
                env[var["name"]] = str(var["value"])
                continue
            ref = var.get("valueFrom") or {}
            if "secretKeyRef" in ref:
                value = self._key(self.secret_data, ref["secretKeyRef"])
            elif "configMapKeyRef" in ref:
                value = self._key(self.config_map_data, ref["configMapKeyRef"])
            elif "fieldRef" in ref:
                value = field_values[ref["fieldRef"]["fieldPath"]]
            else:
                raise AssertionError(f"unsupported env source in {var}")
            if value is not None:
                env[var["name"]] = value
        return env

    @staticmethod
    def _optional(read: Callable[[str], dict[str, str]], ref: Doc) -> dict[str, str]:
        try:
            return read(ref["name"])
        except KeyError:
            if ref.get("optional"):
                return {}
            raise

    @staticmethod
    def _key(read: Callable[[str], dict[str, str]], ref: Doc) -> str | None:
        values = Manifests._optional(read, ref)
        if ref["key"] not in values and ref.get("optional"):
            return None
        return values[ref["key"]]


@dataclass
class PodProcess:
    """One running replica."""

    name: str
    process: subprocess.Popen[bytes]
    ports: dict[int, int]
    """Container port → the loopback port it listens on."""
    log_path: Path
    command: list[str]
    env: dict[str, str]
    grace_period: float = 30.0
    """The pod's ``terminationGracePeriodSeconds``: SIGTERM, then SIGKILL after this long."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def url(self, container_port: int) -> str:
        return f"http://127.0.0.1:{self.ports[container_port]}"

    def stop(self) -> int:
        """Send SIGTERM, as the kubelet does, and wait; SIGKILL after the grace period."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=self.grace_period)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


class ServiceProxy:
    """A Service: accept on 127.0.0.1 and hand each connection to the next backend in turn."""

    def __init__(self, name: str, port: int, backends: Callable[[], list[int]]) -> None:
        self.name = name
        self.port = port
        self._backends = backends
        self._next = 0
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"svc-{name}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            backends = self._backends()
            if not backends:
                client.close()
                continue
            port = backends[self._next % len(backends)]
            self._next += 1
            threading.Thread(target=self._serve, args=(client, port), daemon=True).start()

    @staticmethod
    def _serve(client: socket.socket, port: int) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        back = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
        back.start()
        pipe(client, upstream)
        back.join(timeout=60)
        client.close()
        upstream.close()

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)


@dataclass
class Cluster:
    """Pods and Services of renderings, run on this machine (see the module's docstring)."""

    workdir: Path
    pods: list[PodProcess] = field(default_factory=list)
    services: list[ServiceProxy] = field(default_factory=list)
    _created: list[Path] = field(default_factory=list)
    _claims: dict[str, Path] = field(default_factory=dict)

    def start_deployment(
        self,
        manifests: Manifests,
        name: str,
        listen_env: ListenEnv,
        *,
        replicas: int | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[PodProcess]:
        """Start every replica of Deployment ``name`` and wait until each is ready.

        Readiness is the container's own ``readinessProbe`` (an HTTP GET), polled until it
        answers 2xx, as the kubelet would before a Service sends it traffic.
        """
        deployment = manifests.get("Deployment", name)
        count = deployment["spec"].get("replicas", 1) if replicas is None else replicas
        extra = extra_env or {}
        started = [self._start_pod(manifests, deployment, listen_env, extra) for _ in range(count)]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        for pod in started:
            self._wait_ready(pod, container)
        return started

    def start_service(
        self, manifests: Manifests, name: str, pods: list[PodProcess], port: int | None = None
    ) -> ServiceProxy:
        """Put rendered Service ``name`` in front of ``pods`` (on ``port``, else a free one).

        The Service's selector must select the pods' template labels, and its ``targetPort``
        (a number, or the name of a container port) must be a port the pods declare.
        """
        service = manifests.get("Service", name)
        selector = service["spec"]["selector"]
        target = service["spec"]["ports"][0]["targetPort"]
        chosen: int | None = None
        for deployment in manifests.of_kind("Deployment"):
            template = deployment["spec"]["template"]
            labels = template["metadata"].get("labels") or {}
            if not selector.items() <= labels.items():
                continue
            container = template["spec"]["containers"][0]
            for declared in container.get("ports") or []:
                if target in (declared.get("name"), declared["containerPort"]):
                    chosen = int(declared["containerPort"])
        assert chosen is not None, f"Service {name} selects no pod port {target!r}"
        assert all(chosen in pod.ports for pod in pods), f"Service {name}: pods lack {chosen}"
        return self.service_on(name, port or free_port(), pods, chosen)

    def service(self, name: str, pods: list[PodProcess], target_port: int) -> ServiceProxy:
        """Put a Service in front of ``pods``' ``target_port`` on a free loopback port."""
        return self.service_on(name, free_port(), pods, target_port)

    def service_on(
        self, name: str, port: int, pods: list[PodProcess], target_port: int
    ) -> ServiceProxy:
        """Put a Service in front of ``pods``' ``target_port`` on ``port``."""

        def backends() -> list[int]:
            return [p.ports[target_port] for p in pods if p.process.poll() is None]

        proxy = ServiceProxy(name, port, backends)
        self.services.append(proxy)
        return proxy

    def _start_pod(
        self,
        manifests: Manifests,
        deployment: Doc,
        listen_env: ListenEnv,
        extra_env: Mapping[str, str],
    ) -> PodProcess:
        pod_spec = deployment["spec"]["template"]["spec"]
        containers = pod_spec["containers"]
        assert len(containers) == 1, "one container per pod is what this runner starts"
        container = containers[0]
        # as a ReplicaSet names its pods: the template's hash, then a suffix of its own
        template_hash = hashlib.sha256(
            json.dumps(deployment["spec"]["template"], sort_keys=True).encode()
        ).hexdigest()[:10]
        pod_name = f"{deployment['metadata']['name']}-{template_hash}-{secrets.token_hex(3)[:5]}"
        namespace = deployment["metadata"].get("namespace", "default")
        fields = {
            "metadata.name": pod_name,
            "metadata.namespace": namespace,
            "status.podIP": "127.0.0.1",
            "spec.nodeName": socket.gethostname(),
            "spec.serviceAccountName": pod_spec.get("serviceAccountName", "default"),
        }
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/nonexistent",
            "HOSTNAME": pod_name,
            **manifests.container_env(container, fields),
            **extra_env,
        }
        ports: dict[int, int] = {}
        for declared in container.get("ports") or []:
            local = free_port()
            ports[int(declared["containerPort"])] = local
            env.update(listen_env(container["name"], int(declared["containerPort"]), local))
        pod_dir = self.workdir / pod_name
        pod_dir.mkdir(parents=True)
        mounts = self._mounts(manifests, pod_spec, container, pod_dir)
        security = container.get("securityContext") or {}
        command = [*(container.get("command") or ENTRYPOINT), *(container.get("args") or [])]
        spec = {
            "mounts": mounts,
            "keep_visible": _program_paths(),
            "keep_dir": str(pod_dir / "keep"),
            "read_only_root": bool(security.get("readOnlyRootFilesystem")),
            "command": command,
            "env": env,
            "working_dir": container.get("workingDir"),
        }
        spec_path = pod_dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        log_path = pod_dir / "log"
        launcher = [
            require_tool("unshare"),
            "--mount",
            "--propagation",
            "private",
            "--",
            sys.executable,
            "-m",
            "tests.deploy.podinit",
            str(spec_path),
        ]
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                launcher, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=_launcher_env()
            )
        grace = float(pod_spec.get("terminationGracePeriodSeconds", 30))
        pod = PodProcess(pod_name, process, ports, log_path, command, env, grace)
        self.pods.append(pod)
        return pod

    def _mounts(
        self, manifests: Manifests, pod_spec: Doc, container: Doc, pod_dir: Path
    ) -> list[dict[str, Any]]:
        volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
        mounts: list[dict[str, Any]] = []
        for mount in sorted(container.get("volumeMounts") or [], key=lambda m: m["mountPath"]):
            volume = volumes[mount["name"]]
            target = Path(mount["mountPath"])
            read_only = bool(mount.get("readOnly"))
            sub_path = mount.get("subPath")
            if "emptyDir" in volume:
                assert not sub_path, "subPath of an emptyDir is not supported here"
                self._mount_point(target, directory=True)
                mounts.append({"type": "tmpfs", "target": str(target)})
                continue
            source = self._volume_source(manifests, volume, pod_dir)
            if sub_path:
                source = source / sub_path
            self._mount_point(target, directory=source.is_dir())
            mounts.append(
                {
                    "type": "bind",
                    "source": str(source),
                    "target": str(target),
                    "read_only": read_only or "configMap" in volume or "secret" in volume,
                }
            )
        return mounts

    def _volume_source(self, manifests: Manifests, volume: Doc, pod_dir: Path) -> Path:
        if "configMap" in volume or "secret" in volume:
            ref = volume.get("configMap") or volume["secret"]
            if "configMap" in volume:
                data = manifests.config_map_data(ref["name"])
            else:
                data = manifests.secret_data(ref["secretName"])
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            directory = pod_dir / "volumes" / volume["name"]
            directory.mkdir(parents=True)
            for item in items:
                path = directory / item["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(data[item["key"]])
            return directory
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            if claim not in self._claims:
                self._claims[claim] = self.workdir / "claims" / claim
                self._claims[claim].mkdir(parents=True)
            return self._claims[claim]
        raise AssertionError(f"unsupported volume {volume}")

    def _mount_point(self, target: Path, *, directory: bool) -> None:
        """Create ``target`` (and missing parents) on the host, to be removed at the end."""
        assert not str(self.workdir).startswith(str(target)), "a mount would hide the sources"
        missing: list[Path] = []
        probe = target if directory else target.parent
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        for path in reversed(missing):
            path.mkdir()
            self._created.append(path)
        if not directory and not target.exists():
            target.touch()
            self._created.append(target)

    def _wait_ready(self, pod: PodProcess, container: Doc) -> None:
        probe = (container.get("readinessProbe") or {}).get("httpGet")
        assert probe, f"container {container['name']} has no HTTP readiness probe"
        port = probe["port"]
        if isinstance(port, str):
            port = next(p["containerPort"] for p in container["ports"] if p.get("name") == port)
        url = pod.url(int(port)) + probe.get("path", "/")
        deadline = time.monotonic() + START_DEADLINE
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                code = pod.process.poll()
                if code is not None:
                    pytest.fail(f"pod {pod.name} exited with {code}:\n{pod.log()}")
                try:
                    if client.get(url).is_success:
                        return
                except httpx.TransportError:
                    pass
                try:
                    pod.process.wait(timeout=0.1)  # a failed start ends the process
                except subprocess.TimeoutExpired:
                    continue
        pytest.fail(f"pod {pod.name} not ready within {START_DEADLINE}s:\n{pod.log()}")

    def close(self) -> None:
        for proxy in self.services:
            proxy.close()
        for pod in self.pods:
            pod.stop()
        for path in reversed(self._created):
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink()


def _program_paths() -> list[str]:
    """Return the directories the pod's program runs from (the project, its venv, Python).

    In an image they are part of the image; here they are host directories that a pod's mount
    (an ``emptyDir`` on ``/tmp`` when the project lives under ``/tmp``) could hide.
    """
    paths = {str(ROOT), sys.prefix, sys.base_prefix}
    return sorted(p for p in paths if p != "/")


def _launcher_env() -> dict[str, str]:
    """Return the environment of the launcher itself (not of the container)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PYTHONPATH"] = str(ROOT)
    return env


@contextmanager
def local_cluster() -> Iterator[Cluster]:
    """Yield a :class:`Cluster`; stop its pods and Services and remove its mount points after.

    Mount namespaces need root: the test fails (it never skips) otherwise.
    """
    if os.geteuid() != 0:
        pytest.fail("running rendered pods needs root (mount namespaces)")
    require_tool("setpriv")
    # not under /tmp: a pod's emptyDir mounted on /tmp would hide the volumes' sources
    workdir = Path(tempfile.mkdtemp(prefix="lakemirror-pods-", dir="/var/tmp"))
    with ExitStack() as stack:
        cluster = Cluster(workdir)
        stack.callback(shutil.rmtree, workdir, True)
        stack.callback(cluster.close)
        yield cluster

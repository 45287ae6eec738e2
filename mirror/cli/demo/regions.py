"""Set up the demo's two regions: a server each, the replicant, replication, and the mirror."""

from __future__ import annotations

import io
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import httpx
import yaml

from mirror.cli.demo.api import (
    BRANCH,
    HTTP_TIMEOUT,
    MIRROR_REGION,
    MIRROR_REPO,
    MIRRORS_PATH,
    SOURCE_REPO,
    Key,
    check,
    create_replicator,
    head,
    new_key,
)
from mirror.cli.demo.errors import DemoError
from mirror.cli.demo.options import DROP_PROBABILITY, PROG, Options
from mirror.cli.demo.processes import Child, Children, clean_environment, free_port
from mirror.cli.demo.signals import ignore_interrupts

if TYPE_CHECKING:
    from mirror.simulate import ReplicationSimulator

__all__ = ["DemoRegions", "Deployment", "demo_regions"]

_DROP_FOR = (0.5, 2.0)
_REPLICANT_POLL = 0.2


@dataclass(frozen=True, slots=True)
class DemoRegions:
    """The demo's two running regions and the mirror between them, for scripts and benchmarks.

    ``source`` and ``mirror`` are administrator clients of the regions' ``/api/v1``;
    ``replicant`` is signed in to the configuration API with region ``b``'s administrator key.
    """

    source: httpx.Client
    mirror: httpx.Client
    replicant: httpx.Client
    simulator: ReplicationSimulator
    source_repo: str
    mirror_repo: str
    branch: str
    initial_head: str | None


def _prepare(data_dir: Path) -> tuple[Path, Path]:
    data_dir.mkdir(parents=True, exist_ok=True)
    regions = data_dir / "region-a", data_dir / "region-b"
    for region in regions:
        if region.exists():
            shutil.rmtree(region)
        region.mkdir()
    return regions


def _server_args(port: int, data_dir: Path) -> list[str]:
    return [
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--log-format",
        "json",
    ]


def _replicant_config(
    path: Path, region_b: Path, port: int, a: tuple[str, Key], b: tuple[str, Key]
) -> None:
    config = {
        "data_dir": str(region_b),
        "replicant": {
            "region": MIRROR_REGION,
            "host": "127.0.0.1",
            "port": port,
            "poll_interval": _REPLICANT_POLL,
            "lease_seconds": 5.0,
            "replica_id": "demo",
        },
        "regions": {
            "a": {
                "server_url": a[0],
                "access_key_id": a[1].access_key_id,
                "secret_access_key": a[1].secret_access_key,
            },
            "b": {
                "server_url": b[0],
                "access_key_id": b[1].access_key_id,
                "secret_access_key": b[1].secret_access_key,
            },
        },
        "logging": {"format": "json", "level": "info"},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


class Deployment:
    """What the demo runs besides its writer: the processes, replication and the API clients."""

    def __init__(self, options: Options, out: TextIO, err: TextIO, stop: threading.Event) -> None:
        self.options = options
        self.out = out
        self.err = err
        self.children = Children(stop)
        self.clients: list[httpx.Client] = []
        self.simulator: ReplicationSimulator | None = None

    def say(self, text: str = "") -> None:
        """Print a line of the run's narration."""
        print(text, file=self.out, flush=True)

    def client(self, base_url: str, key: Key) -> httpx.Client:
        """Return a client of ``base_url`` signed in with ``key``, closed at shut-down."""
        http = httpx.Client(base_url=base_url, auth=key.auth, timeout=HTTP_TIMEOUT)
        self.clients.append(http)
        return http

    def start(self) -> DemoRegions:
        """Start both regions, the replicant and replication, and create the mirror.

        Raises:
            DemoError: a process did not start, or a set-up request failed.
            DemoInterruptedError: the demo was stopped while starting.
        """
        from mirror.block import BlockResolver
        from mirror.simulate import ReplicationSimulator

        opts = self.options
        try:
            region_a, region_b = _prepare(opts.data_dir)
        except OSError as exc:
            raise DemoError(f"cannot prepare {opts.data_dir}: {exc}") from exc
        key_a, key_b = new_key("a"), new_key("b")
        env = clean_environment()
        port_a, port_b, port_r = free_port(), free_port(), free_port()
        self.say(f"LakeMirror demo: two regions on 127.0.0.1, data and logs in {opts.data_dir}")
        a = self._server("a", port_a, region_a, key_a, env)
        # region b's web UI shows its mirrors through the replicant started below
        b = self._server("b", port_b, region_b, key_b, env, f"http://127.0.0.1:{port_r}")
        self.children.wait_healthy(a)
        self.children.wait_healthy(b)
        for child, key in ((a, key_a), (b, key_b)):
            self.say(
                f"  {child.name:<10}{child.url}  admin key {key.access_key_id} / "
                f"{key.secret_access_key}"
            )
        self.say(
            f"  web UI     region a {a.url}/ui/, region b {b.url}/ui/ (its mirrors: "
            f"{b.url}/ui/mirrors); sign in with the region's admin key above"
        )
        source = self.client(f"{a.url}/api/v1", key_a)
        mirror = self.client(f"{b.url}/api/v1", key_b)
        replicator = create_replicator(mirror)
        self.say(f"  region b  user replicator (policy Replicator), key {replicator.access_key_id}")
        config = opts.data_dir / "replicant.yaml"
        _replicant_config(config, region_b, port_r, (a.url, key_a), (b.url, replicator))
        rep = self.children.spawn(
            "replicant",
            ["replicant", "--config", str(config)],
            port_r,
            opts.data_dir / "replicant.log",
            env,
        )
        # the repository is created while the replicant starts
        repository = {
            "name": SOURCE_REPO,
            "storage_namespace": f"local://{SOURCE_REPO}",
            "default_branch": BRANCH,
        }
        what = f"create repository {SOURCE_REPO} in region a"
        check(source.post("/repositories", json=repository), what, 201)
        initial = head(source, SOURCE_REPO)
        self.say(f"  region a  repository {SOURCE_REPO} at local://{SOURCE_REPO}")
        self.children.wait_healthy(rep)
        self.say(f"  replicant {rep.url}/service/replication/v1 (region b, config {config})")
        low, high = opts.delay
        simulator = self.simulator = ReplicationSimulator(
            BlockResolver(region_a).open(f"local://{SOURCE_REPO}"),
            BlockResolver(region_b).open(f"local://{MIRROR_REPO}"),
            seed=opts.seed,
            delay=opts.delay,
            drop_probability=opts.drop_probability,
            drop_for=_DROP_FOR,
            poll_interval=opts.replication_poll,
        )
        simulator.start()
        self.say(
            f"  replication  region a local://{SOURCE_REPO} -> region b local://{MIRROR_REPO}: "
            f"{low:g}-{high:g} s late, random order, {opts.drop_probability:.0%} of deliveries "
            "dropped and retried"
        )
        replicant = self.client(rep.url, key_b)
        body = {
            "name": MIRROR_REPO,
            "region": MIRROR_REGION,
            "storage_namespace": f"local://{MIRROR_REPO}",
        }
        mirrors = MIRRORS_PATH.format(repo=SOURCE_REPO)
        response = check(replicant.post(mirrors, json=body), "create the mirror", 201)
        self.say(
            f"  mirror     POST {mirrors} -> {response.status_code}: "
            f"{SOURCE_REPO} (region a) -> {MIRROR_REPO} (region b)"
        )
        return DemoRegions(
            source, mirror, replicant, simulator, SOURCE_REPO, MIRROR_REPO, BRANCH, initial
        )

    def _server(
        self,
        region: str,
        port: int,
        data_dir: Path,
        key: Key,
        env: dict[str, str],
        replicant_url: str = "",
    ) -> Child:
        environment = {
            **env,
            "LAKEMIRROR_ADMIN_ACCESS_KEY_ID": key.access_key_id,
            "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": key.secret_access_key,
        }
        if replicant_url:
            environment["LAKEMIRROR_UI__REPLICANT_URL"] = replicant_url
        args = _server_args(port, data_dir)
        log = self.options.data_dir / f"region-{region}.log"
        return self.children.spawn(f"region {region}", args, port, log, environment)

    def shut_down(self) -> None:
        """Stop replication and every child process, whatever happened."""
        ignore_interrupts()
        if self.simulator is not None:
            try:
                self.simulator.stop()
            except Exception as exc:
                print(f"{PROG}: replication simulator: {exc}", file=self.err, flush=True)
        for http in self.clients:
            http.close()
        self.children.stop_all()


@contextmanager
def demo_regions(
    data_dir: Path,
    *,
    delay: tuple[float, float] = (0.0, 2.0),
    drop_probability: float = DROP_PROBABILITY,
    replication_poll: float = 0.1,
    seed: int | None = None,
    out: TextIO | None = None,
) -> Iterator[DemoRegions]:
    """Start what the demo starts (no writer, no view) and stop it all when the block ends.

    ``replication_poll`` is how often the simulator looks for new files: the time it takes to
    notice one comes on top of ``delay``.

    Raises:
        LakeMirrorError: a process did not start, or a set-up request failed.
    """
    options = Options(data_dir, None, 1.0, delay, seed, False, drop_probability, replication_poll)
    deployment = Deployment(options, out or io.StringIO(), out or io.StringIO(), threading.Event())
    try:
        yield deployment.start()
    finally:
        deployment.shut_down()

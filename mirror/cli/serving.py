"""Run an ASGI app under uvicorn: in this process or as worker processes, stopping gracefully.

On SIGTERM (or Ctrl-C) the server stops accepting connections, lets the requests in flight
finish for up to ``shutdown_timeout`` seconds (uvicorn's ``timeout_graceful_shutdown``), runs
the app's shutdown (closing its KV), and the process exits with code 0. Whatever hangs (a
request handler blocked in a thread, a worker ignoring cancellation), the process is gone
:data:`FORCE_EXIT_GRACE` seconds after that bound, with exit code 1.

With several workers, the parent binds one listening socket per worker on the same port
(``SO_REUSEPORT``: the kernel spreads new connections evenly over them, where one shared socket
lets whichever worker wakes first take a whole burst), then starts the workers under uvicorn's
supervisor, which replaces a worker that dies. Each builds its own app with the factory it was
given (``lakemirror server``'s is :func:`mirror.cli.server.worker_app`) from the configuration
the parent handed over (:func:`worker_config`) in a private temporary directory, which also
holds the Prometheus multiprocess files that make ``/metrics`` add up every worker. SIGTERM to
the parent is passed to every worker, each drains as above, and the parent exits 0 once all
have. This module runs processes; what they serve is built by the caller.

Every connection is served by :class:`mirror.cli.http_protocol.HttpToolsProtocol` under the
limits the caller gives (:class:`~mirror.cli.http_protocol.ConnectionLimits`: header, body and
keep-alive timeouts), carried to the protocol, and to worker processes, by
:class:`ServingConfig`.
"""

from __future__ import annotations

import logging
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from mirror.cli.http_protocol import DEFAULT_LIMITS, ConnectionLimits, HttpToolsProtocol
from mirror.config import LakeMirrorConfig
from mirror.logging import get_logger

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = [
    "EVENT_LOOP_ENV",
    "FAST_READS_ENV",
    "FORCE_EXIT_GRACE",
    "HTTP_PROTOCOL_ENV",
    "MULTIPROC_ENV",
    "STATE_ENV",
    "UVICORN_OPTIONS",
    "GracefulServer",
    "ServingConfig",
    "fast_reads",
    "serve",
    "serve_workers",
    "uvicorn_options",
    "worker_config",
]

# httptools parses in C; our protocol keeps header names as the app spells them (lakeFS's
# client reads `Content-Range` of a 416 case-sensitively). Logging is configure_logging's, and
# the access line is RequestLogMiddleware's, not uvicorn's. The event loop is asyncio's, not
# uvloop's: libuv accepts one connection per turn of its loop, so under a flood a new connection
# (a Kubernetes probe's) waits behind every connection queued before it, for tens of seconds;
# asyncio accepts all that are waiting each turn and the admission refuses the excess at once
# (docs/benchmarks.md, "Overload"). Served requests cost the same CPU on either loop.
UVICORN_OPTIONS: dict[str, Any] = {
    "server_header": False,
    "http": HttpToolsProtocol,
    "loop": "asyncio",
    "log_config": None,
    "access_log": False,
}
"""The options ``lakemirror server`` and ``replicant`` give uvicorn (``bench.api`` reuses them)."""

HTTP_PROTOCOL_ENV = "_LAKEMIRROR_HTTP_PROTOCOL"
"""``h11`` serves with uvicorn's pure-Python protocol instead: ``bench.http_stack`` compares the
two on the same build (not a configuration key)."""


FAST_READS_ENV = "_LAKEMIRROR_FAST_READS"
"""``off`` sends stat, read, upload, list and commit through FastAPI's routes too
(:mod:`mirror.api.fast_reads`): ``bench.http_stack --compare fast-reads`` compares the two on
the same build (not a configuration key)."""


def fast_reads() -> bool:
    """Return whether the API serves plain reads and commits by its fast routes (FAST_READS_ENV)."""
    return os.environ.get(FAST_READS_ENV) != "off"


EVENT_LOOP_ENV = "_LAKEMIRROR_EVENT_LOOP"
"""``asyncio`` or ``uvloop`` picks uvicorn's event loop: ``bench.overload --event-loop``
compares them on the same build (not a configuration key)."""


def uvicorn_options() -> dict[str, Any]:
    """Return :data:`UVICORN_OPTIONS`, with h11 if :data:`HTTP_PROTOCOL_ENV` asks for it."""
    options = dict(UVICORN_OPTIONS)
    if os.environ.get(HTTP_PROTOCOL_ENV) == "h11":
        options["http"] = "h11"
    loop = os.environ.get(EVENT_LOOP_ENV)
    if loop in ("asyncio", "uvloop"):
        options["loop"] = loop
    return options


STATE_ENV = "_LAKEMIRROR_SERVING_STATE"
"""Names the parent's private directory to the worker processes (not a configuration key)."""
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable: where each process writes its metric values."""
_CONFIG_FILE = "config.pickle"
_METRICS_DIR = "metrics"
FORCE_EXIT_GRACE = 3.0
"""Seconds past ``shutdown_timeout`` after which a stopping process exits whatever hangs."""
WORKER_START_GRACE = 120.0
"""Seconds a new worker has to answer the supervisor's first health check. Until it runs, a
worker answers no check; its interpreter and imports can take longer than a check's timeout (5 s)
on a busy machine, and a worker killed for that would be replaced by one killed the same way."""


class ServingConfig(uvicorn.Config):
    """uvicorn's configuration, carrying the limits :class:`HttpToolsProtocol` applies.

    Args:
        app: As uvicorn's.
        limits: The connections' timeouts and head bound.
        **kwargs: uvicorn's options.
    """

    def __init__(self, app: Any, *, limits: ConnectionLimits = DEFAULT_LIMITS, **kwargs: Any):
        super().__init__(app, **kwargs)
        self.connection_limits = limits


def _force_exit(seconds: float) -> None:
    get_logger("mirror.server").error(
        "shutdown took too long; exiting now", after_seconds=round(seconds, 1)
    )
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(1)


def _arm_watchdog(seconds: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


class GracefulServer(uvicorn.Server):
    """A uvicorn server that tells ``on_exit`` when a signal first asks it to stop.

    The process exits at most ``bound`` seconds after that signal, whatever hangs. ``on_exit``
    runs in the signal handler, on the event loop's thread: it may only schedule work (the
    replicant starts releasing its leases while requests drain).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        on_exit: Callable[[], None] | None = None,
        bound: float | None = None,
    ) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._bound = bound

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Stop serving; on the first signal, tell ``on_exit`` and arm the bound."""
        first = not self.should_exit
        super().handle_exit(sig, frame)
        if not first:
            return
        if self._bound is not None:
            bound = self._bound
            _arm_watchdog(bound, lambda: _force_exit(bound))
        if self._on_exit is not None:
            self._on_exit()


class _Supervisor(Multiprocess):
    """uvicorn's supervisor of worker processes, each worker on a listening socket of its own.

    A worker that dies is replaced on the socket it had, and so is one that stops answering its
    health checks; a new worker gets :data:`WORKER_START_GRACE` seconds to answer its first.
    Workers still alive ``bound`` seconds after SIGTERM or SIGINT are killed.
    """

    def __init__(self, config: uvicorn.Config, sockets: list[socket.socket], bound: float) -> None:
        super().__init__(config, sockets)
        self._bound = bound
        self._armed = False
        self._starting: dict[int, float] = {}
        """Worker index → when it was started, until it answers its first health check."""

    def _start(self, index: int) -> Process:
        process = Process(self.config, [self.sockets[index]])
        process.start()
        return process

    def _start_with_grace(self, index: int) -> Process:
        """Start worker ``index`` and send its first health check, read by _still_starting."""
        process = self._start(index)
        process.parent_conn.send(b"ping")
        self._starting[index] = time.monotonic()
        return process

    def _still_starting(self, index: int, process: Process) -> bool:
        """Return whether worker ``index`` is alive, has not answered yet, and is in its grace."""
        began = self._starting.get(index)
        if began is None:
            return False
        try:
            answered = process.process.is_alive() and process.parent_conn.poll(0)
            if answered:
                process.parent_conn.recv()
        except (OSError, EOFError, pickle.UnpicklingError):
            answered = False
        if answered or not process.process.is_alive():
            del self._starting[index]
            return False
        if time.monotonic() - began > WORKER_START_GRACE:
            del self._starting[index]
            return False
        return True

    def init_processes(self) -> None:
        """Start one worker per socket."""
        for index in range(self.processes_num):
            self.processes.append(self._start_with_grace(index))

    def keep_subprocess_alive(self) -> None:
        """Replace dead or hung workers; stop everything if one could not start at all."""
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if self._still_starting(index, process):
                continue
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                # it would fail the same way on every restart
                _uvicorn_log.error(f"Child process [{process.pid}] failed to start, stopping.")
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            _uvicorn_log.info(f"Child process [{process.pid}] died")
            self.processes[index] = self._start_with_grace(index)

    def restart_all(self) -> None:
        """Replace every worker (SIGHUP), each on its socket, the new one before the old goes."""
        for index, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = self._start(index)
            if not new.wait_until_ready(self.config.timeout_worker_healthcheck, self.should_exit):
                new.kill()
                new.join()
                return
            old.terminate()
            old.join()
            self.processes[index] = new
            self._starting.pop(index, None)  # the new one answered; the old one's grace is over

    def handle_ttin(self) -> None:
        """Keep the number of workers (it is ``server.workers``, one socket each)."""
        _uvicorn_log.info("Received SIGTTIN; the number of workers is server.workers")

    def handle_ttou(self) -> None:
        """Keep the number of workers (it is ``server.workers``, one socket each)."""
        _uvicorn_log.info("Received SIGTTOU; the number of workers is server.workers")

    def _arm(self) -> None:
        if self._armed:
            return
        self._armed = True

        def kill_stragglers() -> None:
            for worker in list(self.processes):
                if worker.process.is_alive():
                    get_logger("mirror.server").error(
                        "worker did not stop in time; killing it", pid=worker.pid
                    )
                    worker.process.kill()

        _arm_watchdog(self._bound, kill_stragglers)

    def handle_term(self) -> None:
        """Stop every worker (SIGTERM), killing stragglers past the bound."""
        self._arm()
        super().handle_term()

    def handle_int(self) -> None:
        """Stop every worker (SIGINT), killing stragglers past the bound."""
        self._arm()
        super().handle_int()


_uvicorn_log = logging.getLogger("uvicorn.error")


def _listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """Bind ``count`` sockets to one address with ``SO_REUSEPORT``.

    Raises:
        OSError: the address is taken (by any other socket, with or without ``SO_REUSEPORT``).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # A socket bound without SO_REUSEPORT proves no other process listens there: with the
    # option alone, another server of the same user on the port would silently share it.
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.set_inheritable(True)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


@contextmanager
def _exit_zero_on_signal(server: uvicorn.Server) -> Iterator[None]:
    """Handle SIGTERM and SIGINT as a request to stop, before, during and after serving.

    uvicorn raises the signal again once it has shut down, so that the default action (death by
    that signal) follows; the handler installed here receives it instead, so a graceful stop
    exits with code 0. Before uvicorn takes the signals over, a stop request still counts.
    """

    def stop(sig: int, frame: FrameType | None) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str,
    shutdown_timeout: float,
    on_exit: Callable[[], None] | None = None,
    limits: ConnectionLimits = DEFAULT_LIMITS,
) -> bool:
    """Serve ``app`` in this process until SIGTERM or SIGINT; return whether it started.

    Args:
        app: The ASGI app.
        host: Address to listen on.
        port: Port to listen on.
        log_level: uvicorn's log level.
        shutdown_timeout: Seconds in-flight requests may take after the signal.
        on_exit: Called (from the signal handler) when the first stop signal arrives.
        limits: The connections' timeouts and head bound.
    """
    config = ServingConfig(
        app,
        limits=limits,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=_timeout(shutdown_timeout),
        **uvicorn_options(),
    )
    server = GracefulServer(config, on_exit, bound=shutdown_timeout + FORCE_EXIT_GRACE)
    with _exit_zero_on_signal(server):
        server.run()
    return server.started


def _timeout(seconds: float) -> int:
    # uvicorn takes whole seconds; round up so the bound is never shorter than configured
    return max(0, int(-(-seconds // 1)))


def serve_workers(
    config: LakeMirrorConfig, *, workers: int, app_factory: Callable[[], ASGIApp]
) -> bool:
    """Serve the API from ``workers`` processes on ``config``'s port until SIGTERM or SIGINT.

    The parent keeps no KV open: each worker opens its own, in ``app_factory``, which reads the
    configuration with :func:`worker_config`. Returns ``False`` when a worker could not start
    (its reason is logged), ``True`` otherwise.

    Args:
        config: The process configuration, handed over to every worker.
        workers: How many worker processes serve.
        app_factory: Builds one worker's app; a module-level function, since each worker imports
            it by name.
    """
    state = Path(tempfile.mkdtemp(prefix="lakemirror-server-"))
    saved = {name: os.environ.get(name) for name in (STATE_ENV, MULTIPROC_ENV)}
    try:
        (state / _METRICS_DIR).mkdir()
        # the directory is the user's alone (mkdtemp), and so is the file: it holds secrets
        target = state / _CONFIG_FILE
        target.touch(mode=0o600)
        target.write_bytes(pickle.dumps(config))
        os.environ[STATE_ENV] = str(state)
        os.environ[MULTIPROC_ENV] = str(state / _METRICS_DIR)
        uv_config = ServingConfig(
            f"{app_factory.__module__}:{app_factory.__qualname__}",
            limits=ConnectionLimits.from_settings(config.server),
            factory=True,
            host=config.server.host,
            port=config.server.port,
            workers=workers,
            log_level=config.logging.level,
            timeout_graceful_shutdown=_timeout(config.server.shutdown_timeout),
            **uvicorn_options(),
        )
        try:
            sockets = _listening_sockets(config.server.host, config.server.port, workers)
        except OSError as exc:
            get_logger("mirror.server").error(
                "cannot listen", host=config.server.host, port=config.server.port, error=str(exc)
            )
            return False
        bound = config.server.shutdown_timeout + FORCE_EXIT_GRACE
        supervisor = _Supervisor(uv_config, sockets, bound)
        _uvicorn_log.info(
            f"Uvicorn running on http://{config.server.host}:{config.server.port} "
            f"({workers} workers)"
        )
        try:
            supervisor.run()
        finally:
            for sock in sockets:
                sock.close()
        return not any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(state, ignore_errors=True)


def worker_config() -> LakeMirrorConfig:
    """Return the configuration :func:`serve_workers` handed to this worker process.

    Raises:
        KeyError: this process is no worker of :func:`serve_workers`.
    """
    state = Path(os.environ[STATE_ENV])
    # written by the parent process into a directory only its user can read (mkdtemp)
    config: LakeMirrorConfig = pickle.loads((state / _CONFIG_FILE).read_bytes())  # nosec B301
    return config

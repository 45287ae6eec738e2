"""``lakemirror replicant``: mirror repositories of other regions into this one."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

from mirror.errors import InvalidValueError, UnavailableError

if TYPE_CHECKING:
    from mirror.auth.tokens import LoginTokens
    from mirror.config import LakeMirrorConfig
    from mirror.replicant.settings import ServiceSettings

__all__ = ["register_replicant_command", "run_replicant", "service_settings"]


def register_replicant_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``replicant`` subcommand to ``sub``."""
    from mirror.cli.config_cmd import add_config_file_option

    parser = sub.add_parser(
        "replicant",
        help="mirror repositories of other regions into this region (configuration API, /metrics)",
    )
    add_config_file_option(parser)
    parser.add_argument("--host", help="address to listen on (replicant.host; 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (replicant.port; 8001)")
    parser.add_argument("--data-dir", help="the region's data directory (data_dir)")
    parser.add_argument("--region", help="the region mirrored into (replicant.region)")
    parser.add_argument(
        "--poll-interval", type=float, help="seconds between looks (replicant.poll_interval)"
    )
    parser.add_argument(
        "--lease-seconds", type=float, help="lease duration (replicant.lease_seconds)"
    )
    parser.add_argument("--replica-id", help="this replica's name in leases (replicant.replica_id)")
    parser.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    parser.add_argument("--log-format", choices=["auto", "json", "console"])


def overrides(args: argparse.Namespace) -> dict[str, object]:
    """Return the configuration overrides the command's flags give."""
    return {
        "data_dir": args.data_dir,
        "replicant": {
            "host": args.host,
            "port": args.port,
            "region": args.region,
            "poll_interval": args.poll_interval,
            "lease_seconds": args.lease_seconds,
            "replica_id": args.replica_id,
        },
        "logging": {"level": args.log_level, "format": args.log_format},
    }


def service_settings(config: LakeMirrorConfig) -> ServiceSettings:
    """Return the :class:`~mirror.replicant.settings.ServiceSettings` of ``config``."""
    from mirror.replicant.settings import ServiceSettings

    r = config.replicant
    settings = ServiceSettings(
        region=r.region,
        regions=dict(config.regions),
        poll_interval=r.poll_interval,
        lease_seconds=r.lease_seconds,
        concurrency=r.concurrency,
        list_threshold=r.list_threshold,
        object_cache_size=r.object_cache_size,
        validated_heads_kept=r.validated_heads_kept,
        bulk_threshold=r.bulk_threshold,
        shutdown_timeout=r.shutdown_timeout,
    )
    if r.replica_id:
        settings = replace(settings, replica_id=r.replica_id)
    return settings


def _login_tokens(config: LakeMirrorConfig, log: Any) -> LoginTokens | None:
    """Return the region's login tokens, or ``None`` (HTTP Basic only) when there is no key.

    The region's server signs its login tokens with a key derived from the same material
    (``auth.encrypt_secret_key``, or on SQLite the key file of the shared data directory), so
    the web UI's session signs in here too.
    """
    from mirror.auth.tokens import LoginTokens
    from mirror.config import ConfigurationError

    try:
        return LoginTokens.from_config(config)
    except ConfigurationError as exc:
        log.warning("login tokens not accepted, HTTP Basic only", reason=str(exc))
        return None


def run_replicant(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """Run the replicant as configured until SIGTERM or SIGINT; return the exit code.

    On SIGTERM the workers stop and the leases are released at once (another replica takes the
    mirrors over on its next lease round) while the configuration API drains its requests, all
    within ``replicant.shutdown_timeout``; then the process exits with 0.
    """
    from mirror.audit import AuditTrail
    from mirror.auth.secrets import optional_cipher
    from mirror.auth.store import AuthStore
    from mirror.cli.http_protocol import ConnectionLimits
    from mirror.cli.server import block_resolver, block_settings, open_kv
    from mirror.cli.serving import serve
    from mirror.config import ConfigurationError, load_config, with_overrides
    from mirror.httputil.admission import AdmissionLimits
    from mirror.logging import configure_logging, get_logger
    from mirror.replicant.app import create_replicant_app
    from mirror.replicant.readers import NamespaceReaders
    from mirror.replicant.service import ReplicantService

    try:
        config = with_overrides(load_config(args.config_file), overrides(args))
        settings = service_settings(config)
    except ConfigurationError as exc:
        print(f"lakemirror replicant: {exc}", file=err, flush=True)
        return 2
    configure_logging(config.logging.format, config.logging.level)
    log = get_logger("mirror.replicant")
    try:
        kv = open_kv(config)
    except (ConfigurationError, UnavailableError) as exc:
        print(f"lakemirror replicant: {exc}", file=err, flush=True)
        return 2 if isinstance(exc, ConfigurationError) else 1
    try:
        resolver, schemes = block_resolver(config)
        s3 = block_settings(config.blockstore.s3) if "s3" in schemes else None
        try:
            service = ReplicantService(settings, kv, NamespaceReaders(resolver, s3))
        except InvalidValueError as exc:
            print(f"lakemirror replicant: {exc}", file=err, flush=True)
            return 2
        app = create_replicant_app(
            service,
            AuthStore(kv, cipher=optional_cipher(config)),
            login_tokens=_login_tokens(config, log),
            audit=AuditTrail.from_settings(kv, config.audit),
            admission=AdmissionLimits.from_settings(config.server),
            max_json_body=config.server.max_json_body,
        )
        host, port = config.replicant.host, config.replicant.port
        print(
            f"replicant of region {settings.region} on http://{host}:{port}/service/replication/v1",
            file=out,
            flush=True,
        )
        log.info("starting", host=host, port=port, region=settings.region)
        started = serve(
            app,
            host=host,
            port=port,
            log_level=config.logging.level,
            shutdown_timeout=config.replicant.shutdown_timeout,
            on_exit=service.request_stop,
            limits=ConnectionLimits.from_settings(config.server),
        )
    finally:
        kv.close()
    if not started:
        print("lakemirror replicant: the replicant did not start (see the log)", file=err)
        return 1
    log.info("stopped", replica=settings.replica_id)
    return 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_replicant_command(parser.add_subparsers(dest="command"))
    sys.exit(run_replicant(parser.parse_args(), out=sys.stdout, err=sys.stderr))

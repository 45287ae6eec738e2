"""``lakemirror server``: the lakeFS-compatible API, configured by :mod:`mirror.config`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from pydantic import SecretStr
from uvicorn.config import STARTUP_FAILURE

from mirror.actions import ActionsService
from mirror.actions.egress import EgressPolicy
from mirror.api.app import create_app
from mirror.audit import AuditTrail
from mirror.auth.errors import SetupDoneError
from mirror.auth.secrets import cipher_from_config
from mirror.auth.store import AuthStore
from mirror.auth.throttle import SignInThrottle, ThrottleRules
from mirror.auth.tokens import LoginTokens
from mirror.block.resolver import BlockResolver
from mirror.cli.http_protocol import ConnectionLimits
from mirror.cli.repository_cleanups import (
    register_repository_cleanups,
    resume_deletions_in_background,
)
from mirror.cli.serving import (
    UVICORN_OPTIONS,
    fast_reads,
    serve,
    serve_workers,
    worker_config,
)
from mirror.config import (
    AuthSettings,
    ConfigurationError,
    LakeMirrorConfig,
    S3Settings,
    SignInThrottleSettings,
)
from mirror.core.catalog import Catalog
from mirror.errors import UnavailableError
from mirror.gateway.app import with_gateway
from mirror.gateway.context import GatewayState
from mirror.httputil.admission import (
    Admission,
    AdmissionLimits,
    AdmissionMiddleware,
    Refusal,
    overloaded_json,
)
from mirror.httputil.errors import answer_for
from mirror.imports.links import LinkSigner, link_key_material
from mirror.kv.protocol import KV
from mirror.kv.sqlite import SqliteKV
from mirror.logging import configure_logging, get_logger
from mirror.tasks import RunnerSettings, tasks_still_running
from mirror.ui import CsrfTokens, create_ui_app, with_ui

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from mirror.block.s3 import S3Settings as BlockS3Settings

__all__ = [
    "ADMIN_KEY_ENV",
    "ADMIN_SECRET_ENV",
    "ADMIN_USER_ENV",
    "UVICORN_OPTIONS",
    "block_resolver",
    "block_settings",
    "bootstrap_auth",
    "build_app",
    "check_s3",
    "open_catalog",
    "open_kv",
    "register_s3",
    "run_server",
    "worker_app",
]

ADMIN_KEY_ENV = "LAKEMIRROR_ADMIN_ACCESS_KEY_ID"
# a variable's name
ADMIN_SECRET_ENV = "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY"  # nosec B105
ADMIN_USER_ENV = "LAKEMIRROR_ADMIN_USER"


def bootstrap_auth(
    auth: AuthStore, settings: AuthSettings, out: TextIO, *, wait_for_setup: bool = False
) -> None:
    """Make sure an administrator can sign in.

    With both ``auth.admin_access_key_id`` and ``auth.admin_secret_access_key`` configured
    (``LAKEMIRROR_ADMIN_ACCESS_KEY_ID`` and ``LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY``), that key
    signs in as the administrator ``auth.admin_user``. Otherwise, on the first start only,
    generate a key and print it once, unless ``wait_for_setup`` leaves that to
    ``POST /api/v1/setup_lakefs``.

    Raises:
        ConfigurationError: only one of the two is set.
    """
    auth.ensure_builtins()
    key_id = settings.admin_access_key_id.get_secret_value() if settings.admin_access_key_id else ""
    secret = (
        settings.admin_secret_access_key.get_secret_value()
        if settings.admin_secret_access_key
        else ""
    )
    user = settings.admin_user
    if key_id or secret:
        if not (key_id and secret):
            raise ConfigurationError(
                "set both auth.admin_access_key_id and auth.admin_secret_access_key "
                f"({ADMIN_KEY_ENV} and {ADMIN_SECRET_ENV}), or neither"
            )
        auth.bootstrap_admin(user, key_id, secret)
        print(f"administrator {user!r} signs in with access key {key_id}", file=out, flush=True)
        return
    if auth.is_initialized():
        return
    if wait_for_setup:
        print(
            "not set up yet: create the first administrator with POST /api/v1/setup_lakefs",
            file=out,
            flush=True,
        )
        return
    try:
        created = auth.setup(user)
    except SetupDoneError:
        return  # another replica, starting at the same moment, set it up and printed the key
    print(
        "Generated the administrator's credentials. They are shown only this once:\n"
        f"  access_key_id:     {created.access_key_id}\n"
        f"  secret_access_key: {created.secret_access_key}",
        file=out,
        flush=True,
    )


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def open_kv(config: LakeMirrorConfig) -> KV:
    """Return the KV ``config`` describes: SQLite, or DynamoDB (its table checked or created)."""
    if config.kv.type == "sqlite":
        path = config.sqlite_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteKV(path)
    try:
        from botocore.exceptions import BotoCoreError

        from mirror.cli.kv_cmd import dynamo_settings
        from mirror.kv.dynamodb import DynamoKV, create_table
    except ImportError as exc:
        raise ConfigurationError(
            f"kv.type 'dynamodb' needs the s3 extra (pip install 'lakemirror[s3]'): {exc}"
        ) from exc
    section = config.kv.dynamodb
    settings = dynamo_settings(config)
    try:
        if section.create_table:
            create_table(settings)
        kv = DynamoKV(settings)
    except BotoCoreError as exc:
        raise ConfigurationError(f"kv.dynamodb: {exc}") from exc
    try:
        kv.check()
    except BaseException:
        kv.close()
        raise
    return kv


def _s3_configured(section: S3Settings) -> bool:
    """Return whether ``blockstore.s3`` names an endpoint, region or key (not only defaults)."""
    fields = ("endpoint_url", "region", "access_key_id")
    return any(getattr(section, f) is not None for f in fields) or bool(section.regions)


def check_s3(config: LakeMirrorConfig) -> None:
    """Verify that each configured S3 endpoint answers a ``ListBuckets`` with its credentials.

    The schema names no bucket (buckets come with each repository's ``s3://`` namespace), so
    the cheapest call proving endpoint and credentials is ``ListBuckets``. Nothing is checked
    when ``blockstore.s3`` sets no endpoint, region, key or region entry, or when the ``s3``
    extra is missing.

    Raises:
        UnavailableError: an endpoint is unreachable or refuses the credentials.
    """
    section = config.blockstore.s3
    if not _s3_configured(section):
        return
    try:
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
        )

        from mirror.block.s3 import make_s3_client
    except ImportError:
        return
    names: list[str | None] = [None, *section.regions]
    for name in names:
        merged = section.for_region(name)
        where = f"blockstore.s3{'' if name is None else f'.regions.{name}'}"
        endpoint = merged.endpoint_url or "AWS"
        try:
            client = make_s3_client(block_settings(merged))
            client.list_buckets()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            raise UnavailableError(
                f"{where}: S3 at {endpoint} refused ListBuckets ({code})"
            ) from None
        except (EndpointConnectionError, ConnectTimeoutError) as exc:
            raise UnavailableError(f"{where}: S3 at {endpoint} is unreachable: {exc}") from None
        except BotoCoreError as exc:
            raise UnavailableError(f"{where}: S3 at {endpoint}: {exc}") from None


def block_settings(section: S3Settings) -> BlockS3Settings:
    """Return the S3 driver's settings from the ``blockstore.s3`` configuration section."""
    from mirror.block.s3 import S3Settings as BlockS3Settings

    return BlockS3Settings(
        endpoint_url=section.endpoint_url,
        region=section.region,
        access_key_id=section.access_key_id,
        secret_access_key=_secret(section.secret_access_key),
        addressing_style=section.addressing_style,
        max_attempts=section.max_attempts,
    )


def register_s3(resolver: BlockResolver, config: LakeMirrorConfig) -> bool:
    """Serve ``s3://`` namespaces on ``resolver`` as ``config`` says; ``False`` without boto3."""
    try:
        from mirror.block.s3 import s3_store_factory
    except ImportError:
        return False
    resolver.register("s3", s3_store_factory(block_settings(config.blockstore.s3)))
    return True


def open_catalog(config: LakeMirrorConfig) -> tuple[Catalog, tuple[str, ...]]:
    """Return the catalog ``config`` describes, and the namespace schemes it serves.

    The KV is SQLite or DynamoDB (``kv.type``); ``local://`` namespaces live under
    ``blockstore.local.root``, and ``s3://`` ones are served when the ``s3`` extra is installed.
    A DynamoDB table is checked (or created, with ``kv.dynamodb.create_table``) and configured S3
    endpoints are checked (:func:`check_s3`) before returning.

    Raises:
        ConfigurationError: the configured KV needs a driver that is not installed, or its
            settings are unusable.
        UnavailableError: the KV cannot be reached, its table is missing, or access is refused;
            or a configured S3 endpoint is unreachable or refuses the credentials.
    """
    kv = open_kv(config)
    try:
        check_s3(config)
    except BaseException:
        kv.close()
        raise
    resolver, schemes = block_resolver(config)
    return Catalog(kv, resolver, max_tries=config.server.ref_update_tries), schemes


def block_resolver(config: LakeMirrorConfig) -> tuple[BlockResolver, tuple[str, ...]]:
    """Return the resolver of ``config``'s namespaces and the schemes it serves.

    ``local://`` namespaces live under ``blockstore.local.root`` (created if missing); ``s3://``
    ones are served when the ``s3`` extra is installed.
    """
    root = config.local_root()
    root.mkdir(parents=True, exist_ok=True)
    resolver = BlockResolver(root.resolve())
    schemes = ("local", "s3") if register_s3(resolver, config) else ("local",)
    return resolver, schemes


def sign_in_throttle(settings: SignInThrottleSettings) -> SignInThrottle | None:
    """Return the failed sign-ins' throttle ``auth.throttle`` describes (``None``: disabled)."""
    if not settings.enabled:
        return None
    rules = ThrottleRules(
        threshold=settings.threshold,
        address_threshold=settings.address_threshold,
        window=settings.window,
        max_delay=settings.max_delay,
    )
    return SignInThrottle(rules)


def build_app(
    config: LakeMirrorConfig,
    catalog: Catalog,
    schemes: tuple[str, ...],
    *,
    worker_header: bool = False,
    close_kv: bool = False,
) -> ASGIApp:
    """Return the API app serving ``catalog`` as ``config`` says, with the UI and the S3 gateway.

    The web UI (``ui.enabled``) and the gateway (``gateway.enabled``) share the API's listener:
    the gateway takes S3 requests first, then the UI its paths, and the API the rest. In front
    of all three, the process's admission (:mod:`mirror.httputil.admission`) serves
    ``server.max_concurrent_requests`` at once, queues ``server.max_queued_requests`` and
    answers the rest 503 (S3's ``SlowDown`` for the gateway's).

    Every layer's repository cleanup is registered on ``catalog``, gateway enabled or not
    (:mod:`mirror.cli.repository_cleanups`), and the app finishes, when it starts, the repository
    deletions a failure left half-done.

    Args:
        config: The process configuration.
        catalog: The versioning core (from :func:`open_catalog`).
        schemes: The namespace schemes served.
        worker_header: Name the serving process in an ``X-LakeMirror-Worker`` response header.
        close_kv: Close the catalog's KV when the app shuts down.
    """
    root = config.local_root().resolve()
    register_repository_cleanups(catalog)
    closers: list[Callable[[], object]] = []
    starters: list[Callable[[], object]] = []
    if config.actions.enabled:
        hooks = ActionsService(
            catalog,
            env_prefix=config.actions.env.prefix,
            post_workers=config.actions.post_workers,
            mirror_post_hooks=config.actions.mirror_post_hooks,
            post_lease=config.actions.post_lease_seconds,
            error_answer=answer_for,
            egress=EgressPolicy.from_settings(
                config.actions.allowed_hosts, config.actions.deny_private_networks
            ),
        )
        catalog.hooks = hooks
        # the post-events a dead process left pending run here
        starters.append(hooks.start)
        # the post-event hooks already queued record their runs before the KV closes
        closers.append(hooks.close)
    # with every cleanup registered, the deletions a failure left half-done can be finished
    starters.append(lambda: resume_deletions_in_background(catalog))
    if close_kv:
        closers.append(catalog.kv.close)
    login_tokens = LoginTokens.from_config(config)
    auth = AuthStore(catalog.kv, cipher=cipher_from_config(config))
    auth.throttle = sign_in_throttle(config.auth.throttle)
    api = create_app(
        catalog,
        auth,
        local_root=root,
        namespace_schemes=schemes,
        worker_header=worker_header,
        on_startup=starters,
        on_shutdown=closers,
        async_ops=config.server.async_ops,
        task_settings=RunnerSettings(
            ttl=config.server.task_ttl,
            heartbeat=config.server.task_heartbeat,
            shutdown_timeout=config.server.shutdown_timeout,
        ),
        gc_settings=config.gc,
        login_tokens=login_tokens,
        logout_redirect_url=config.auth.logout_redirect_url,
        fast_reads=fast_reads(),
        max_json_body=config.server.max_json_body,
    )
    api.state.link_signer = LinkSigner.from_material(link_key_material(config))
    api.state.audit = AuditTrail.from_settings(catalog.kv, config.audit)
    front: ASGIApp = api
    if config.ui.enabled:
        csrf = CsrfTokens.from_login_tokens(login_tokens)
        ui = create_ui_app(api, csrf, api.state.metrics, replicant_url=config.ui.replicant_url)
        front = with_ui(api, ui)
    refuse: Refusal = overloaded_json
    if config.gateway.enabled:
        state = GatewayState(catalog, api.state.api.auth, config.gateway, login_tokens)
        dispatch = with_gateway(front, state, api.state.metrics)
        front, refuse = dispatch, dispatch.refusal
    # outermost, so that a page of the UI takes one turn, whatever API calls it makes in process
    return AdmissionMiddleware(
        front,
        Admission(AdmissionLimits.from_settings(config.server)),
        api.state.metrics.overload,
        refuse=refuse,
    )


def worker_app() -> ASGIApp:
    """Build one worker's app from the configuration its parent handed over (uvicorn factory).

    The worker opens its own KV and object-store clients, and closes them when it stops. A
    start-up failure prints one line and exits with uvicorn's start-up failure code, which stops
    the parent instead of restarting the worker forever.
    """
    config = worker_config()
    configure_logging(config.logging.format, config.logging.level)
    try:
        catalog, schemes = open_catalog(config)
    except (ConfigurationError, UnavailableError) as exc:
        print(f"lakemirror server: worker {os.getpid()}: {exc}", file=sys.stderr, flush=True)
        sys.exit(STARTUP_FAILURE)
    get_logger("mirror.server").info("worker started", pid=os.getpid())
    return build_app(config, catalog, schemes, worker_header=True, close_kv=True)


def _fail(exc: Exception) -> int:
    print(f"lakemirror server: {exc}", file=sys.stderr, flush=True)
    return 2 if isinstance(exc, ConfigurationError) else 1


def run_server(config: LakeMirrorConfig, *, out: TextIO, wait_for_setup: bool = False) -> int:
    """Serve the API as ``config`` says until SIGTERM or SIGINT; return the exit code.

    Log lines go to standard error (JSON or console, per ``config.logging``); the first start's
    generated credentials and the listening address are printed to ``out``. A start-up failure
    (configuration, missing table, unreachable store) prints one line to standard error. The
    administrator is bootstrapped once, here, before any worker starts (``server.workers``).
    SIGTERM stops gracefully (see :mod:`mirror.cli.serving`) and exits with 0.
    """
    configure_logging(config.logging.format, config.logging.level)
    log = get_logger("mirror.server")
    try:
        catalog, schemes = open_catalog(config)
    except (ConfigurationError, UnavailableError) as exc:
        return _fail(exc)
    root = config.local_root().resolve()
    host, port, workers = config.server.host, config.server.port, config.server.workers
    kv_open = True
    try:
        try:
            auth = AuthStore(catalog.kv, cipher=cipher_from_config(config))
            bootstrap_auth(auth, config.auth, out, wait_for_setup=wait_for_setup)
        except (ConfigurationError, UnavailableError) as exc:
            return _fail(exc)
        processes = f" ({workers} workers)" if workers > 1 else ""
        print(f"serving {root} on http://{host}:{port}/api/v1{processes}", file=out, flush=True)
        log.info(
            "starting",
            host=host,
            port=port,
            kv=config.kv.type,
            local_root=str(root),
            workers=workers,
        )
        if workers > 1:
            # each worker opens its own KV; the parent's is not needed while they serve
            catalog.kv.close()
            kv_open = False
            started = serve_workers(config, workers=workers, app_factory=worker_app)
        else:
            started = serve(
                build_app(config, catalog, schemes),
                host=host,
                port=port,
                log_level=config.logging.level,
                shutdown_timeout=config.server.shutdown_timeout,
                limits=ConnectionLimits.from_settings(config.server),
            )
    finally:
        if kv_open:
            catalog.kv.close()
    if not started:
        print("lakemirror server: the server did not start (see the log)", file=sys.stderr)
        return 1
    log.info("stopped")
    if tasks_still_running():
        # a task given up at shutdown still runs: leave before finalization pulls its modules
        # (and the closed KV's) from under it, which can kill the process instead of exit 0
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(0)
    return 0

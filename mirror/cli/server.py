"""``lakemirror server``: the lakeFS-compatible API, configured by :mod:`mirror.config`."""

from __future__ import annotations

from typing import Any, TextIO

from pydantic import SecretStr

from mirror.api.app import create_app
from mirror.api.auth.store import AuthStore
from mirror.block.resolver import BlockResolver
from mirror.config import AuthSettings, ConfigurationError, LakeMirrorConfig
from mirror.core.catalog import Catalog
from mirror.errors import UnavailableError
from mirror.kv.protocol import KV
from mirror.kv.sqlite import SqliteKV
from mirror.logging import configure_logging, get_logger

__all__ = [
    "ADMIN_KEY_ENV",
    "ADMIN_SECRET_ENV",
    "ADMIN_USER_ENV",
    "UVICORN_OPTIONS",
    "bootstrap_auth",
    "open_catalog",
    "run_server",
]

ADMIN_KEY_ENV = "LAKEMIRROR_ADMIN_ACCESS_KEY_ID"
ADMIN_SECRET_ENV = "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY"
ADMIN_USER_ENV = "LAKEMIRROR_ADMIN_USER"

# h11 sends header names as given; lakeFS's client reads `Content-Range` of a 416
# case-sensitively, and uvicorn's httptools protocol would lowercase it
UVICORN_OPTIONS: dict[str, Any] = {"server_header": False, "http": "h11"}
"""The options ``lakemirror server`` passes to ``uvicorn.run`` (``bench.api`` reuses them)."""


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
    created = auth.setup(user)
    print(
        "Generated the administrator's credentials. They are shown only this once:\n"
        f"  access_key_id:     {created.access_key_id}\n"
        f"  secret_access_key: {created.secret_access_key}",
        file=out,
        flush=True,
    )


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _open_kv(config: LakeMirrorConfig) -> KV:
    if config.kv.type == "sqlite":
        path = config.sqlite_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteKV(path)
    try:
        from botocore.exceptions import BotoCoreError

        from mirror.kv.dynamodb import DynamoKV, DynamoSettings, create_table
    except ImportError as exc:
        raise ConfigurationError(
            f"kv.type 'dynamodb' needs the s3 extra (pip install 'lakemirror[s3]'): {exc}"
        ) from exc
    section = config.kv.dynamodb
    settings = DynamoSettings(
        table=section.table,
        partition=section.partition,
        endpoint_url=section.endpoint_url,
        region=section.region,
        access_key_id=section.access_key_id,
        secret_access_key=_secret(section.secret_access_key),
        max_attempts=section.max_attempts,
    )
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


def _register_s3(resolver: BlockResolver, config: LakeMirrorConfig) -> bool:
    try:
        from mirror.block.s3 import S3Settings, s3_store_factory
    except ImportError:
        return False
    section = config.blockstore.s3
    settings = S3Settings(
        endpoint_url=section.endpoint_url,
        region=section.region,
        access_key_id=section.access_key_id,
        secret_access_key=_secret(section.secret_access_key),
        addressing_style=section.addressing_style,
        max_attempts=section.max_attempts,
    )
    resolver.register("s3", s3_store_factory(settings))
    return True


def open_catalog(config: LakeMirrorConfig) -> tuple[Catalog, tuple[str, ...]]:
    """Return the catalog ``config`` describes, and the namespace schemes it serves.

    The KV is SQLite or DynamoDB (``kv.type``); ``local://`` namespaces live under
    ``blockstore.local.root``, and ``s3://`` ones are served when the ``s3`` extra is installed.
    A DynamoDB table is checked (or created, with ``kv.dynamodb.create_table``) before returning.

    Raises:
        ConfigurationError: the configured KV needs a driver that is not installed, or its
            settings are unusable.
        UnavailableError: the KV cannot be reached, its table is missing, or access is refused.
    """
    kv = _open_kv(config)
    root = config.local_root()
    root.mkdir(parents=True, exist_ok=True)
    resolver = BlockResolver(root.resolve())
    schemes = ("local", "s3") if _register_s3(resolver, config) else ("local",)
    return Catalog(kv, resolver), schemes


def run_server(config: LakeMirrorConfig, *, out: TextIO, wait_for_setup: bool = False) -> int:
    """Serve the API as ``config`` says until interrupted; return the exit code.

    Log lines go to standard error (JSON or console, per ``config.logging``); the first start's
    generated credentials and the listening address are printed to ``out``.
    """
    import uvicorn

    configure_logging(config.logging.format, config.logging.level)
    log = get_logger("mirror.server")
    try:
        catalog, schemes = open_catalog(config)
    except ConfigurationError as exc:
        print(f"lakemirror server: {exc}", file=out, flush=True)
        return 2
    except UnavailableError as exc:
        print(f"lakemirror server: {exc}", file=out, flush=True)
        return 1
    root = config.local_root().resolve()
    try:
        auth = AuthStore(catalog.kv)
        try:
            bootstrap_auth(auth, config.auth, out, wait_for_setup=wait_for_setup)
        except ConfigurationError as exc:
            print(f"lakemirror server: {exc}", file=out, flush=True)
            return 2
        except UnavailableError as exc:
            print(f"lakemirror server: {exc}", file=out, flush=True)
            return 1
        app = create_app(catalog, auth, local_root=root, namespace_schemes=schemes)
        host, port = config.server.host, config.server.port
        print(f"serving {root} on http://{host}:{port}/api/v1", file=out, flush=True)
        log.info("starting", host=host, port=port, kv=config.kv.type, local_root=str(root))
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=config.logging.level,
            log_config=None,
            access_log=False,
            **UVICORN_OPTIONS,
        )
    finally:
        catalog.kv.close()
    return 0

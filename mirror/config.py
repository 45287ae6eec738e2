"""The process configuration: one schema, read from a YAML file and ``LAKEMIRROR_*`` variables.

Precedence, highest first: explicit overrides (command-line flags), ``LAKEMIRROR_*`` environment
variables (nested keys joined by ``__``, e.g. ``LAKEMIRROR_KV__TYPE=dynamodb``), the legacy
``LAKEMIRROR_ADMIN_*`` variables, the YAML file (``--config`` or ``LAKEMIRROR_CONFIG``), defaults.
With no file and no variables the result is the embedded default: SQLite and ``local://``
namespaces under ``./lakemirror-data``. ``docs/configuration.md`` documents every key.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from mirror.errors import InvalidValueError
from mirror.logging import REDACTED, is_secret_key

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "LEGACY_ENV",
    "REDACTED",
    "ActionsEnvSettings",
    "ActionsSettings",
    "AuditSettings",
    "AuthSettings",
    "BlockstoreSettings",
    "ConfigurationError",
    "DynamoSettings",
    "GCSettings",
    "GatewaySettings",
    "KVSettings",
    "LakeMirrorConfig",
    "LocalBlockSettings",
    "LoggingSettings",
    "RegionSettings",
    "ReplicantSettings",
    "S3RegionSettings",
    "S3Settings",
    "ServerSettings",
    "SignInThrottleSettings",
    "SqliteSettings",
    "UISettings",
    "is_secret_key",
    "load_config",
    "redacted",
    "with_overrides",
]

CONFIG_FILE_ENV = "LAKEMIRROR_CONFIG"
ENV_PREFIX = "LAKEMIRROR_"

LEGACY_ENV: Mapping[str, tuple[str, str]] = {
    "LAKEMIRROR_ADMIN_ACCESS_KEY_ID": ("auth", "admin_access_key_id"),
    "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": ("auth", "admin_secret_access_key"),
    "LAKEMIRROR_ADMIN_USER": ("auth", "admin_user"),
}
"""Variables older releases read, and the ``(section, key)`` each one sets."""

LogLevel = Literal["critical", "error", "warning", "info", "debug"]

_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_HOST_ENTRY = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")
"""A host name of ``actions.allowed_hosts``, or ``*.`` and a domain."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSettings(_Section):
    """Where the lakeFS-compatible API listens."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    workers: int = Field(default=1, ge=1, le=64)
    """Processes serving the API on the one port (each with its own KV and store clients)."""
    shutdown_timeout: float = Field(default=25.0, ge=0, le=3600)
    """Seconds SIGTERM waits for in-flight requests before closing their connections."""
    async_ops: bool = True
    """Serve asynchronous commit and merge (``…/async``); ``/config`` advertises them."""
    task_ttl: float = Field(default=86_400.0, gt=0)
    """Seconds a finished asynchronous task's status stays readable before it is removed."""
    task_heartbeat: float = Field(default=5.0, gt=0, le=300)
    """Seconds between heartbeats of a process running tasks; 6 missed: its tasks read 408."""
    ref_update_tries: int = Field(default=10, ge=1, le=1000)
    """Attempts of a branch compare-and-swap before a request gives up with 429."""
    max_concurrent_requests: int = Field(default=32, ge=1, le=10_000)
    """Requests one worker process serves at once (health checks and ``/metrics`` aside)."""
    max_queued_requests: int = Field(default=64, ge=0, le=100_000)
    """Requests one worker process lets wait for a turn; beyond them it answers 503."""
    retry_after: int = Field(default=1, ge=1, le=3600)
    """Seconds a 503 for load tells the client to wait (``Retry-After``)."""
    max_json_body: int = Field(default=64 << 20, ge=1024)
    """Bytes of a REST request body other than an object upload; more is refused with 413."""
    header_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds a client has to send a request's line and headers (from its first byte)."""
    body_timeout: float = Field(default=60.0, gt=0, le=3600)
    """Seconds a request's handler waits for the next bytes of its body before 408."""
    keep_alive_timeout: float = Field(default=5.0, gt=0, le=3600)
    """Seconds an idle keep-alive connection stays open waiting for its next request."""


class SqliteSettings(_Section):
    """The embedded KV: one SQLite file."""

    path: Path | None = None
    """The database file; ``None``: ``<data_dir>/kv.sqlite``."""


class DynamoSettings(_Section):
    """The production KV: one DynamoDB table (AWS defaults for whatever is unset)."""

    table: str = Field(default="lakemirror", min_length=3, max_length=255)
    partition: str = Field(default="lakemirror", min_length=1)
    """The partition key value holding this deployment's keys (several may share a table)."""
    region: str | None = None
    endpoint_url: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    create_table: bool = False
    """Create the table at start-up when it is missing (otherwise a missing table is an error)."""
    max_attempts: int = Field(default=8, ge=1, le=100)


class KVSettings(_Section):
    """Which KV store keeps refs, commits and staging, and how to reach it."""

    type: Literal["sqlite", "dynamodb"] = "sqlite"
    sqlite: SqliteSettings = SqliteSettings()
    dynamodb: DynamoSettings = DynamoSettings()


class LocalBlockSettings(_Section):
    """The embedded object store: ``local://`` namespaces on disk."""

    root: Path | None = None
    """Where relative ``local://`` namespaces live; ``None``: ``<data_dir>``."""


class S3RegionSettings(_Section):
    """One region's S3 (or S3-compatible) store; unset keys fall back to the defaults."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    addressing_style: Literal["auto", "virtual", "path"] | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)


class S3Settings(_Section):
    """How ``s3://`` namespaces are reached: defaults, and overrides per region name."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    addressing_style: Literal["auto", "virtual", "path"] = "auto"
    max_attempts: int = Field(default=8, ge=1, le=100)
    regions: dict[str, S3RegionSettings] = {}

    def for_region(self, name: str | None) -> S3Settings:
        """Return the settings for region ``name``: its overrides on top of the defaults.

        A name without an entry in ``regions`` (or ``None``) gets the defaults.
        """
        entry = self.regions.get(name) if name is not None else None
        if entry is None:
            return self.model_copy(update={"regions": {}})
        return self.model_copy(update={**entry.model_dump(exclude_none=True), "regions": {}})


class BlockstoreSettings(_Section):
    """Where objects and range files are kept, per namespace scheme."""

    local: LocalBlockSettings = LocalBlockSettings()
    s3: S3Settings = S3Settings()


class RegionSettings(_Section):
    """How to reach one region's lakeFS-compatible server (for the replicant)."""

    server_url: str | None = None
    """The server's base URL, e.g. ``https://lakemirror.eu-central-1.example.com``."""
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None


class ReplicantSettings(_Section):
    """The mirroring daemon of one region: where it listens and how it works."""

    region: str = Field(default="local", min_length=1)
    """The region this replicant mirrors *into*; its server is ``regions[region]``."""
    host: str = "127.0.0.1"
    port: int = Field(default=8001, ge=1, le=65535)
    poll_interval: float = Field(default=1.0, gt=0, le=3600)
    """Seconds between looks at a source branch that showed nothing new."""
    lease_seconds: float = Field(default=15.0, gt=0, le=3600)
    """How long a replica keeps a mirror without renewing; another takes over after it."""
    concurrency: int = Field(default=32, ge=1, le=1024)
    """Object-store requests the validator keeps in flight."""
    list_threshold: int = Field(default=8, ge=1)
    """New objects under one prefix from which a LIST is used instead of one HEAD each."""
    object_cache_size: int = Field(default=1_000_000, ge=0)
    validated_heads_kept: int = Field(default=3, ge=1, le=1000)
    """Heads per branch whose ranges stay in a mirror's validated set (its newest head included)."""
    bulk_threshold: int = Field(default=0, ge=0)
    """Objects above which a mirror's first sync is validated by a Spark job; 0: never."""
    replica_id: str | None = None
    """This replica's name in leases; ``None``: host name and process ID."""
    shutdown_timeout: float = Field(default=25.0, ge=0, le=3600)
    """Seconds SIGTERM waits for requests and workers to stop before leases are released."""


class GCSettings(_Section):
    """Garbage collection: what the server tells a run, and how it prepares one."""

    grace_period: int = Field(default=86_400, ge=0)
    """Seconds an object must be old before a run may delete it (``/config/garbage-collection``)."""
    uncommitted_page_size: int = Field(default=500_000, ge=1)
    """Staged addresses one ``prepare_uncommited`` call writes at most."""


class AuditSettings(_Section):
    """The audit trail of security and operations changes (``docs/audit.md``)."""

    retention_days: float = Field(default=90.0, gt=0, le=36_500)
    """Days an audit event is kept; older ones are no longer listed, and go as new ones come."""


class SignInThrottleSettings(_Section):
    """Failed sign-ins refused for a while, per access key and client address."""

    enabled: bool = True
    threshold: int = Field(default=10, ge=1, le=100_000)
    """Failures of one access key from one client address before its attempts are refused."""
    address_threshold: int = Field(default=100, ge=1, le=1_000_000)
    """Failures from one client address, whatever the keys, before its attempts are refused."""
    window: float = Field(default=600.0, gt=0, le=86_400)
    """Seconds after a count's first failure when it starts over."""
    max_delay: float = Field(default=60.0, ge=1, le=86_400)
    """Seconds a refusal lasts at most (the first lasts 1 s, each further failure doubles it)."""


class AuthSettings(_Section):
    """The administrator whose key is installed at start-up (when both parts are set)."""

    admin_user: str = Field(default="admin", min_length=1)
    admin_access_key_id: SecretStr | None = None
    admin_secret_access_key: SecretStr | None = None
    encrypt_secret_key: SecretStr | None = None
    """Encrypts stored secret access keys (required with DynamoDB; generated under SQLite)."""
    login_duration: float = Field(default=7 * 86_400.0, gt=0)
    """Seconds a login token (``POST /auth/login``) stays valid; lakeFS's 7 days by default."""
    logout_redirect_url: str = Field(default="/auth/login", min_length=1)
    """Where ``GET /logout`` redirects the browser (307) once it expired the session cookie."""
    throttle: SignInThrottleSettings = SignInThrottleSettings()


class GatewaySettings(_Section):
    """The S3-compatible gateway served on the API's listener (``docs/s3-gateway.md``)."""

    enabled: bool = True
    """Serve S3 requests: those to a gateway host name, or carrying an AWS signature."""
    domain_names: Annotated[tuple[str, ...], NoDecode] = ("s3.local.lakefs.io",)
    """Host names of the gateway: ``<name>`` is path style, ``<bucket>.<name>`` virtual host."""
    region: str = Field(default="us-east-1", min_length=1)
    """The region GetBucketLocation and error bodies report (clients sign with any region)."""

    @field_validator("domain_names", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        # a variable holds "a,b" or a JSON list
        if isinstance(value, str) and value.lstrip().startswith("["):
            return json.loads(value)
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @field_validator("domain_names")
    @classmethod
    def _lower_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v.lower().rstrip(".") for v in value)


class UISettings(_Section):
    """The web UI served on the API's listener under ``/ui/`` (``docs/ui.md``)."""

    enabled: bool = True
    """Serve the UI (and redirect a browser's ``/`` to it); ``false``: those paths answer 404."""
    replicant_url: str = ""
    """The base URL of this region's replicant (``http://127.0.0.1:8001``); empty: no mirroring
    pages. The UI calls its configuration API as the signed-in person."""

    @field_validator("replicant_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("ui.replicant_url must be an http:// or https:// URL")
        return value


class ActionsEnvSettings(_Section):
    """Which environment variables hook properties may name as ``{{ ENV.X }}``."""

    prefix: str = "LAKEFSACTION_"
    """Only variables whose names start with it (lakeFS's ``actions.env.prefix``)."""


class ActionsSettings(_Section):
    """lakeFS actions: hooks run on repository events (``docs/actions.md``)."""

    enabled: bool = True
    """Run the actions of ``_lakefs_actions/``; ``false``: no hook ever runs."""
    env: ActionsEnvSettings = ActionsEnvSettings()
    post_workers: int = Field(default=4, ge=1, le=64)
    """Threads of a server process running post-event hooks in the background."""
    mirror_post_hooks: bool = False
    """Run post-commit hooks in a mirror's region when the replicant advances its branch."""
    post_lease_seconds: float = Field(default=30.0, gt=0, le=3600)
    """How long a process's claim on a pending post-event holds unrenewed: the events of a
    process that died run in another that long after."""
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    """Hosts webhook and airflow hooks may reach: names (``hooks.example.com``,
    ``*.example.com``), addresses or networks (``10.0.0.5``, ``10.1.0.0/16``); empty: any."""
    deny_private_networks: bool = False
    """Refuse hooks' requests to loopback, private, link-local, multicast and unspecified
    addresses (lakeFS does not: off by default); listed addresses and networks are exempt."""

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        # a variable holds "a,b" or a JSON list
        if isinstance(value, str) and value.lstrip().startswith("["):
            return json.loads(value)
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_entries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        entries = tuple(v.strip().lower().rstrip(".") for v in value)
        for entry in entries:
            try:
                ipaddress.ip_network(entry.strip("[]"), strict=False)
            except ValueError:
                if not _HOST_ENTRY.fullmatch(entry):
                    raise ValueError(
                        f"{entry!r} is not a host name, *.domain, address or network"
                    ) from None
        return entries


class LoggingSettings(_Section):
    """How log lines look and which are written.

    ``format``: ``json`` (one object a line), ``console`` (readable), or ``auto`` (console when
    standard error is a terminal, JSON otherwise).
    """

    format: Literal["auto", "json", "console"] = "auto"
    level: LogLevel = "info"

    @field_validator("format", "level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


class _LegacyEnvSource(PydanticBaseSettingsSource):
    """Read the ``LAKEMIRROR_ADMIN_*`` variables of older releases."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values: dict[str, dict[str, str]] = {}
        for name, (section, key) in LEGACY_ENV.items():
            value = os.environ.get(name, "")
            if value:
                values.setdefault(section, {})[key] = value
        return values


class LakeMirrorConfig(BaseSettings):
    """Everything a LakeMirror process is configured with."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        case_sensitive=False,
        extra="forbid",
        frozen=True,
    )

    data_dir: Path = Path("./lakemirror-data")
    server: ServerSettings = ServerSettings()
    kv: KVSettings = KVSettings()
    blockstore: BlockstoreSettings = BlockstoreSettings()
    auth: AuthSettings = AuthSettings()
    logging: LoggingSettings = LoggingSettings()
    replicant: ReplicantSettings = ReplicantSettings()
    gc: GCSettings = GCSettings()
    gateway: GatewaySettings = GatewaySettings()
    actions: ActionsSettings = ActionsSettings()
    ui: UISettings = UISettings()
    audit: AuditSettings = AuditSettings()
    regions: dict[str, RegionSettings] = {}
    """Every region mirrors come from or go to, by name."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Rank the environment above the legacy variables, and both above the file.

        The file's content comes in as the constructor's arguments (see :func:`load_config`).
        """
        return env_settings, _LegacyEnvSource(settings_cls), init_settings

    def sqlite_path(self) -> Path:
        """Return the SQLite file the KV uses (``kv.sqlite.path`` or ``<data_dir>/kv.sqlite``)."""
        return self.kv.sqlite.path or self.data_dir / "kv.sqlite"

    def local_root(self) -> Path:
        """Return where relative ``local://`` namespaces live."""
        return self.blockstore.local.root or self.data_dir

    def effective(self) -> LakeMirrorConfig:
        """Return a copy with derived defaults (SQLite path, local root) filled in."""
        kv = self.kv.model_copy(
            update={"sqlite": SqliteSettings(path=self.sqlite_path())}, deep=True
        )
        local = LocalBlockSettings(root=self.local_root())
        blockstore = self.blockstore.model_copy(update={"local": local})
        return self.model_copy(update={"kv": kv, "blockstore": blockstore})


class ConfigurationError(InvalidValueError):
    """The configuration file or variables are unreadable or invalid; the message names the key."""


def _describe(error: Mapping[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    key = ".".join(loc) or "(top level)"
    if error.get("type") == "extra_forbidden":
        return f"{key}: unknown key"
    message = str(error.get("msg", "invalid value"))
    value = error.get("input")
    if isinstance(value, str | int | float | bool) and not any(is_secret_key(p) for p in loc):
        message += f" (got {value!r})"
    return f"{key}: {message}"


def _error(exc: ValidationError, source: str, prefix: tuple[str, ...] = ()) -> ConfigurationError:
    details = "; ".join(_describe({**e, "loc": (*prefix, *e.get("loc", ()))}) for e in exc.errors())
    return ConfigurationError(f"invalid configuration ({source}): {details}")


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read configuration file {str(path)!r}: {exc.strerror}"
        ) from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise ConfigurationError(
            f"configuration file {str(path)!r}{line} is not valid YAML: "
            f"{getattr(exc, 'problem', None) or exc}"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigurationError(
            f"configuration file {str(path)!r} must hold a mapping, not {type(data).__name__}"
        )
    return data


def load_config(path: str | Path | None = None) -> LakeMirrorConfig:
    """Return the configuration from ``path`` (or ``$LAKEMIRROR_CONFIG``) and the environment.

    No file at all is fine: the defaults are the embedded setup.

    Raises:
        ConfigurationError: the file is unreadable or not YAML, or a value is invalid; the
            message is one line and names the key.
    """
    if path is None:
        path = os.environ.get(CONFIG_FILE_ENV) or None
    data = _read_file(Path(path)) if path is not None else {}
    source = f"file {str(path)!r} and {ENV_PREFIX}* variables" if path else "environment"
    try:
        return LakeMirrorConfig(**data)
    except ValidationError as exc:
        raise _error(exc, source) from None


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged[key] = _merge(current, value)
        else:
            merged[key] = value
    return merged


def with_overrides(config: LakeMirrorConfig, overrides: Mapping[str, Any]) -> LakeMirrorConfig:
    """Return ``config`` with ``overrides`` (nested like the schema; ``None`` values skipped).

    Raises:
        ConfigurationError: an override is invalid; the message names the key.
    """

    def prune(values: Mapping[str, Any]) -> dict[str, Any]:
        pruned: dict[str, Any] = {}
        for key, value in values.items():
            if isinstance(value, Mapping):
                value = prune(value)
                if not value:
                    continue
            if value is not None:
                pruned[key] = value
        return pruned

    update = prune(overrides)
    if not update:
        return config
    changes: dict[str, Any] = {}
    for key, value in update.items():
        field = LakeMirrorConfig.model_fields.get(key)
        if field is None or field.annotation is None:
            raise ConfigurationError(
                f"invalid configuration (command-line options): {key}: unknown key"
            )
        current = getattr(config, key)
        if isinstance(value, Mapping) and isinstance(current, BaseModel):
            value = _merge(current.model_dump(), value)
        try:
            changes[key] = TypeAdapter(field.annotation).validate_python(value)
        except ValidationError as exc:
            raise _error(exc, "command-line options", (key,)) from None
    return config.model_copy(update=changes)


def redacted(config: LakeMirrorConfig) -> dict[str, Any]:
    """Return the effective configuration as plain data, every secret replaced by ``REDACTED``."""

    def scrub(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: scrub(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [scrub(v, key) for v in value]
        if value is not None and is_secret_key(key):
            return REDACTED
        return value

    data: dict[str, Any] = config.effective().model_dump(mode="json")
    scrubbed: dict[str, Any] = scrub(data)
    return scrubbed

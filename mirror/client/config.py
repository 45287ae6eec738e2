"""Client configuration read like lakectl's: ``~/.lakectl.yaml`` and ``LAKECTL_*`` variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from mirror.client.errors import UsageError
from mirror.client.session import load_token, token_path

__all__ = [
    "CONFIG_FILE_ENV",
    "DEFAULT_ENDPOINT",
    "ENDPOINT_ENV",
    "KEY_ENV",
    "SECRET_ENV",
    "ClientConfig",
    "api_base_url",
    "load_config",
]

CONFIG_FILE_ENV = "LAKECTL_CONFIG_FILE"
ENDPOINT_ENV = "LAKECTL_SERVER_ENDPOINT_URL"
KEY_ENV = "LAKECTL_CREDENTIALS_ACCESS_KEY_ID"
# a variable's name
SECRET_ENV = "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"  # nosec B105
DEFAULT_ENDPOINT = "http://127.0.0.1:8000"
_API_PATH = "/api/v1"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Where the server is and the access key to sign requests with.

    Attributes:
        endpoint_url: The API's base URL, ending in ``/api/v1``.
        access_key_id: The access key ID (``""`` when none is configured).
        secret_access_key: The secret; kept out of ``repr``.
        source: The configuration file that was read, if any.
        token: A login token for this endpoint (``lakemirror login``); it signs requests
            instead of the access key while valid. Kept out of ``repr``.
    """

    endpoint_url: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    source: Path | None = None
    token: str = field(default="", repr=False)


def api_base_url(endpoint: str) -> str:
    """Return ``endpoint`` with a scheme and ending in ``/api/v1``, as lakectl reads it.

    Raises:
        UsageError: the endpoint is not an http(s) URL with a host.
    """
    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"invalid server endpoint URL {_without_userinfo(endpoint)!r}")
    path = parts.path.rstrip("/")
    if not path.endswith(_API_PATH):
        path += _API_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _without_userinfo(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    host, slash, tail = rest.partition("/")
    return scheme + sep + host.rpartition("@")[2] + slash + tail


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read configuration file {str(path)!r}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # the parser's own message quotes the offending line, which may hold the secret
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"configuration file {str(path)!r} is not valid YAML{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"configuration file {str(path)!r} must hold a YAML mapping")
    return data


def _lookup(data: Mapping[str, Any], dotted: str) -> str:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return ""
        node = node.get(part)
    if node is None:
        return ""
    if isinstance(node, (Mapping, list)):
        raise UsageError(f"configuration key {dotted!r} must be a string")
    return str(node)


def load_config(
    path: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
) -> ClientConfig:
    """Read the configuration: the file, then the ``LAKECTL_*`` variables over it.

    The file is ``path`` when given, else the one named by ``LAKECTL_CONFIG_FILE``, else
    ``~/.lakectl.yaml`` if it exists. Keys: ``server.endpoint_url``,
    ``credentials.access_key_id``, ``credentials.secret_access_key``. The endpoint defaults to
    ``http://127.0.0.1:8000`` and gets ``/api/v1`` appended when it lacks it.

    Raises:
        UsageError: a named file is missing or unreadable, is not YAML, or a key has the wrong
            shape; the endpoint is invalid.
    """
    env = os.environ if environ is None else environ
    named = path or env.get(CONFIG_FILE_ENV) or None
    source: Path | None
    if named is not None:
        source = Path(named).expanduser()
        if not source.is_file():
            raise UsageError(f"configuration file {named!r} does not exist")
    else:
        default = (home if home is not None else Path.home()) / ".lakectl.yaml"
        source = default if default.is_file() else None
    data = _read_file(source) if source is not None else {}
    endpoint = env.get(ENDPOINT_ENV) or _lookup(data, "server.endpoint_url") or DEFAULT_ENDPOINT
    key_id = env.get(KEY_ENV) or _lookup(data, "credentials.access_key_id")
    secret = env.get(SECRET_ENV) or _lookup(data, "credentials.secret_access_key")
    url = api_base_url(endpoint)
    token = load_token(token_path(env, home), url)
    return ClientConfig(url, key_id, secret, source, token)

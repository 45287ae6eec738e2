"""Calling a hook: lakeFS's webhook and airflow hooks over HTTP, and their output log.

A webhook POSTs the event's JSON payload to its ``url`` with its query parameters and headers;
any 2xx succeeds (pkg/actions/webhook.go). An airflow hook triggers a DAG run:
``POST {url}/api/v1/dags/{dag_id}/dagRuns`` with basic auth and the payload under
``conf.lakeFS_event``; only 200 succeeds (pkg/actions/airflow.go). Values written
``{{ ENV.NAME }}`` take the environment variable ``NAME`` (only names with the configured prefix),
and are masked in the output log.

A request to a host that ``actions.allowed_hosts`` or ``actions.deny_private_networks`` refuses
(:mod:`mirror.actions.egress`, enforced by the client the service sends with) fails the hook
with the host, the address and the rule in its error and its log.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from mirror.actions.egress import EgressRefusedError
from mirror.actions.model import ActionHook

__all__ = [
    "DEFAULT_TIMEOUT",
    "HookConfigError",
    "HookOutcome",
    "Secrets",
    "call_hook",
    "parse_duration",
]

DEFAULT_TIMEOUT = 60.0
"""A hook's timeout when its ``timeout`` property is absent (lakeFS: 1 minute)."""

_ENV = re.compile(r"\{\{\s*ENV\.(\w+)\s*\}\}")
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_MASK = "******"


class HookConfigError(ValueError):
    """A hook's properties are unusable (a bad duration, an unknown environment variable)."""


@dataclass(frozen=True)
class HookOutcome:
    """What calling a hook gave.

    Attributes:
        error: ``""`` on success, else lakeFS's text (``action failed: ...``).
        log: The output log (request and response, secrets masked).
    """

    error: str
    log: str


def parse_duration(text: str) -> float:
    """Return the seconds of a Go duration (``1m30s``, ``500ms``, ``2h``).

    Raises:
        HookConfigError: ``text`` is not a Go duration.
    """
    value = text.strip()
    if value in ("0", ""):
        return 0.0
    pos, total = 0, 0.0
    while pos < len(value):
        m = _DURATION.match(value, pos)
        if m is None:
            raise HookConfigError(f"time: invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


class Secrets:
    """Substitutes ``{{ ENV.X }}`` and remembers the values to mask (webhook and lua hooks).

    Args:
        prefix: Only environment variables with this prefix may be used.
        environ: The environment.
    """

    def __init__(self, prefix: str, environ: Mapping[str, str]) -> None:
        self.prefix = prefix
        self.environ = environ
        self.values: set[str] = set()

    def expand(self, text: str) -> str:
        """Return ``text`` with ``{{ ENV.X }}`` substituted.

        Raises:
            HookConfigError: a variable lacks the prefix or is not set.
        """

        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if not name.startswith(self.prefix):
                raise HookConfigError(
                    f"environment variable {name!r} is not allowed (prefix {self.prefix!r})"
                )
            if name not in self.environ:
                raise HookConfigError(f"environment variable {name!r} not found")
            value = self.environ[name]
            if value:
                self.values.add(value)
            return value

        return _ENV.sub(one, text)

    def mask(self, text: str) -> str:
        """Return ``text`` with every substituted value replaced by ``******``."""
        for value in sorted(self.values, key=len, reverse=True):
            text = text.replace(value, _MASK)
        return text


def _json_value(value: object) -> str:
    """Return a YAML value JSON lacks as text, as lakeFS reads it (a timestamp as written).

    Raises:
        TypeError: no text stands for the value.
    """
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, bytes):  # !!binary
        return value.decode("utf-8", "replace")
    raise TypeError(f"{type(value).__name__} is not JSON")


def _query(raw: object) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise HookConfigError("'query_params' must be a mapping")
    out: list[tuple[str, str]] = []
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        out.extend((str(key), str(v)) for v in values)
    return out


def call_hook(
    hook: ActionHook,
    payload: Mapping[str, Any],
    *,
    env_prefix: str,
    environ: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
) -> HookOutcome:
    """Call ``hook`` with the event ``payload``; never raises.

    Args:
        hook: A webhook or airflow hook.
        payload: lakeFS's event JSON (see :func:`mirror.actions.service.event_payload`).
        env_prefix: Only environment variables starting with it may be substituted.
        environ: The environment (the process's by default).
        client: The HTTP client to send with (shared, it keeps connections); a new one if
            ``None``.
    """
    secrets = Secrets(env_prefix, os.environ if environ is None else environ)
    lines: list[str] = []
    try:
        props = hook.properties
        timeout = parse_duration(str(props.get("timeout") or "")) or DEFAULT_TIMEOUT
        if hook.type == "airflow":
            url = secrets.expand(str(props["url"])).rstrip("/")
            url = f"{url}/api/v1/dags/{secrets.expand(str(props['dag_id']))}/dagRuns"
            raw_conf = props.get("dag_conf") or {}
            if not isinstance(raw_conf, dict):
                raise HookConfigError("'dag_conf' must be a mapping")
            conf = {**raw_conf, "lakeFS_event": payload}
            try:
                body = json.dumps({"conf": conf}, default=_json_value, allow_nan=False).encode()
            except (TypeError, ValueError) as exc:
                raise HookConfigError(f"'dag_conf' cannot be sent as JSON: {exc}") from None
            auth = (secrets.expand(str(props["username"])), secrets.expand(str(props["password"])))
            headers = {"Content-Type": "application/json"}
            params: list[tuple[str, str]] = []
        else:
            url = secrets.expand(str(props["url"]))
            body = json.dumps(payload).encode()
            raw_headers = props.get("headers") or {}
            if not isinstance(raw_headers, dict):
                raise HookConfigError("'headers' must be a mapping")
            headers = {str(k): secrets.expand(str(v)) for k, v in raw_headers.items()}
            headers["Content-Type"] = "application/json"
            params = [(k, secrets.expand(v)) for k, v in _query(props.get("query_params"))]
            auth = None
    except HookConfigError as exc:
        return HookOutcome(f"action failed: {exc}", f"Configuration error: {exc}\n")
    sender = client if client is not None else httpx.Client(follow_redirects=False)
    try:
        error = _send(sender, hook.type, url, params, headers, body, auth, timeout, lines)
    finally:
        if client is None:
            sender.close()
    return HookOutcome(secrets.mask(error), secrets.mask("\n".join(lines) + "\n"))


def _send(
    client: httpx.Client,
    kind: str,
    url: str,
    params: list[tuple[str, str]],
    headers: dict[str, str],
    body: bytes,
    auth: tuple[str, str] | None,
    timeout: float,
    lines: list[str],
) -> str:
    """POST the hook's request, log it and the answer in ``lines``; return the error or ``""``."""
    lines.append("Request:")
    try:
        # header values as UTF-8 bytes, as Go sends them (httpx would encode them as ASCII)
        wire_headers = [
            (k.encode(), v.encode("utf-8", "surrogateescape")) for k, v in headers.items()
        ]
        request = client.build_request(
            "POST", url, params=tuple(params), headers=wire_headers, content=body, timeout=timeout
        )
    except httpx.InvalidURL as exc:
        lines.append(f"Error: invalid url: {exc}")
        return f"action failed: invalid url: {exc}"
    lines.append(f"POST {request.url}")
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    lines.extend(["", body.decode(), ""])
    try:
        response = client.send(request, auth=auth, follow_redirects=False)
    except httpx.TimeoutException:
        error = (
            f'action failed: Post "{url}": context deadline exceeded '
            "(Client.Timeout exceeded while awaiting headers)"
        )
        lines.append(f"Error: {error}")
        return error
    except httpx.HTTPError as exc:
        error = f'action failed: Post "{url}": {exc}'
        lines.append(f"Error: {error}")
        return error
    except EgressRefusedError as exc:
        error = f'action failed: Post "{url}": {exc}'
        lines.append(f"Error: {error}")
        return error
    lines.append("Response:")
    lines.append(f"{response.status_code} {response.reason_phrase}")
    lines.extend(f"{k}: {v}" for k, v in response.headers.items())
    lines.extend(["", response.text])
    good = response.status_code == 200 if kind == "airflow" else response.is_success
    if good:
        return ""
    what = "webhook" if kind == "webhook" else "airflow"
    return f"action failed: {what} request failed (status code: {response.status_code})"

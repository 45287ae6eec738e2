"""Structured logging: JSON lines in production, readable lines locally, never a secret.

:func:`configure_logging` sets up structlog and routes the standard library's records
(uvicorn's, ``mirror.api``'s) through the same processors, so every line has one shape. Values
under keys named like secret, password, authorization or token are masked in every event. The
HTTP front doors' access lines are :mod:`mirror.httputil.request_log`'s.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, TextIO

import structlog

__all__ = [
    "REDACTED",
    "configure_logging",
    "get_logger",
    "is_secret_key",
    "redact_secrets",
    "renders_json",
]

REDACTED = "**********"
"""What a secret's value is replaced with, in log events and in ``lakemirror config show``."""

_SECRET_KEY = re.compile(r"secret|password|passwd|authorization|token|credential", re.IGNORECASE)


def is_secret_key(name: str) -> bool:
    """Return whether a key named ``name`` holds a secret (and must never be shown or logged)."""
    return _SECRET_KEY.search(name) is not None


def _scrub(value: Any, key: str) -> Any:
    if value is not None and is_secret_key(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: _scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, key) for v in value]
    return value


def redact_secrets(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Mask the value of every key named like secret/password/authorization/token, at any depth.

    A structlog processor.
    """
    for key, value in event_dict.items():
        event_dict[key] = _scrub(value, key)
    return event_dict


def renders_json(fmt: Literal["auto", "json", "console"], stream: TextIO | None = None) -> bool:
    """Return whether format ``fmt`` writes JSON: ``auto`` does unless ``stream`` is a terminal."""
    if fmt == "auto":
        target = stream if stream is not None else sys.stderr
        isatty = getattr(target, "isatty", None)
        return not (callable(isatty) and isatty())
    return fmt == "json"


def configure_logging(
    fmt: Literal["auto", "json", "console"] = "auto",
    level: str = "info",
    *,
    stream: TextIO | None = None,
) -> None:
    """Send structlog's and the standard library's log records to ``stream`` (standard error).

    Args:
        fmt: ``json`` (one object a line), ``console`` (readable), or ``auto`` (console on a
            terminal, JSON otherwise).
        level: The lowest level written (``debug`` … ``critical``).
        stream: Where lines go; standard error when ``None``.
    """
    target = stream if stream is not None else sys.stderr
    as_json = renders_json(fmt, target)
    numeric = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    renderer: Any
    if as_json:
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        # plain tracebacks: a rich traceback would print local variables, secrets included
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # uvicorn's own access line carries the query string; ours replaces it
    logging.getLogger("uvicorn.access").handlers.clear()
    logging.getLogger("uvicorn.access").propagate = False


def get_logger(name: str) -> Any:
    """Return a structlog logger named ``name``."""
    return structlog.get_logger(name)

"""The login token the client commands sign in with, kept by ``lakemirror login``.

The file (``~/.lakemirror/token.json``, or ``$LAKEMIRROR_TOKEN_FILE``) is written with mode
0600 and holds ``{"endpoint_url", "token", "token_expiration"}``. A token is only used for the
endpoint it was issued by, and only until shortly before it expires; then the configured access
key signs requests again. ``lakemirror logout`` removes the file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "EXPIRY_MARGIN",
    "TOKEN_FILE_ENV",
    "forget_token",
    "load_token",
    "save_token",
    "token_path",
]

# a variable's name, not a secret
TOKEN_FILE_ENV = "LAKEMIRROR_TOKEN_FILE"  # nosec B105
EXPIRY_MARGIN = 30.0
"""Seconds before its expiry a token stops being used (a request must not expire in flight)."""


def token_path(environ: Mapping[str, str], home: Path | None = None) -> Path:
    """Return where the login token is kept."""
    named = environ.get(TOKEN_FILE_ENV)
    if named:
        return Path(named).expanduser()
    return (home if home is not None else Path.home()) / ".lakemirror" / "token.json"


def save_token(path: Path, endpoint_url: str, token: str, expiration: int) -> None:
    """Write the token for ``endpoint_url`` to ``path`` (mode 0600, replacing any other)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    record = {"endpoint_url": endpoint_url, "token": token, "token_expiration": expiration}
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(record, out)
    os.replace(temporary, path)


def load_token(path: Path, endpoint_url: str, now: float | None = None) -> str:
    """Return the kept token for ``endpoint_url`` if it is still valid, else ``""``.

    An unreadable or foreign file is ignored: the access key then signs requests.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(record, dict) or record.get("endpoint_url") != endpoint_url:
        return ""
    token = record.get("token")
    expiration = record.get("token_expiration")
    if not isinstance(token, str) or not isinstance(expiration, int | float):
        return ""
    if (time.time() if now is None else now) >= expiration - EXPIRY_MARGIN:
        return ""
    return token


def forget_token(path: Path) -> bool:
    """Remove the kept token; return whether there was one."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True

"""``lakemirror login`` and ``lakemirror logout``: a login token for the client commands.

``login`` trades the configured access key for a token (``POST /auth/login``) and keeps it in
the token file (:mod:`mirror.client.session`, mode 0600) for the configured endpoint: the other
client commands then sign in with it until it expires. ``--print`` prints the token instead of
keeping it. The expiry is printed, never the secret; the token only with ``--print``.
``logout`` removes the kept token.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from datetime import UTC, datetime

from mirror.cli.context import Context
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig
from mirror.client.errors import UsageError
from mirror.client.session import forget_token, save_token, token_path

__all__ = ["register"]


def _subject(token: str) -> str:
    """Return the user a token names (read for display; the server verifies it)."""
    try:
        body = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else ""


def _login(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    if not (config.access_key_id and config.secret_access_key):
        raise UsageError(
            "no credentials to log in with: set credentials.access_key_id and "
            "credentials.secret_access_key in the configuration file, or "
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID and LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"
        )
    # signs in with the access key alone, whatever token is kept already
    keys = ClientConfig(config.endpoint_url, config.access_key_id, config.secret_access_key)
    with LakeFSClient(keys) as client:
        answer = client.request(
            "POST",
            "/auth/login",
            json={
                "access_key_id": config.access_key_id,
                "secret_access_key": config.secret_access_key,
            },
        ).json()
    token: str = answer["token"]
    expiration = int(answer["token_expiration"])
    expires = datetime.fromtimestamp(expiration, tz=UTC).isoformat(timespec="seconds")
    user = _subject(token)
    path = token_path(ctx.environ)
    if not args.print:
        save_token(path, config.endpoint_url, token, expiration)
    if ctx.output.json:
        record: dict[str, object] = {"user": user, "token_expiration": expiration}
        if args.print:
            record["token"] = token
        else:
            record["token_file"] = str(path)
        ctx.output.data(record)
    elif args.print:
        ctx.output.line(token)
        ctx.stderr.write(f"logged in as {user}; the token expires at {expires}\n")
    else:
        ctx.output.line(f"logged in as {user}; the token expires at {expires}")
        ctx.output.line(f"token kept in {path} for {config.endpoint_url}")
    return 0


def _logout(args: argparse.Namespace, ctx: Context) -> int:
    path = token_path(ctx.environ)
    removed = forget_token(path)
    if ctx.output.json:
        ctx.output.data({"removed": removed, "token_file": str(path)})
    elif removed:
        ctx.output.line(f"logged out: removed {path}")
    else:
        ctx.output.line("not logged in")
    return 0


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``login`` and ``logout``."""
    p = sub.add_parser(
        "login",
        parents=[common],
        help="get a login token with the configured access key; later commands use it",
    )
    p.add_argument(
        "--print",
        action="store_true",
        help="print the token (to use elsewhere) instead of keeping it in the token file",
    )
    p.set_defaults(run=_login)
    p = sub.add_parser("logout", parents=[common], help="remove the kept login token")
    p.set_defaults(run=_logout)

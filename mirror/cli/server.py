"""``lakemirror server``: the lakeFS-compatible API on the embedded default, under uvicorn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from mirror.api.app import create_app
from mirror.api.auth.store import AuthStore
from mirror.core.embedded import open_embedded

__all__ = ["ADMIN_KEY_ENV", "ADMIN_SECRET_ENV", "ADMIN_USER_ENV", "bootstrap_auth", "run_server"]

ADMIN_KEY_ENV = "LAKEMIRROR_ADMIN_ACCESS_KEY_ID"
ADMIN_SECRET_ENV = "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY"
ADMIN_USER_ENV = "LAKEMIRROR_ADMIN_USER"
_DEFAULT_ADMIN = "admin"


def bootstrap_auth(
    auth: AuthStore, environ: dict[str, str], out: TextIO, *, wait_for_setup: bool = False
) -> None:
    """Make sure an administrator can sign in.

    With both ``LAKEMIRROR_ADMIN_ACCESS_KEY_ID`` and ``LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY`` set,
    that key signs in as the administrator (``LAKEMIRROR_ADMIN_USER``, default ``admin``).
    Otherwise, on the first start only, generate a key and print it once, unless
    ``wait_for_setup`` leaves that to ``POST /api/v1/setup_lakefs``.

    Raises:
        ValueError: only one of the two variables is set.
    """
    auth.ensure_builtins()
    key_id = environ.get(ADMIN_KEY_ENV, "")
    secret = environ.get(ADMIN_SECRET_ENV, "")
    user = environ.get(ADMIN_USER_ENV, "") or _DEFAULT_ADMIN
    if key_id or secret:
        if not (key_id and secret):
            raise ValueError(f"set both {ADMIN_KEY_ENV} and {ADMIN_SECRET_ENV}, or neither")
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


def run_server(
    host: str,
    port: int,
    data_dir: str | Path,
    *,
    out: TextIO,
    wait_for_setup: bool = False,
    log_level: str = "info",
) -> int:
    """Serve the API on ``host:port`` with data under ``data_dir`` until interrupted."""
    import uvicorn

    root = Path(data_dir).resolve()
    catalog = open_embedded(root)
    try:
        auth = AuthStore(catalog.kv)
        try:
            bootstrap_auth(auth, dict(os.environ), out, wait_for_setup=wait_for_setup)
        except ValueError as exc:
            print(f"lakemirror server: {exc}", file=out, flush=True)
            return 2
        app = create_app(catalog, auth, local_root=root)
        print(f"serving {root} on http://{host}:{port}/api/v1", file=out, flush=True)
        # h11 sends header names as given; lakeFS's client reads `Content-Range` of a 416
        # case-sensitively, and uvicorn's httptools protocol would lowercase it
        uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False, http="h11")
    finally:
        catalog.kv.close()
    return 0

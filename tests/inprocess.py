"""A region's lakeFS-compatible API app in this process, with an administrator and a replicator,
reached through httpx's ASGI transport (for replicant tests that need no processes)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from mirror.api.app import create_app
from mirror.auth.store import AuthStore
from mirror.block import BlockResolver
from mirror.cli.repository_cleanups import register_repository_cleanups
from mirror.core.catalog import Catalog
from mirror.kv import MemoryKV
from mirror.replicant.client import LakeFSClient

ADMIN = ("AKIAADMIN00000000001", "admin-secret")
REPLICATOR = ("AKIAREPLICATOR000001", "replicator-secret")


def region_app(resolver: BlockResolver, **options: Any) -> tuple[Catalog, FastAPI]:
    """Return a catalog on a fresh in-memory KV and its API app (``options``: create_app's).

    The catalog removes every record of a deleted repository, as a server's does. The app knows
    an administrator (key :data:`ADMIN`) and a user holding the built-in ``Replicator`` policy
    (key :data:`REPLICATOR`).
    """
    kv = MemoryKV()
    catalog = Catalog(kv, resolver)
    register_repository_cleanups(catalog)
    auth = AuthStore(kv)
    auth.bootstrap_admin("admin", *ADMIN)
    auth.create_user("replicator")
    auth.attach_user_policy("replicator", "Replicator")
    auth.create_credentials("replicator", *REPLICATOR)
    return catalog, create_app(catalog, auth, **options)


def app_client(app: FastAPI, name: str, key: tuple[str, str]) -> LakeFSClient:
    """Return a replicant client of ``app``, signed in with ``key``."""
    return LakeFSClient(f"http://{name}", *key, transport=httpx.ASGITransport(app=app))

"""Ready-made catalogs: the embedded default on local disk, and an in-memory one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mirror.block.resolver import BlockResolver
from mirror.core.catalog import Catalog
from mirror.kv.memory import MemoryKV
from mirror.kv.sqlite import SqliteKV

__all__ = ["open_embedded", "open_memory"]


def open_embedded(data_dir: str | Path, **options: Any) -> Catalog:
    """Return a catalog keeping refs in ``<data_dir>/kv.sqlite`` and objects under ``<data_dir>``.

    Namespaces ``local://<name>`` then live in ``<data_dir>/<name>``.
    """
    root = Path(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    return Catalog(SqliteKV(root / "kv.sqlite"), BlockResolver(root), **options)


def open_memory(**options: Any) -> Catalog:
    """Return a catalog entirely in memory (``mem://`` namespaces), for tests and experiments."""
    return Catalog(MemoryKV(), BlockResolver(), **options)

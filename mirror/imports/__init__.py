"""Imports run in the background: their status records in the KV and the runs that write them."""

from __future__ import annotations

from mirror.imports.manager import ImportManager
from mirror.imports.records import ImportNotFoundError, ImportRecord, ImportRecords

__all__ = ["ImportManager", "ImportNotFoundError", "ImportRecord", "ImportRecords"]

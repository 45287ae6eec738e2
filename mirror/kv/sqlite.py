"""The embedded KV driver: one SQLite table, safe across threads and processes."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError, KVUnavailableError

__all__ = ["SqliteKV"]

_PAGE = 500

# a page of a scan: from the cursor (">=" at first, ">" after a page), below the prefix's end
_SCANS = {
    (">=", False): "SELECT key, value FROM kv WHERE key >= ? ORDER BY key LIMIT ?",
    (">", False): "SELECT key, value FROM kv WHERE key > ? ORDER BY key LIMIT ?",
    (">=", True): "SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
    (">", True): "SELECT key, value FROM kv WHERE key > ? AND key < ? ORDER BY key LIMIT ?",
}
_SCHEMA = "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"


def _prefix_end(prefix: bytes) -> bytes | None:
    """Return the smallest key greater than every key starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class SqliteKV:
    """:class:`~mirror.kv.protocol.KV` over a SQLite file in WAL mode.

    Each thread gets its own connection; conditional writes run inside ``BEGIN IMMEDIATE``
    so they are atomic against other threads and other processes sharing the file.

    Attributes:
        local_reads: A read is answered in-process in microseconds and, in WAL mode, never
            waits for a writer: callers on an event loop may read inline rather than hand the
            read to a worker thread.
    """

    local_reads: Final = True

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._conn().execute(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            # each thread uses only its own connection, but close() runs in whichever thread
            # calls it and must be able to close them all
            conn = sqlite3.connect(
                self._path, isolation_level=None, timeout=30.0, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _run(self, sql: str, args: tuple[object, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._conn().execute(sql, args)
        except sqlite3.OperationalError as exc:
            raise KVUnavailableError(f"sqlite {self._path}: {exc}") from exc

    def get(self, key: bytes) -> bytes:
        """Return the value of ``key`` or raise :class:`KeyNotFoundError`."""
        row = self._run("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyNotFoundError(key)
        return bytes(row[0])

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``."""
        self._run("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store every pair in one transaction."""
        self._many("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", items)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Remove every key of ``keys`` that is present, in one transaction."""
        self._many("DELETE FROM kv WHERE key = ?", ((key,) for key in keys))

    def _many(self, sql: str, rows: Iterable[tuple[bytes, ...]]) -> None:
        """Run ``sql`` once per row in one transaction (one commit instead of one a row)."""
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            raise KVUnavailableError(f"sqlite {self._path}: {exc}") from exc

    def _conditional(self, key: bytes, expected: bytes | None, value: bytes | None) -> None:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise KVUnavailableError(f"sqlite {self._path}: {exc}") from exc
        try:
            row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
            found = None if row is None else bytes(row[0])
            if found != expected:
                raise KVPreconditionFailedError(key, expected, found)
            if value is None:
                conn.execute("DELETE FROM kv WHERE key = ?", (key,))
            else:
                conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        """Store ``value`` if the current value equals ``expected`` (``None``: absent)."""
        self._conditional(key, expected, value)

    def delete(self, key: bytes) -> None:
        """Remove ``key`` if present."""
        self._run("DELETE FROM kv WHERE key = ?", (key,))

    def delete_if(self, key: bytes, expected: bytes) -> None:
        """Remove ``key`` if it holds ``expected``."""
        self._conditional(key, expected, None)

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yield pairs under ``prefix`` from ``start`` on, a page at a time."""
        end = _prefix_end(prefix)
        cursor, op = max(prefix, start), ">="
        while True:
            query = _SCANS[op, end is not None]
            params = (cursor, _PAGE) if end is None else (cursor, end, _PAGE)
            rows = self._run(query, params).fetchall()
            for k, v in rows:
                yield bytes(k), bytes(v)
            if len(rows) < _PAGE:
                return
            cursor, op = bytes(rows[-1][0]), ">"

    def close(self) -> None:
        """Close every connection opened by this store."""
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

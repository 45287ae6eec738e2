"""The checksums S3 accepts in ``x-amz-checksum-*`` headers and trailers.

CRC32 and the SHA digests come from the standard library; CRC32C and CRC64/NVME, which it lacks,
are table-driven here (correct, but slow on large bodies: clients default to CRC32).
"""

from __future__ import annotations

import base64
import hashlib
import zlib
from typing import Protocol

__all__ = ["ALGORITHMS", "Checksum", "encoded", "new_checksum"]


class Checksum(Protocol):
    """A running checksum."""

    def update(self, data: bytes) -> None:
        """Add ``data``."""
        ...

    def digest(self) -> bytes:
        """Return the checksum of everything added, big-endian."""
        ...


def _reflected_table(poly: int) -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC32C_TABLE = _reflected_table(0x82F63B78)
_CRC64NVME_TABLE = _reflected_table(0x9A6C9329AC4BC9B5)


class _TableCRC:
    def __init__(self, table: tuple[int, ...], width: int) -> None:
        self._table = table
        self._mask = (1 << width) - 1
        self._width = width
        self._crc = self._mask

    def update(self, data: bytes) -> None:
        crc, table = self._crc, self._table
        for byte in data:
            crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        self._crc = crc

    def digest(self) -> bytes:
        return (self._crc ^ self._mask).to_bytes(self._width // 8, "big")


class _CRC32:
    def __init__(self) -> None:
        self._crc = 0

    def update(self, data: bytes) -> None:
        self._crc = zlib.crc32(data, self._crc)

    def digest(self) -> bytes:
        return self._crc.to_bytes(4, "big")


class _Hash:
    def __init__(self, name: str) -> None:
        self._hash = hashlib.new(name)

    def update(self, data: bytes) -> None:
        self._hash.update(data)

    def digest(self) -> bytes:
        return self._hash.digest()


ALGORITHMS = ("crc32", "crc32c", "crc64nvme", "sha1", "sha256")
"""The algorithm names of ``x-amz-checksum-<name>``."""


def new_checksum(algorithm: str) -> Checksum:
    """Return a running checksum of ``algorithm`` (one of :data:`ALGORITHMS`).

    Raises:
        ValueError: an unknown algorithm.
    """
    if algorithm == "crc32":
        return _CRC32()
    if algorithm == "crc32c":
        return _TableCRC(_CRC32C_TABLE, 32)
    if algorithm == "crc64nvme":
        return _TableCRC(_CRC64NVME_TABLE, 64)
    if algorithm in ("sha1", "sha256"):
        return _Hash(algorithm)
    raise ValueError(f"unknown checksum algorithm {algorithm!r}")


def encoded(checksum: Checksum) -> str:
    """Return the checksum in base64, as S3 headers carry it."""
    return base64.b64encode(checksum.digest()).decode()

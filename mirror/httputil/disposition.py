"""``Content-Disposition`` values, written as lakeFS writes them (Go's ``mime.FormatMediaType``).

lakeFS answers an object's bytes as ``attachment`` named after the last element of its path, so
that a browser saves the object instead of rendering it in the server's origin. The file name is
left bare when it is an RFC 2045 token, quoted when it is other printable ASCII, and written in
RFC 2231's ``filename*=utf-8''…`` form when it holds anything else.
"""

from __future__ import annotations

__all__ = ["attachment", "path_base"]

_TSPECIALS = frozenset('()<>@,;:\\"/[]?=')
_HEX = "0123456789ABCDEF"


def _is_token(value: str) -> bool:
    return bool(value) and all(" " < c < "\x7f" and c not in _TSPECIALS for c in value)


def _needs_encoding(value: str) -> bool:
    return any((c < " " or c > "~") and c != "\t" for c in value)


def _encode(value: str) -> str:
    out = []
    for byte in value.encode():
        char = chr(byte)
        if byte <= 0x20 or byte >= 0x7F or char in "*'%" or char in _TSPECIALS:
            out.append("%" + _HEX[byte >> 4] + _HEX[byte & 0x0F])
        else:
            out.append(char)
    return "".join(out)


def path_base(path: str) -> str:
    """Return the last element of a ``/``-separated path, as Go's ``filepath.Base`` does."""
    if not path:
        return "."
    stripped = path.rstrip("/")
    if not stripped:
        return "/"
    return stripped.rsplit("/", 1)[-1]


def attachment(filename: str) -> str:
    """Return ``attachment; filename=…`` for ``filename``, quoted or encoded as it needs."""
    if _needs_encoding(filename):
        return f"attachment; filename*=utf-8''{_encode(filename)}"
    if _is_token(filename):
        return f"attachment; filename={filename}"
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
    return f'attachment; filename="{quoted}"'

"""The libraries a lua hook may ``require``, with lakeFS's names, arguments and results.

Each library is a mapping of function name → Python function over plain Python values (``str``,
``bytes``, numbers, ``bool``, ``None``, ``dict``, ``list``); :mod:`mirror.actions.lua` converts
them to and from Lua. Lua strings arrive as ``str`` decoded with ``surrogateescape``, so binary
data survives: :func:`raw` gives its bytes back. A function reports a Lua error by raising
:class:`LuaLibError`.

Provided (pkg/actions/lua in lakeFS): ``encoding/json``, ``encoding/base64``, ``encoding/hex``,
``crypto/sha256``, ``crypto/md5``, ``crypto/hmac``, ``strings``, ``path``, ``regexp`` (RE2, as
Go's regexp) and ``lakefs``, whose calls act on the server's catalog and answer as the API
does: the HTTP status code first, then the body (a table for JSON answers, the bytes for
``get_object``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from mirror.core.model import DiffEntry, DiffType, ObjectStat
from mirror.errors import LakeMirrorError

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog

__all__ = [
    "CatalogClient",
    "ErrorAnswer",
    "LuaLibError",
    "libraries",
    "raw",
    "text",
    "unmapped",
]

Library = dict[str, Callable[..., Any]]

_MAX_PER_PAGE = 1000
_DEFAULT_AMOUNT = 100
ErrorAnswer = Callable[[BaseException], tuple[int, str]]
"""How the API answers an error: its status and message.

See :func:`mirror.httputil.errors.answer_for`.
"""


def unmapped(exc: BaseException) -> tuple[int, str]:
    """Answer every error as 500 with its text: for a client built without the API's mapping."""
    return 500, str(exc)


# Go's json.Encoder escapes these inside strings (its SetEscapeHTML default)
_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_GO_ESCAPES["\u2029"] = "\\u2029"
_GO_QUOTE_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


class LuaLibError(Exception):
    """A library call failed: raised in the script as a Lua error with this message."""


MAX_RESULT_ITEMS = 1_000_000
"""Items a library call returns at most (a split, a find_all); more fails as the VM does."""
MAX_RESULT_BYTES = 128 * 1024 * 1024
"""Bytes a library call's string result may have at most (the VM's own memory limit)."""
MAX_MATCHES = 100_000
"""Matches a regexp ``find_all`` call returns at most (each costs microseconds outside the
hook's deadline checks)."""


def _room(items: int = 0, size: int = 0) -> None:
    """Fail a call before it builds more than a hook's VM could hold, in the server's memory.

    Raises:
        LuaLibError: ``not enough memory``, the text the VM fails with.
    """
    if items > MAX_RESULT_ITEMS or size > MAX_RESULT_BYTES:
        raise LuaLibError("not enough memory")


def raw(value: str) -> bytes:
    """Return the bytes of a Lua string received as ``str``."""
    return value.encode("utf-8", "surrogateescape")


def text(data: bytes) -> str:
    """Return ``data`` as the ``str`` form of a Lua string (lossless for any bytes)."""
    return data.decode("utf-8", "surrogateescape")


def _integral(value: Any) -> Any:
    """Return ``value`` with whole floats as ints, as Go's encoder writes float64s."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


# encoding/json


def json_marshal(value: Any, options: Mapping[str, Any] | None = None) -> str:
    """Return ``value`` as JSON the way lakeFS's ``json.marshal`` does (Go's encoder).

    Keys are sorted, ``<``, ``>`` and ``&`` are escaped, a newline ends the text; ``options``
    may give ``prefix`` and ``indent``.
    """
    opts = options or {}
    indent = str(opts.get("indent") or "")
    prefix = str(opts.get("prefix") or "")
    try:
        if indent or prefix:
            out = json.dumps(
                _integral(value), indent=indent or "", sort_keys=True, ensure_ascii=False
            )
            out = out.replace("\n", "\n" + prefix)
        else:
            out = json.dumps(
                _integral(value), separators=(",", ":"), sort_keys=True, ensure_ascii=False
            )
    except (TypeError, ValueError) as exc:
        raise LuaLibError(f"json: unsupported value: {exc}") from None
    for char, escaped in _GO_ESCAPES.items():
        out = out.replace(char, escaped)
    return out + "\n"


def json_unmarshal(data: str) -> Any:
    """Return the value of a JSON text (objects as tables, arrays as array tables)."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise LuaLibError(f"invalid character: {exc}") from None


# encoding and crypto


def _b64decode(data: str, altchars: bytes, padded: bool) -> bytes:
    payload = raw(data)
    if not padded:
        payload += b"=" * (-len(payload) % 4)
    try:
        return base64.b64decode(payload, altchars=altchars, validate=True)
    except binascii.Error as exc:
        raise LuaLibError(f"illegal base64 data: {exc}") from None


def _hex_decode(data: str) -> bytes:
    try:
        return bytes.fromhex(data)
    except ValueError as exc:
        raise LuaLibError(f"encoding/hex: invalid byte: {exc}") from None


def _hmac(digest: str) -> Callable[[str, str], bytes]:
    def sign(message: str, key: str) -> bytes:
        return hmac.new(raw(key), raw(message), digest).digest()

    return sign


# strings


def strings_split(s: str, sep: str) -> list[str]:
    """Split ``s`` at every ``sep`` (Go's ``strings.Split``: an empty ``sep`` splits chars)."""
    _room(items=len(s) if sep == "" else s.count(sep) + 1)
    return list(s) if sep == "" else s.split(sep)


def strings_replace(s: str, old: str, new: str, n: int) -> str:
    """Replace the first ``n`` ``old`` by ``new`` (``n < 0``: all)."""
    found = len(s) + 1 if old == "" else s.count(old)
    count = found if n < 0 else min(int(n), found)
    _room(size=len(raw(s)) + count * (len(raw(new)) - len(raw(old))))
    return s.replace(old, new, int(n))


# path


def path_parse(path: str, sep: str = "/") -> dict[str, str]:
    """Return ``{parent, base_name}`` of ``path`` (the parent keeps its trailing separator)."""
    if path.endswith(sep):
        path = path[: -len(sep)]
    cut = path.rfind(sep)
    if cut < 0:
        return {"parent": "", "base_name": path}
    return {"parent": path[: cut + len(sep)], "base_name": path[cut + len(sep) :]}


def path_join(sep: str, *parts: str) -> str:
    """Join ``parts`` with exactly one ``sep`` between them (lakeFS's ``path.join``)."""
    out: list[str] = []
    for i, part in enumerate(parts):
        if not isinstance(part, str):
            raise LuaLibError("invalid type, string expected")
        if i:
            part = part.removeprefix(sep)
        out.append(part)
        if i != len(parts) - 1 and not part.endswith(sep):
            out.append(sep)
    return "".join(out)


def path_is_hidden(path: str, sep: str = "/", prefix: str = "_") -> bool:
    """Return whether any element of ``path`` starts with ``prefix``."""
    while path:
        parsed = path_parse(path, sep)
        if parsed["base_name"].startswith(prefix):
            return True
        path = parsed["parent"]
    return False


def path_extract_dir_name(path: str) -> str:
    """Return the directory of ``path`` (Go's ``filepath.Dir``)."""
    return posixpath.normpath(path[: path.rfind("/") + 1]) if "/" in path else "."


# regexp: RE2, as Go's regexp is (the same syntax, time linear in the input: no pattern can
# backtrack for hours, and a match never holds the GIL long); over the bytes of Lua strings


def _compile(pattern: str) -> Any:
    import re2  # the server extra's; imported when a lua hook runs, as lupa is

    options = re2.Options()
    options.log_errors = False  # RE2 would print each refused pattern to standard error
    try:
        return re2.compile(raw(pattern), options=options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        reason = text(reason) if isinstance(reason, bytes) else str(reason)
        raise LuaLibError(f"error parsing regexp: {reason}") from None


def regexp_match(pattern: str, s: str) -> bool:
    """Return whether ``s`` contains a match of ``pattern``."""
    return _compile(pattern).search(raw(s)) is not None


def regexp_quote_meta(s: str) -> str:
    """Escape the regular expression metacharacters of ``s`` (Go's ``regexp.QuoteMeta``)."""
    return _GO_QUOTE_META.sub(r"\\\1", s)


def _groups(m: Any) -> list[str]:
    return [text(m.group(0)), *(text(g or b"") for g in m.groups())]


def regexp_compile(pattern: str) -> Library:
    """Return a compiled pattern's functions: ``find``, ``find_all`` and their submatch forms."""
    rx = _compile(pattern)

    def first(items: Iterator[Any], n: int) -> list[Any]:
        found: list[Any] = []
        for m in items:
            if 0 <= n <= len(found):
                break
            if len(found) == MAX_MATCHES:
                raise LuaLibError(f"regexp: more than {MAX_MATCHES} matches")
            found.append(m)
        return found

    def find(s: str) -> str:
        m = rx.search(raw(s))
        return text(m.group(0)) if m else ""

    def find_all(s: str, n: int) -> list[str]:
        return [text(m.group(0)) for m in first(rx.finditer(raw(s)), int(n))]

    def find_submatch(s: str) -> list[str]:
        m = rx.search(raw(s))
        return _groups(m) if m else []

    def find_all_submatch(s: str, n: int) -> list[list[str]]:
        return [_groups(m) for m in first(rx.finditer(raw(s)), int(n))]

    return {
        "find": find,
        "find_all": find_all,
        "find_submatch": find_submatch,
        "find_all_submatch": find_all_submatch,
    }


# lakefs


def _object_row(stat: ObjectStat) -> dict[str, Any]:
    entry = stat.entry
    return {
        "path": stat.path,
        "path_type": "object",
        "physical_address": stat.physical_address,
        "checksum": entry.checksum,
        "size_bytes": entry.size,
        "mtime": entry.mtime,
        "metadata": dict(entry.metadata),
        "content_type": entry.content_type,
    }


def _diff_row(entry: DiffEntry) -> dict[str, Any]:
    side = entry.right if entry.right is not None else entry.left
    size = 0 if entry.type is DiffType.REMOVED or side is None else side.size
    return {"type": entry.type.value, "path": entry.path, "path_type": "object", "size_bytes": size}


def _page_size(amount: int | None) -> int:
    return _DEFAULT_AMOUNT if not amount or amount <= 0 else min(int(amount), _MAX_PER_PAGE)


def _pagination(has_more: bool, next_offset: str, results: int) -> dict[str, Any]:
    return {
        "has_more": has_more,
        "next_offset": next_offset if has_more else "",
        "results": results,
        "max_per_page": _MAX_PER_PAGE,
    }


class CatalogClient:
    """lakeFS's ``lakefs`` Lua library, acting on the server's catalog as the API does.

    Each call answers ``(status code, body)``: 2xx with the API's JSON (as a table), or the
    API's error status with ``{message = ...}``. Calls reach only the repository whose event
    fired the hook (another answers 403): its action files were written by someone allowed to
    write there. lakeFS runs them as the user whose operation fired the hook instead.

    Args:
        catalog: The catalog the server's API serves.
        repository: The repository of the event.
        answer: The API's status and message for an error.
    """

    def __init__(self, catalog: Catalog, repository: str, answer: ErrorAnswer = unmapped) -> None:
        self.catalog = catalog
        self.repository = repository
        self.answer = answer

    def _failure(self, exc: LakeMirrorError) -> tuple[int, dict[str, Any]]:
        status, message = self.answer(exc)
        return status, {"message": message}

    def _foreign(self, repository: str) -> dict[str, Any] | None:
        """Return the 403 body for a repository other than the event's, else ``None``."""
        if repository == self.repository:
            return None
        return {
            "message": f"insufficient permissions: a hook of repository {self.repository!r} "
            f"cannot use repository {repository!r}"
        }

    def get_object(self, repository: str, ref: str, path: str) -> tuple[int, Any]:
        """Return ``200, bytes`` of an object, or the error status and its JSON text."""
        if (refused := self._foreign(repository)) is not None:
            return 403, json.dumps(refused) + "\n"
        try:
            return 200, self.catalog.read_object(repository, ref, path)
        except LakeMirrorError as exc:
            status, body = self._failure(exc)
            return status, json.dumps(body) + "\n"

    def stat_object(self, repository: str, ref: str, path: str) -> tuple[int, Any]:
        """Return ``200`` and the object's stats as JSON text (lakeFS answers the raw body)."""
        if (refused := self._foreign(repository)) is not None:
            return 403, json.dumps(refused)
        try:
            row = _object_row(self.catalog.stat_object(repository, ref, path))
            return 200, json.dumps(row)
        except LakeMirrorError as exc:
            status, body = self._failure(exc)
            return status, json.dumps(body)

    def list_objects(
        self,
        repository: str,
        ref: str,
        after: str = "",
        prefix: str = "",
        delimiter: str = "",
        amount: int | None = None,
        user_metadata: bool = True,
    ) -> tuple[int, Any]:
        """Return ``200, {results, pagination}`` of one listing page (``GET objects/ls``)."""
        if (refused := self._foreign(repository)) is not None:
            return 403, refused
        try:
            listed = self.catalog.list_objects(
                repository,
                ref,
                prefix or "",
                after=after or "",
                amount=_page_size(amount),
                delimiter=delimiter or "",
            )
        except LakeMirrorError as exc:
            return self._failure(exc)
        rows = [_object_row(ObjectStat(p, e, a)) for p, e, a in listed.rows]
        if not user_metadata:
            for row in rows:
                row["metadata"] = {}
        rows.extend(
            {"path": p, "path_type": "common_prefix", "physical_address": "", "checksum": ""}
            for p in listed.common_prefixes
        )
        rows.sort(key=lambda r: str(r["path"]))
        return 200, {
            "results": rows,
            "pagination": _pagination(listed.has_more, listed.next_offset, len(rows)),
        }

    def diff_refs(
        self,
        repository: str,
        left: str,
        right: str,
        after: str = "",
        prefix: str = "",
        delimiter: str = "",
        amount: int | None = None,
    ) -> tuple[int, Any]:
        """Return ``200, {results, pagination}`` of the three-dot diff ``left...right``."""
        if (refused := self._foreign(repository)) is not None:
            return 403, refused
        size = _page_size(amount)
        rows: list[dict[str, Any]] = []
        has_more = False
        try:
            for entry in self.catalog.diff(repository, left, right, three_dot=True):
                if prefix and not entry.path.startswith(prefix):
                    if entry.path > prefix:
                        break
                    continue
                row = _diff_row(entry)
                if delimiter:
                    cut = entry.path.find(delimiter, len(prefix or ""))
                    if cut >= 0:
                        common = entry.path[: cut + len(delimiter)]
                        if rows and rows[-1]["path"] == common:
                            continue
                        row = {"type": "prefix_changed", "path": common}
                        row["path_type"] = "common_prefix"
                if after and row["path"] <= after:
                    continue
                if len(rows) == size:
                    has_more = True
                    break
                rows.append(row)
        except LakeMirrorError as exc:
            return self._failure(exc)
        last = rows[-1]["path"] if rows else ""
        return 200, {"results": rows, "pagination": _pagination(has_more, last, len(rows))}

    def create_tag(self, repository: str, ref: str, tag: str) -> tuple[int, Any]:
        """Create tag ``tag`` at ``ref``; return ``201, {id, commit_id}``."""
        if (refused := self._foreign(repository)) is not None:
            return 403, refused
        try:
            commit_id = self.catalog.create_tag(repository, tag, ref)
        except LakeMirrorError as exc:
            return self._failure(exc)
        return 201, {"id": tag, "commit_id": commit_id}


def libraries(client: CatalogClient | None) -> dict[str, Library]:
    """Return the libraries by ``require`` name (no ``lakefs`` without a client)."""
    libs: dict[str, Library] = {
        "encoding/json": {"marshal": json_marshal, "unmarshal": json_unmarshal},
        "encoding/base64": {
            "encode": lambda d: base64.b64encode(raw(d)).decode(),
            "decode": lambda d: _b64decode(d, b"+/", padded=True),
            "url_encode": lambda d: base64.urlsafe_b64encode(raw(d)).rstrip(b"=").decode(),
            "url_decode": lambda d: _b64decode(d, b"-_", padded=False),
        },
        "encoding/hex": {"encode": lambda d: raw(d).hex(), "decode": _hex_decode},
        "crypto/sha256": {"digest": lambda d: hashlib.sha256(raw(d)).digest()},
        "crypto/md5": {"digest": lambda d: hashlib.md5(raw(d), usedforsecurity=False).hexdigest()},
        "crypto/hmac": {"sign_sha256": _hmac("sha256"), "sign_sha1": _hmac("sha1")},
        "strings": {
            "split": strings_split,
            "trim": lambda s: s.strip(),
            "replace": strings_replace,
            "has_prefix": lambda s, p: s.startswith(p),
            "has_suffix": lambda s, p: s.endswith(p),
            "contains": lambda s, p: p in s,
        },
        "path": {
            "parse": path_parse,
            "join": path_join,
            "is_hidden": path_is_hidden,
            "default_separator": lambda: "/",
            "extract_dir_name": path_extract_dir_name,
        },
        "regexp": {
            "match": regexp_match,
            "quote_meta": regexp_quote_meta,
            "compile": regexp_compile,
        },
    }
    # the names of lakeFS's first releases, which scripts still use
    libs["encoding/base64"]["urlEncode"] = libs["encoding/base64"]["url_encode"]
    libs["encoding/base64"]["urlDecode"] = libs["encoding/base64"]["url_decode"]
    libs["crypto/hmac"]["signsha256"] = libs["crypto/hmac"]["sign_sha256"]
    libs["crypto/hmac"]["signsha1"] = libs["crypto/hmac"]["sign_sha1"]
    if client is not None:
        libs["lakefs"] = {
            "get_object": client.get_object,
            "stat_object": client.stat_object,
            "list_objects": client.list_objects,
            "diff_refs": client.diff_refs,
            "create_tag": client.create_tag,
        }
    return libs

"""The embedded object store: a directory tree on local disk."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from mirror.block.errors import BlockNotFoundError, InvalidNamespaceError, InvalidRangeError
from mirror.block.protocol import ObjectInfo

__all__ = ["ListedBatch", "ListedObject", "LocalBlockStore"]

_TMP = ".lakemirror-tmp"
_CHUNK = 1 << 20
_ETAG_XATTR = "user.lakemirror.etag"
_FileRun = list[tuple[str, os.DirEntry[str]]]
"""Files of one directory, with their keys, in key order."""


@dataclass(frozen=True, slots=True)
class ListedObject:
    """An object as :meth:`LocalBlockStore.list_detailed` lists it."""

    key: str
    size: int
    etag: str
    mtime: int


@dataclass(frozen=True, slots=True)
class ListedBatch:
    """Objects as :meth:`LocalBlockStore.list_detailed_batches` lists them: parallel lists."""

    keys: list[str]
    sizes: list[int]
    etags: list[str]
    mtimes: list[int]


def _check_key(key: str) -> None:
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\x00" in key
        or parts[0] == _TMP
        or any(p in ("", ".", "..") for p in parts[:-1])
        or (parts[-1] in (".", "..", ""))
    ):
        raise InvalidNamespaceError(f"invalid object key {key!r}")


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _in_place(move: Callable[[str, str], None], tmp: str, path: str) -> None:
    """Move (or link) ``tmp`` to ``path``, making its directory first only if it is missing."""
    try:
        move(tmp, path)
    except FileNotFoundError:
        if not os.path.exists(tmp):
            raise
        os.makedirs(os.path.dirname(path), exist_ok=True)
        move(tmp, path)


def _conflict(key: str) -> InvalidNamespaceError:
    return InvalidNamespaceError(
        f"object key {key!r} collides with an existing object or prefix: on local disk a key "
        "cannot be both an object and a prefix of other keys"
    )


class LocalBlockStore:
    """:class:`~mirror.block.protocol.BlockStore` over a directory.

    Writes go to a temporary file that is renamed (or hard-linked, for write-if-absent) into
    place, so readers never see a partial object. Unlike S3, a key cannot hold an object while
    other keys extend it as a prefix (``a/b`` and ``a/b/c``); such writes raise
    :class:`InvalidNamespaceError`.
    """

    def __init__(self, root: str | Path, namespace: str | None = None) -> None:
        self._root = Path(root).resolve()
        self._root_str = str(self._root)
        self._namespace = namespace or f"local://{self._root}"

    @property
    def namespace(self) -> str:
        """Return the namespace URI of this store."""
        return self._namespace

    @property
    def root(self) -> Path:
        """Return the directory holding the objects."""
        return self._root

    def _path(self, key: str) -> Path:
        _check_key(key)
        return self._root / key

    def _write_temp(self, data: bytes | BinaryIO) -> tuple[str, int, str]:
        # paths as strings and directories made only when missing: a commit writes two files
        # and an upload one, and pathlib's objects and a mkdir per write cost 10-20 % of a put
        tmp = f"{self._root_str}/{_TMP}/{uuid.uuid4().hex}"
        try:
            out = open(tmp, "wb")
        except FileNotFoundError:
            os.makedirs(f"{self._root_str}/{_TMP}", exist_ok=True)
            out = open(tmp, "wb")
        md5 = hashlib.md5(usedforsecurity=False)
        size = 0
        try:
            with out:
                if isinstance(data, bytes | bytearray | memoryview):
                    out.write(data)
                    md5.update(data)
                    size = len(data)
                else:
                    while chunk := data.read(_CHUNK):
                        out.write(chunk)
                        md5.update(chunk)
                        size += len(chunk)
        except BaseException:
            _unlink(tmp)
            raise
        etag = md5.hexdigest()
        with contextlib.suppress(OSError):
            os.setxattr(tmp, _ETAG_XATTR, etag.encode())
        return tmp, size, etag

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        """Write ``data`` at ``key`` atomically."""
        _check_key(key)
        path = f"{self._root_str}/{key}"
        tmp, size, etag = self._write_temp(data)
        try:
            _in_place(os.replace, tmp, path)
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:
            _unlink(tmp)
            raise _conflict(key) from exc
        return ObjectInfo(key, size, etag)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` unless an object is there (atomic via hard link)."""
        _check_key(key)
        path = f"{self._root_str}/{key}"
        if os.path.isfile(path):
            return False
        tmp, _, _ = self._write_temp(data)
        try:
            _in_place(os.link, tmp, path)
        except FileExistsError as exc:
            if os.path.isfile(path):
                return False
            raise _conflict(key) from exc
        except NotADirectoryError as exc:
            raise _conflict(key) from exc
        finally:
            _unlink(tmp)
        return True

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``key``.

        A read of an object is the API's most frequent call: it opens the file by its path as
        a string (a checked key has no empty, ``.`` or ``..`` segment, so the join is the
        path's) and reads with ``pread``, without a Python file object.
        """
        _check_key(key)
        try:
            fd = os.open(f"{self._root_str}/{key}", os.O_RDONLY)
        except (FileNotFoundError, NotADirectoryError):
            raise BlockNotFoundError(key) from None
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise BlockNotFoundError(key)
            size = info.st_size
            if start < 0 or start > size or (start == size and size > 0):
                raise InvalidRangeError(f"range start {start} beyond size {size} of {key!r}")
            stop = size if end is None else min(size, max(start, end))
            parts: list[bytes] = []
            pos = start
            while pos < stop:
                data = os.pread(fd, stop - pos, pos)
                if not data:  # the file was cut short meanwhile
                    break
                parts.append(data)
                pos += len(data)
            return parts[0] if len(parts) == 1 else b"".join(parts)
        finally:
            os.close(fd)

    def head(self, key: str) -> ObjectInfo:
        """Return size and MD5 etag of the object at ``key``."""
        path = self._path(key)
        try:
            size = path.stat().st_size
            if not path.is_file():
                raise BlockNotFoundError(key)
        except (FileNotFoundError, NotADirectoryError):
            raise BlockNotFoundError(key) from None
        return ObjectInfo(key, size, _etag(str(path)))

    def exists(self, key: str) -> bool:
        """Return whether ``key`` holds an object."""
        return self._path(key).is_file()

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after``, in key order."""
        for key, entry in self._walk(str(self._root), "", prefix, start_after):
            try:
                size = entry.stat().st_size
            except FileNotFoundError:
                continue  # removed while listed
            yield ObjectInfo(key, size, "")

    def _walk(
        self, directory: str, rel: str, prefix: str, after: str
    ) -> Iterator[tuple[str, os.DirEntry[str]]]:
        """Yield ``(key, directory entry)`` of the files under ``prefix`` after ``after``."""
        for _, run in self._runs(directory, rel, prefix, after):
            yield from run

    def _runs(
        self, directory: str, rel: str, prefix: str, after: str
    ) -> Iterator[tuple[str, _FileRun]]:
        """Yield :meth:`_walk`'s files in runs, each with its directory.

        A run is a directory's files between two of its subdirectories.
        """
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            return
        named = []
        for entry in entries:
            if not rel and entry.name == _TMP:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            named.append((rel + entry.name + ("/" if is_dir else ""), is_dir, entry))
        named.sort()  # by key: keys of one directory differ, so entries are never compared
        run: _FileRun = []
        for full, is_dir, entry in named:
            if is_dir:
                if not (full.startswith(prefix) or prefix.startswith(full)):
                    continue
                if full < after and not after.startswith(full):
                    continue
                if run:
                    yield directory, run
                    run = []
                yield from self._runs(entry.path, full, prefix, after)
            elif full.startswith(prefix) and full > after:
                run.append((full, entry))
        if run:
            yield directory, run

    def list_detailed(self, prefix: str = "") -> Iterator[ListedObject]:
        """Yield objects under ``prefix`` in key order with their MD5 etags and mtimes.

        Only one directory's entries are held at a time (each is sorted on its own), so a
        tree of any size lists in bounded memory. Files written by this store carry their
        etag; others are read once to compute it.
        """
        for batch in self.list_detailed_batches(prefix):
            yield from map(ListedObject, batch.keys, batch.sizes, batch.etags, batch.mtimes)

    def list_detailed_batches(self, prefix: str = "", limit: int = 1000) -> Iterator[ListedBatch]:
        """Yield what :meth:`list_detailed` lists, as batches of up to ``limit`` objects.

        A batch also ends before any file that is not a regular one (a FIFO, a device, a
        symbolic link), whose opening may wait: what was listed before it is not held back.
        """
        details = _Details()
        keys: list[str] = []
        sizes: list[int] = []
        etags: list[str] = []
        mtimes: list[int] = []
        for directory, run in self._runs(self._root_str, "", prefix, ""):
            # files are opened relative to their directory: one path lookup per directory
            try:
                dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed while listed
            try:
                for key, entry in run:
                    if keys and not entry.is_file(follow_symlinks=False):
                        # opening a FIFO (or a device) may wait: pass on what came before
                        yield ListedBatch(keys, sizes, etags, mtimes)
                        keys, sizes, etags, mtimes = [], [], [], []
                    try:
                        size, etag, mtime = details(entry.name, dir_fd, entry.path)
                    except (FileNotFoundError, NotADirectoryError):
                        continue  # removed while listed
                    keys.append(key)
                    sizes.append(size)
                    etags.append(etag)
                    mtimes.append(mtime)
                    if len(keys) >= limit:
                        yield ListedBatch(keys, sizes, etags, mtimes)
                        keys, sizes, etags, mtimes = [], [], [], []
            finally:
                os.close(dir_fd)
        if keys:
            yield ListedBatch(keys, sizes, etags, mtimes)

    def delete(self, key: str) -> None:
        """Remove the object at ``key`` if present."""
        # a directory, or a path through a file, holds no object: nothing to delete
        with contextlib.suppress(IsADirectoryError, NotADirectoryError):
            self._path(key).unlink(missing_ok=True)

    def destroy(self) -> None:
        """Remove the whole directory tree of this store."""
        shutil.rmtree(self._root, ignore_errors=True)


def _etag(path: str) -> str:
    """Return the MD5 etag of the file at ``path``: its stored attribute, or its bytes' digest."""
    return _Details()(path, None, path)[1]


_md5 = hashlib.md5
_EMPTY_MD5 = _md5(b"", usedforsecurity=False).hexdigest()


class _Details:
    """Read files' sizes, mtimes and etags in as few system calls as they allow.

    A file without the etag attribute is opened once: ``fstat``, ``flistxattr`` and one
    ``read`` of its size (plus one byte, to see its end) go through that descriptor. A
    file with the attribute needs no descriptor: a ``stat`` and a ``getxattr`` by path.
    Which kind comes next is guessed from the last file (a tree is usually all of one kind);
    a wrong guess costs a call, never a different answer.
    """

    __slots__ = ("_tagged",)

    def __init__(self) -> None:
        self._tagged = False

    def __call__(self, name: str, dir_fd: int | None, path: str) -> tuple[int, str, int]:
        """Return size, etag and mtime (Unix seconds) of a file.

        The file is ``name`` in the directory open as ``dir_fd`` (or ``name`` itself with no
        ``dir_fd``), whose whole path is ``path``.
        """
        if self._tagged:
            st = os.stat(name, dir_fd=dir_fd)
            try:
                return st.st_size, os.getxattr(path, _ETAG_XATTR).decode(), int(st.st_mtime)
            except OSError:
                self._tagged = False
        fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
        try:
            st = os.fstat(fd)
            size = st.st_size
            try:
                # listing the attributes fails no call when the etag's is absent (the usual
                # case here), where asking for it would raise
                tagged = _ETAG_XATTR in os.listxattr(fd)
            except OSError:
                tagged = False
            if tagged:
                try:
                    etag = os.getxattr(fd, _ETAG_XATTR).decode()
                    self._tagged = True
                except OSError:
                    tagged = False
            if tagged:
                pass
            elif not size:
                etag = _EMPTY_MD5  # the size was read from this descriptor: nothing to read
            elif size < _CHUNK:
                # the expected size plus one byte: a short read ends it, no buffer of a chunk
                data = os.read(fd, size + 1)
                if len(data) <= size:
                    etag = _md5(data, usedforsecurity=False).hexdigest()
                else:  # the file grew meanwhile: read on to its end
                    etag = _digest(fd, data)
            else:
                etag = _digest(fd, b"")
        finally:
            os.close(fd)
        return size, etag, int(st.st_mtime)


def _digest(fd: int, head: bytes) -> str:
    """Return the MD5 of ``head`` and what ``fd`` holds after it, read to its end."""
    md5 = _md5(head, usedforsecurity=False)
    while True:
        chunk = os.read(fd, _CHUNK)
        md5.update(chunk)
        if len(chunk) < _CHUNK:  # a short read of a regular file is its end
            break
    return md5.hexdigest()

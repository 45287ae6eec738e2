"""A namespace's data objects as garbage collection sees them: listed with times, deleted in bulk.

The garbage collection job (:mod:`mirror.spark.gc`) runs these functions on Spark's executors,
one task per partition of ``data/``, so no process ever holds the whole namespace's listing: the
driver lists only the first level of ``data/``. They take the URIs Spark reads the namespace
under: ``file:///abs/path`` for a ``local://`` namespace, ``s3a://bucket/prefix`` for an
``s3://`` one (listed and deleted with boto3 on the executors, 1,000 keys a request, with the
endpoint, region and keys of the session's ``spark.hadoop.fs.s3a.*`` settings, else AWS's
default credential chain). Only stdlib modules are imported at the top; boto3 only for S3.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["DELETE_BATCH", "ListedObject", "S3Options", "StorageRoot", "is_data_key"]

DELETE_BATCH = 1000
"""Keys one S3 ``DeleteObjects`` request removes at most."""

ListedObject = tuple[str, int, int]
"""``(key relative to the namespace, size in bytes, modification time in whole seconds)``."""

_DATA = "data/"


def is_data_key(key: str) -> bool:
    """Return whether ``key`` is a plain key under ``data/`` (the only ones a run deletes)."""
    parts = key.split("/")
    return (
        key.startswith(_DATA)
        and len(parts) > 1
        and all(p not in ("", ".", "..") for p in parts)
        and "\x00" not in key
    )


@dataclass(frozen=True, slots=True)
class S3Options:
    """How executors reach S3, from the session's ``spark.hadoop.fs.s3a.*`` settings."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    path_style: bool = False

    @classmethod
    def from_spark_conf(cls, conf: Mapping[str, str]) -> S3Options:
        """Return the options of a Spark configuration (unset keys: AWS's defaults)."""
        prefix = "spark.hadoop.fs.s3a."
        endpoint = conf.get(prefix + "endpoint") or None
        if endpoint and "://" not in endpoint:
            ssl = conf.get(prefix + "connection.ssl.enabled", "true").lower() != "false"
            endpoint = ("https://" if ssl else "http://") + endpoint
        return cls(
            endpoint_url=endpoint,
            region=conf.get(prefix + "endpoint.region") or None,
            access_key_id=conf.get(prefix + "access.key") or None,
            secret_access_key=conf.get(prefix + "secret.key") or None,
            path_style=conf.get(prefix + "path.style.access", "false").lower() == "true",
        )

    def client(self) -> Any:
        """Return a boto3 S3 client."""
        import boto3
        from botocore.config import Config

        config = Config(
            s3={"addressing_style": "path" if self.path_style else "auto"},
            retries={"max_attempts": 8, "mode": "standard"},
        )
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            config=config,
        )


@dataclass(frozen=True, slots=True)
class StorageRoot:
    """A namespace's root as Spark names it, with listing and deletion of its objects.

    Attributes:
        uri: ``file:///abs/path`` or ``s3a://bucket/prefix``, without a trailing slash.
        s3: How to reach S3 (for ``s3a://`` roots).
    """

    uri: str
    s3: S3Options = S3Options()

    @property
    def scheme(self) -> str:
        """Return ``file`` or ``s3a``."""
        scheme = urlsplit(self.uri).scheme
        if scheme not in ("file", "s3a"):
            raise ValueError(f"{self.uri!r}: garbage collection lists file:// and s3a:// only")
        return scheme

    def _local(self, key: str = "") -> str:
        root = unquote(urlsplit(self.uri).path).rstrip("/")
        return f"{root}/{key}" if key else root

    def _bucket_base(self) -> tuple[str, str]:
        parts = urlsplit(self.uri)
        base = parts.path.strip("/")
        return parts.netloc, base + "/" if base else ""

    def list_level(self, prefix: str) -> tuple[list[str], list[ListedObject]]:
        """Return the sub-prefixes and the objects directly under ``prefix`` (ends with ``/``)."""
        if self.scheme == "file":
            dirs: list[str] = []
            files: list[ListedObject] = []
            try:
                entries = os.scandir(self._local(prefix))
            except (FileNotFoundError, NotADirectoryError):
                return [], []
            with entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(f"{prefix}{entry.name}/")
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        files.append((prefix + entry.name, st.st_size, int(st.st_mtime)))
            return sorted(dirs), sorted(files)
        bucket, base = self._bucket_base()
        pages = (
            self.s3.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=bucket, Prefix=base + prefix, Delimiter="/")
        )
        dirs, files = [], []
        for page in pages:
            dirs.extend(p["Prefix"][len(base) :] for p in page.get("CommonPrefixes", ()))
            files.extend(
                (o["Key"][len(base) :], int(o["Size"]), int(o["LastModified"].timestamp()))
                for o in page.get("Contents", ())
            )
        return sorted(dirs), sorted(files)

    def walk(self, prefix: str) -> Iterator[ListedObject]:
        """Yield every object under ``prefix`` (recursively), in no particular order."""
        if self.scheme == "file":
            stack = [prefix]
            while stack:
                current = stack.pop()
                try:
                    entries = os.scandir(self._local(current))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                with entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(f"{current}{entry.name}/")
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # deleted meanwhile
                        yield current + entry.name, st.st_size, int(st.st_mtime)
            return
        bucket, base = self._bucket_base()
        pages = (
            self.s3.client()
            .get_paginator("list_objects_v2")
            .paginate(Bucket=bucket, Prefix=base + prefix)
        )
        for page in pages:
            for o in page.get("Contents", ()):
                yield o["Key"][len(base) :], int(o["Size"]), int(o["LastModified"].timestamp())

    def delete(self, keys: Iterable[str], batch: int = DELETE_BATCH) -> tuple[int, int]:
        """Delete the objects at ``keys`` (data keys only); return ``(deleted, refused)``.

        An object already gone counts as deleted: a sweep can run again. A key outside
        ``data/`` is refused and left alone. On S3, ``batch`` keys go in one request.

        Raises:
            OSError: a local file could not be removed.
            RuntimeError: S3 refused to delete some keys (the message names the first).
        """
        wanted: list[str] = []
        refused = 0
        for key in keys:
            if is_data_key(key):
                wanted.append(key)
            else:
                refused += 1
        if self.scheme == "file":
            for key in wanted:
                try:
                    os.unlink(self._local(key))
                except FileNotFoundError:
                    pass
            return len(wanted), refused
        bucket, base = self._bucket_base()
        client = self.s3.client()
        for start in range(0, len(wanted), batch):
            chunk = wanted[start : start + batch]
            answer = client.delete_objects(
                Bucket=bucket,
                Delete={"Objects": [{"Key": base + k} for k in chunk], "Quiet": True},
            )
            errors = answer.get("Errors") or []
            if errors:
                first = errors[0]
                raise RuntimeError(
                    f"S3 refused to delete {len(errors)} of {len(chunk)} objects, e.g. "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message')}"
                )
        return len(wanted), refused

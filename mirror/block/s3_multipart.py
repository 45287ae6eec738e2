"""S3 multipart uploads whose parts the client sends itself, to presigned URLs.

lakeFS's presigned multipart upload: the server starts an upload at a key of the namespace,
hands out one presigned ``UploadPart`` URL per part, copies parts from other objects inside S3
(``UploadPartCopy``, with an optional byte range), and completes or aborts the upload. The bytes
never pass through the server. Only the S3 store can do this; :func:`multipart_for` answers
``None`` for any other store.

S3's refusals map onto the shared error tree: an unknown upload is
:class:`UploadNotFoundError` (404), parts S3 refuses (a wrong ETag, a part below 5 MiB, parts
out of order) are :class:`InvalidPartError` (400), the rest :class:`BlockUnavailableError`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from mirror.block.errors import BlockNotFoundError
from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.block.s3 import S3BlockStore, map_s3_error, s3_key
from mirror.errors import InvalidValueError, NotFoundError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

__all__ = [
    "MAX_PARTS",
    "CopySource",
    "InvalidPartError",
    "S3Multipart",
    "UploadNotFoundError",
    "multipart_for",
    "parse_copy_range",
]

MAX_PARTS = 10_000
"""The most parts one upload may have (S3's limit, lakeFS's ``manager.MaxUploadParts``)."""

_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")
_NO_UPLOAD = frozenset({"NoSuchUpload"})
_BAD_PART = frozenset({"InvalidPart", "InvalidPartOrder", "EntityTooSmall", "InvalidRequest"})


class UploadNotFoundError(NotFoundError):
    """No multipart upload of that ID at that address (404)."""


class InvalidPartError(InvalidValueError):
    """S3 refused the parts or the copy range of an upload (400)."""


@dataclass(frozen=True, slots=True)
class CopySource:
    """Where a copied part's bytes are: a bucket, a key in it, and an optional byte range.

    Attributes:
        bucket: The source object's bucket.
        key: The source object's key in ``bucket``.
        byte_range: ``bytes=first-last`` (both inclusive), or ``None`` for the whole object.
    """

    bucket: str
    key: str
    byte_range: str | None = None


def parse_copy_range(value: str | None) -> str | None:
    """Return a copy range S3 accepts (``bytes=first-last``), ``None`` when none is given.

    Raises:
        InvalidValueError: several ranges, an open range, or ``last`` before ``first``.
    """
    if value is None or not value.strip():
        return None
    match = _RANGE.match(value.strip())
    if match is None or int(match.group(2)) < int(match.group(1)):
        raise InvalidValueError(f"invalid range {value!r}: one range bytes=first-last is required")
    return value.strip()


def multipart_for(store: BlockStore) -> S3Multipart | None:
    """Return the multipart uploader of ``store``, ``None`` when its kind cannot presign them."""
    if isinstance(store, S3BlockStore):
        return S3Multipart(store.client, store.bucket, store.base)
    return None


def source_of(store: BlockStore, key: str, byte_range: str | None) -> CopySource | None:
    """Return where the bytes of ``key`` in ``store`` are in S3; ``None`` for any other store."""
    if isinstance(store, S3BlockStore):
        return CopySource(store.bucket, s3_key(store.base, key), byte_range)
    return None


class S3Multipart:
    """Multipart uploads at keys of one namespace (``bucket``, keys under ``base``).

    Args:
        client: The boto3 client (the namespace's store's own).
        bucket: The namespace's bucket.
        base: The namespace's key prefix in the bucket (``""`` or ending in ``/``).
    """

    def __init__(self, client: S3Client, bucket: str, base: str) -> None:
        self._client = client
        self._bucket = bucket
        self._base = base

    def _error(self, exc: Exception, key: str, action: str) -> Exception:
        if isinstance(exc, ClientError):
            error: Any = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in _NO_UPLOAD:
                return UploadNotFoundError(
                    f"{action} s3://{self._bucket}/{self._base}{key}: {code}"
                )
            if code in _BAD_PART:
                return InvalidPartError(f"{action}: {code}: {error.get('Message', '')}".strip())
        return map_s3_error(exc, self._bucket, self._base, key, action)

    def create(self, key: str) -> str:
        """Start a multipart upload at ``key`` and return its upload ID."""
        try:
            answer = self._client.create_multipart_upload(
                Bucket=self._bucket, Key=s3_key(self._base, key)
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, key, "create multipart upload") from exc
        return answer["UploadId"]

    def presign_part(self, key: str, upload_id: str, number: int, expires: int) -> str:
        """Return a URL that lets its holder PUT part ``number`` of the upload for ``expires`` s."""
        url: str = self._client.generate_presigned_url(
            "upload_part",
            Params={
                "Bucket": self._bucket,
                "Key": s3_key(self._base, key),
                "UploadId": upload_id,
                "PartNumber": number,
            },
            ExpiresIn=expires,
        )
        return url

    def copy_part(self, key: str, upload_id: str, number: int, source: CopySource) -> str:
        """Make part ``number`` of the upload a copy of ``source`` inside S3; return its ETag."""
        args: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": s3_key(self._base, key),
            "UploadId": upload_id,
            "PartNumber": number,
            "CopySource": {"Bucket": source.bucket, "Key": source.key},
        }
        if source.byte_range is not None:
            args["CopySourceRange"] = source.byte_range
        try:
            answer = self._client.upload_part_copy(**args)
        except ClientError as exc:
            error: Any = exc.response.get("Error", {})
            if str(error.get("Code", "")) in ("InvalidRange", "InvalidArgument"):
                raise InvalidPartError(
                    f"copy range {source.byte_range!r}: {error.get('Message', '')}"
                ) from exc
            raise self._error(exc, key, "upload part copy") from exc
        except BotoCoreError as exc:
            raise self._error(exc, key, "upload part copy") from exc
        etag: str = answer["CopyPartResult"]["ETag"]
        return etag.strip('"')

    def complete(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> ObjectInfo:
        """Complete the upload from ``(part number, ETag)`` pairs; return its size and ETag.

        The size comes from a HEAD of the completed object (S3's answer has none).
        """
        full = s3_key(self._base, key)
        listed = [
            {"PartNumber": number, "ETag": f'"{etag.strip(chr(34))}"'} for number, etag in parts
        ]
        try:
            done = self._client.complete_multipart_upload(
                Bucket=self._bucket,
                Key=full,
                UploadId=upload_id,
                MultipartUpload={"Parts": listed},  # type: ignore[typeddict-item]
            )
            head = self._client.head_object(Bucket=self._bucket, Key=full)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, key, "complete multipart upload") from exc
        etag = str(done.get("ETag") or head["ETag"]).strip('"')
        return ObjectInfo(key, head["ContentLength"], etag)

    def abort(self, key: str, upload_id: str) -> None:
        """Abort the upload; its parts are dropped."""
        try:
            self._client.abort_multipart_upload(
                Bucket=self._bucket, Key=s3_key(self._base, key), UploadId=upload_id
            )
        except (ClientError, BotoCoreError) as exc:
            err = self._error(exc, key, "abort multipart upload")
            if isinstance(err, BlockNotFoundError):
                err = UploadNotFoundError(f"abort multipart upload {key!r}: no such upload")
            raise err from exc

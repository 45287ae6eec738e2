"""The production object store: a bucket and key prefix on S3 or an S3-compatible service.

boto3 is imported only here; the core and the embedded drivers run without it. One boto3
client (thread-safe, pooled) serves every namespace opened through one :func:`s3_store_factory`.
Requests are built and answers read by :class:`~mirror.block.s3_common.S3Namespace`, which the
asynchronous reader (:mod:`mirror.block.s3_async`) shares.

Etags are S3's own, without quotes: the MD5 of the bytes for objects written in one request, the
``<md5-of-part-md5s>-<parts>`` form for objects written by multipart upload (objects of at least
:attr:`S3Settings.multipart_threshold` bytes, streamed part by part).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

import boto3
import botocore.session
from botocore.exceptions import BotoCoreError, ClientError

from mirror.block.errors import BlockNotFoundError, BlockUnavailableError
from mirror.block.local import ListedObject
from mirror.block.protocol import ObjectInfo
from mirror.block.s3_common import (
    S3Namespace,
    bare_etag,
    error_code,
    is_range_error,
    map_s3_error,
    range_header,
    s3_key,
    split_s3_namespace,
)
from mirror.block.s3_config import (
    S3Settings,
    client_config,
    parse_timestamp,
    session_options,
    use_fast_timestamps,
)
from mirror.block.s3_listing import parse_listings_once, use_fast_listing

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import (
        CompletedPartTypeDef,
        CompleteMultipartUploadOutputTypeDef,
        HeadObjectOutputTypeDef,
        ListObjectsV2OutputTypeDef,
    )

# the settings and the shared helpers are named here too: ``mirror.block.s3`` is where the
# server, the replicant and the tools find everything they need to open an S3 store
__all__ = [
    "S3BlockStore",
    "S3Settings",
    "client_config",
    "is_range_error",
    "make_s3_client",
    "map_s3_error",
    "parse_timestamp",
    "range_header",
    "s3_key",
    "s3_store_factory",
    "session_options",
    "split_s3_namespace",
    "use_fast_timestamps",
]

_CONFLICT_TRIES = 5


def make_s3_client(settings: S3Settings) -> S3Client:
    """Return a thread-safe boto3 S3 client configured by ``settings``."""
    session = boto3.session.Session(
        **session_options(settings),
        # Listings parse through the dedicated walker: ~25 µs of CPU less per listed key.
        botocore_session=use_fast_listing(use_fast_timestamps(botocore.session.get_session())),
    )
    client = session.client(
        "s3", endpoint_url=settings.endpoint_url, config=client_config(settings)
    )
    parse_listings_once(client.meta.events)
    return client


def s3_store_factory(
    settings: S3Settings | None = None, client: S3Client | None = None
) -> Callable[[str], S3BlockStore]:
    """Return a factory for ``BlockResolver.register("s3", ...)`` sharing one client.

    The client is made on first use, so registering the scheme costs nothing.
    """
    settings = settings or S3Settings()
    shared: list[S3Client] = [client] if client is not None else []

    def open_store(namespace: str) -> S3BlockStore:
        if not shared:
            try:
                shared.append(make_s3_client(settings))
            except BotoCoreError as exc:
                raise BlockUnavailableError(f"S3 client for {namespace!r}: {exc}") from exc
        return S3BlockStore(namespace, shared[0], settings)

    return open_store


def _read_up_to(stream: BinaryIO, size: int) -> bytes:
    """Read ``size`` bytes from ``stream``, fewer only at its end."""
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = stream.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class S3BlockStore(S3Namespace):
    """:class:`~mirror.block.protocol.BlockStore` over ``s3://bucket/prefix``.

    Keys map to ``prefix/key`` in the bucket. Throttling, 5xx answers and connection errors are
    retried by botocore (``settings.retry_mode``, ``settings.max_attempts``) and then raise
    :class:`BlockUnavailableError`; so do a missing bucket and refused credentials, with the
    cause in the message.
    """

    def __init__(
        self, namespace: str, client: S3Client, settings: S3Settings | None = None
    ) -> None:
        super().__init__(namespace, settings)
        self._client = client

    @property
    def client(self) -> S3Client:
        """Return the boto3 client this store sends its requests through."""
        return self._client

    def check(self) -> None:
        """Verify the bucket exists and the credentials may use it.

        Raises:
            BlockUnavailableError: the bucket is missing, access is refused or S3 is unreachable.
        """
        try:
            self._client.head_bucket(Bucket=self._bucket)
        except ClientError as exc:
            code, status = error_code(exc)
            why = "is missing" if status == 404 else f"is not usable ({code or status})"
            raise BlockUnavailableError(f"S3 bucket {self._bucket!r} {why}") from exc
        except BotoCoreError as exc:
            raise BlockUnavailableError(f"S3 bucket {self._bucket!r}: {exc}") from exc

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        """Write ``data`` at ``key``; data of at least the threshold goes up in parts.

        A stream is read one part at a time, so memory use stays near ``part_size``. A failed
        multipart upload is aborted.
        """
        full = self._key(key)
        if isinstance(data, bytes | bytearray | memoryview):
            if len(data) < self._settings.multipart_threshold:
                return self._put_single(key, full, bytes(data))
            data = io.BytesIO(data)
        head = _read_up_to(data, self._settings.multipart_threshold)
        if len(head) < self._settings.multipart_threshold:
            return self._put_single(key, full, head)
        return self._put_multipart(key, full, head, data)

    def _put_single(self, key: str, full: str, data: bytes) -> ObjectInfo:
        with self._errors(key, "put"):
            response = self._client.put_object(Bucket=self._bucket, Key=full, Body=data)
        return ObjectInfo(key, len(data), bare_etag(response))

    def _put_multipart(self, key: str, full: str, head: bytes, rest: BinaryIO) -> ObjectInfo:
        part_size = self._settings.part_size
        size = 0

        def upload_parts(upload_id: str) -> list[CompletedPartTypeDef]:
            nonlocal size
            parts: list[CompletedPartTypeDef] = []
            pending = io.BytesIO(head)
            while True:
                chunk = _read_up_to(pending, part_size)
                if len(chunk) < part_size:
                    chunk += _read_up_to(rest, part_size - len(chunk))
                if not chunk and parts:
                    return parts
                number = len(parts) + 1
                answer = self._client.upload_part(
                    Bucket=self._bucket, Key=full, UploadId=upload_id, PartNumber=number, Body=chunk
                )
                parts.append({"PartNumber": number, "ETag": answer["ETag"]})
                size += len(chunk)
                if len(chunk) < part_size:
                    return parts

        done = self._in_parts(key, full, upload_parts)
        return ObjectInfo(key, size, bare_etag(done))

    def compose(self, key: str, sources: list[str]) -> ObjectInfo:
        """Write at ``key`` the concatenation of the objects ``sources``, copied inside S3.

        One multipart upload whose parts are server-side copies (UploadPartCopy): no byte goes
        through this process. Every source but the last must hold at least 5 MiB (S3's smallest
        part) and at most 5 GiB; a failed upload is aborted.
        """
        full = self._key(key)

        def copy_parts(upload_id: str) -> list[CompletedPartTypeDef]:
            parts: list[CompletedPartTypeDef] = []
            for number, source in enumerate(sources, start=1):
                # a refused copy names its source, the object S3 could not read
                with self._errors(source, "put"):
                    answer = self._client.upload_part_copy(
                        Bucket=self._bucket,
                        Key=full,
                        UploadId=upload_id,
                        PartNumber=number,
                        CopySource={"Bucket": self._bucket, "Key": self._key(source)},
                    )
                parts.append({"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]})
            return parts

        self._in_parts(key, full, copy_parts)
        return self.head(key)

    def _in_parts(
        self, key: str, full: str, send: Callable[[str], list[CompletedPartTypeDef]]
    ) -> CompleteMultipartUploadOutputTypeDef:
        """Write ``full`` by one multipart upload whose parts ``send`` (given its ID) sends.

        A failed upload is aborted; S3's refusals name ``key``.
        """
        with self._errors(key, "put"):
            upload_id = self._client.create_multipart_upload(Bucket=self._bucket, Key=full)[
                "UploadId"
            ]
        try:
            parts = send(upload_id)
            return self._client.complete_multipart_upload(
                Bucket=self._bucket, Key=full, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except BaseException as exc:
            try:
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=full, UploadId=upload_id
                )
            except (ClientError, BotoCoreError):
                pass  # the bucket's lifecycle rule for incomplete uploads is the backstop
            if isinstance(exc, ClientError | BotoCoreError):
                raise self._error(exc, key, "put") from exc
            raise

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` unless an object is there (S3 conditional write).

        S3 answers 412 when an object exists, and 409 while another conditional write of the key
        is in flight (tried again). If a write succeeded but its answer was lost, botocore's retry
        finds the object and this returns ``False``: never an overwrite, and for
        content-addressed keys the object holds the same bytes either way.
        """
        full = self._key(key)
        for _ in range(_CONFLICT_TRIES):
            try:
                self._client.put_object(Bucket=self._bucket, Key=full, Body=data, IfNoneMatch="*")
                return True
            except ClientError as exc:
                code, status = error_code(exc)
                if status == 412 or code == "PreconditionFailed":
                    return False
                if status == 409 or code == "ConditionalRequestConflict":
                    # another conditional write on the key is in flight; its outcome decides
                    continue
                raise self._error(exc, key, "put") from exc
            except BotoCoreError as exc:
                raise self._error(exc, key, "put") from exc
        if self.exists(key):
            return False
        raise BlockUnavailableError(f"put s3://{self._bucket}/{full}: conditional write conflicts")

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``key`` by a ranged GET."""
        args = self._read_args(key, start, end)
        if args is None:
            return self._empty_read(key, start, self.head(key).size)
        try:
            body: bytes = self._client.get_object(**args)["Body"].read()
        except (ClientError, BotoCoreError) as exc:
            # S3 refuses every range of an empty object, even one that starts at 0
            if is_range_error(exc) and start == 0 and self.head(key).size == 0:
                return b""
            raise self._read_error(exc, key, start) from exc
        return body

    def _head(self, key: str) -> HeadObjectOutputTypeDef:
        with self._errors(key, "head"):
            return self._client.head_object(**self._object(key))

    def head(self, key: str) -> ObjectInfo:
        """Return size and etag of the object at ``key``."""
        return self._info(key, self._head(key))

    def storage_class(self, key: str) -> str | None:
        """Return the object's storage class as HEAD reports it (S3 omits ``STANDARD``).

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        found: str | None = self._head(key).get("StorageClass")
        return found

    def presign_put(self, key: str, expires: int) -> str:
        """Return a URL that lets its holder PUT the object at ``key`` for ``expires`` seconds."""
        url: str = self._client.generate_presigned_url(
            "put_object", Params=self._object(key), ExpiresIn=expires
        )
        return url

    def exists(self, key: str) -> bool:
        """Return whether ``key`` holds an object."""
        try:
            self.head(key)
        except BlockNotFoundError:
            return False
        return True

    def _pages(self, prefix: str, start_after: str = "") -> Iterator[ListObjectsV2OutputTypeDef]:
        """Yield the ``ListObjectsV2`` pages listing ``prefix`` after ``start_after``."""
        args = self._list_args(prefix, start_after)
        while True:
            with self._errors(prefix, "list"):
                page = self._client.list_objects_v2(**args)
            yield page
            if not self._next_page(args, page):
                return

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after``, paging through ListObjectsV2."""
        for page in self._pages(prefix, start_after):
            yield from self._listed(page)

    def list_detailed(self, prefix: str = "") -> Iterator[ListedObject]:
        """Yield objects under ``prefix`` in key order with their etags and modification times."""
        for page in self._pages(prefix):
            yield from self._listed_detailed(page)

    def delete(self, key: str) -> None:
        """Remove the object at ``key``; S3 deletes are idempotent."""
        full = self._key(key)
        try:
            self._client.delete_object(Bucket=self._bucket, Key=full)
        except (ClientError, BotoCoreError) as exc:
            err = self._error(exc, key, "delete")
            if isinstance(err, BlockNotFoundError):
                return
            raise err from exc

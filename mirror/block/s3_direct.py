"""The asynchronous store's GET requests, sent without botocore's per-request machinery.

A mirror's first sync is mostly GET requests: one per range file and one per listing page
(3,038 for 1,000,000 objects). Through aiobotocore each costs ~1.5 ms of client CPU besides its
bytes: the user-agent string built twice, the event hooks of every stage, the endpoint rules and
the response's headers parsed into a dictionary. Signed by botocore and sent by aiohttp, the same
request costs ~0.6 ms.

:class:`DirectGets` sends them so, on the happy path only. The URL of a bucket is the one
botocore's endpoint rules give (worked out once per bucket, with the signing context the rules
carry); each request is signed by the client's own request signer (its credentials, refreshed
as botocore refreshes them; its ``before-sign`` handlers run); only a ``200`` answer (``206``
to a ranged read) whose body arrived whole is taken. Each ``GetObject`` asks for the object's
checksum and checks it as botocore does (its ``response_checksum_validation``, its algorithms
in its order; a composite checksum of parts is not checked).

Anything else gives ``None`` (another status, a redirect, a transport error, a body cut short,
a timeout, a checksum that does not match), and the caller sends the same request through
botocore, which retries it, maps its error or answers it as it always did. A ``400``, a ``403``,
a redirect or an error of this module's own (such as a botocore release without the internals
used here) turns the direct path off for the client's life: botocore then sends every request.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
from botocore import httpchecksum
from botocore.awsrequest import AWSRequest
from yarl import URL

from mirror.block.s3_config import S3Settings

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client as AsyncS3Client

__all__ = ["DirectGets"]

_log = logging.getLogger(__name__)

# Answers that say the direct request itself is wrong (its signature, its addressing), not the
# object: botocore sends every request from then on.
_TURN_OFF = frozenset({301, 302, 307, 308, 400, 403})


class DirectGets:
    """Send GET requests of one aiobotocore S3 client through a session of aiohttp's own.

    Args:
        client: The aiobotocore client whose endpoint rules, signer and credentials are used.
        settings: Its settings (pool size and timeouts).
    """

    def __init__(self, client: AsyncS3Client, settings: S3Settings) -> None:
        self._client: Any = client
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None
        self._buckets: dict[str, _Bucket] = {}
        # whether botocore checks the checksum of an object's answer (its configuration's say)
        self._checks = (
            getattr(client.meta.config, "response_checksum_validation", "when_supported")
            == "when_supported"
        )
        self.enabled = True

    async def close(self) -> None:
        """Close the connections of the direct path."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(
        self,
        operation: str,
        bucket: str,
        key: str = "",
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> bytes | None:
        """Return the body of a ``200`` answer to GET ``key`` of ``bucket``, or ``None``.

        Args:
            operation: The S3 operation (``GetObject``, ``ListObjectsV2``): what is signed.
            bucket: The bucket.
            key: The object's key, or ``""`` for the bucket itself.
            query: The query string's parameters.
            headers: Request headers (such as ``Range``), signed with the rest.

        Returns:
            ``None`` when botocore must send the request instead.
        """
        if not self.enabled:
            return None
        try:
            checked = operation == "GetObject" and self._checks
            asked = {**(headers or {}), **({"x-amz-checksum-mode": "ENABLED"} if checked else {})}
            request = await self._signed(operation, bucket, key, query, asked)
            session = self._open()
            async with session.get(
                URL(str(request.url), encoded=True),
                headers=dict(request.headers.items()),
                allow_redirects=False,
            ) as response:
                body = await response.read()
                if response.status in _TURN_OFF:
                    self._turn_off(f"{operation} answered {response.status}")
                if response.status != 200 and not (response.status == 206 and headers):
                    return None
                if checked and not _checksum_matches(response.headers, body):
                    return None  # botocore reads it again and raises its checksum error
                return body
        except (TimeoutError, aiohttp.ClientError, OSError):
            return None  # botocore sends it again, and retries as configured
        except Exception as exc:  # botocore's internals changed: it answers from now on
            self._turn_off(f"{type(exc).__name__}: {exc}")
            return None

    def _turn_off(self, why: str) -> None:
        if self.enabled:
            _log.warning("direct S3 GET requests turned off, botocore sends them: %s", why)
        self.enabled = False

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._settings.max_pool_connections),
                timeout=aiohttp.ClientTimeout(
                    sock_connect=self._settings.connect_timeout,
                    sock_read=self._settings.read_timeout,
                ),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding"),
            )
        return self._session

    async def _bucket(self, bucket: str) -> _Bucket:
        """Return where ``bucket``'s requests go, as botocore's endpoint rules say (once)."""
        found = self._buckets.get(bucket)
        if found is None:
            model = self._client.meta.service_model.operation_model("GetObject")
            context: dict[str, Any] = {}
            url, headers, _ = await self._client._resolve_endpoint_ruleset(
                model, {"Bucket": bucket, "Key": "k"}, context
            )
            base = url.rstrip("/")
            # as botocore writes it: the bucket's own URL when it has a path (path style), else "/"
            found = _Bucket(
                f"{base}/", base if urlsplit(base).path else f"{base}/", dict(headers), context
            )
            self._buckets[bucket] = found
        return found

    async def _signed(
        self,
        operation: str,
        bucket: str,
        key: str,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> AWSRequest:
        where = await self._bucket(bucket)
        url = where.objects + quote(key, safe="/~") if key else where.itself
        if query:
            url += "?" + urlencode(sorted(query.items()), quote_via=quote, safe="~")
        request = AWSRequest(method="GET", url=url, headers={**where.headers, **(headers or {})})
        request.context = copy.deepcopy(where.context)
        await self._client._request_signer.sign(operation, request)
        return request


@dataclass(frozen=True, slots=True)
class _Bucket:
    """Where one bucket's requests go, and what its endpoint rules add to them."""

    objects: str
    """The URL its keys follow."""
    itself: str
    """The URL of the bucket (its listings)."""
    headers: dict[str, str]
    """Headers the rules ask for."""
    context: dict[str, Any]
    """The signing context the rules give (each request signs a copy)."""


def _checksum_matches(headers: Mapping[str, str], body: bytes) -> bool:
    """Check ``body`` against the first checksum of the answer botocore would check."""
    supported = httpchecksum._CHECKSUM_CLS  # type: ignore[attr-defined]
    for algorithm in httpchecksum._ALGORITHMS_PRIORITY_LIST:  # type: ignore[attr-defined]
        expected = headers.get(f"x-amz-checksum-{algorithm}")
        if expected is None or algorithm not in supported or "-" in expected:
            continue
        checksum = supported[algorithm]()
        checksum.update(body)
        return bool(checksum.b64digest() == expected)
    return True

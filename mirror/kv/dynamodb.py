"""The production KV driver: one DynamoDB table.

Table layout: a string partition key ``pk`` and a binary sort key ``sk``; the value is the binary
attribute ``v``. Every key of one store lives in one item collection, ``pk = partition`` (a fixed
string, so several LakeMirror deployments can share a table under different partitions), and the
sort key is ``b"k" + key``. DynamoDB orders binary sort keys bytewise, so a scan by key prefix is
one paginated ``Query`` in key order; the leading ``k`` lets the empty key be stored, since key
attributes may not be empty.

Limits of this layout:

- Throughput: one partition key value is served by as many physical partitions as DynamoDB
  splits it into by sort-key range under load ("split for heat"), but a sudden burst on one
  partition key is capped near 1,000 writes/s and 3,000 reads/s until it splits. That suits refs,
  commits and staging metadata of a deployment; a deployment outgrowing it runs several
  partitions (one per store).
- Sizes: a key may be at most 1,023 bytes (the sort key limit, less the leading byte); a key and
  value together at most about 400 KB (the item limit).
- ``set_many`` is not atomic: ``BatchWriteItem`` writes up to 25 items per request.

Conditional writes use condition expressions, so compare-and-swap is atomic in DynamoDB; a lost
condition reports the value found through ``ReturnValuesOnConditionCheckFailure``. A conditional
write whose answer is lost and that botocore retries finds its own value and fails with
:class:`~mirror.kv.errors.KVPreconditionFailedError`: it surfaces, it never overwrites. Throttling,
5xx answers and connection errors are retried by botocore with backoff and then raise
:class:`~mirror.kv.errors.KVUnavailableError`; so does a missing table, with a clear message.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from mirror.errors import InvalidValueError
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError, KVUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["DynamoKV", "DynamoSettings", "create_table", "make_dynamodb_client"]

_TAG = b"k"
_BATCH = 25
_MAX_KEY = 1023


@dataclass(frozen=True, slots=True)
class DynamoSettings:
    """Where the KV table is and how to reach it; ``None`` means AWS defaults.

    Attributes:
        table: Table name.
        partition: The partition key value holding this store's keys.
        endpoint_url: For moto, DynamoDB Local or other endpoints; ``None``: AWS.
        region: Region name; ``None``: from the environment or AWS config.
        access_key_id: Static credentials; ``None``: the default credential chain.
        secret_access_key: Secret of ``access_key_id``.
        session_token: Session token of temporary credentials.
        retry_mode: botocore retry mode (``standard`` or ``adaptive``).
        max_attempts: Attempts per request, first one included, on throttling and 5xx.
        page_size: Items asked for per ``Query`` page.
        batch_tries: Rounds of ``BatchWriteItem`` for items DynamoDB left unprocessed.
        max_pool_connections: HTTP connections the client keeps open.
    """

    table: str = "lakemirror"
    partition: str = "lakemirror"
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    retry_mode: Literal["standard", "adaptive"] = "standard"
    max_attempts: int = 8
    page_size: int = 1000
    batch_tries: int = 8
    max_pool_connections: int = 32

    def __post_init__(self) -> None:
        if not self.table or not self.partition:
            raise ValueError("table and partition must not be empty")
        if self.page_size < 1 or self.max_attempts < 1 or self.batch_tries < 1:
            raise ValueError("page_size, max_attempts and batch_tries must be at least 1")


def make_dynamodb_client(settings: DynamoSettings) -> DynamoDBClient:
    """Return a thread-safe boto3 DynamoDB client configured by ``settings``."""
    session = boto3.session.Session(
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        aws_session_token=settings.session_token,
        region_name=settings.region,
    )
    config = Config(
        retries={"mode": settings.retry_mode, "total_max_attempts": settings.max_attempts},
        max_pool_connections=settings.max_pool_connections,
    )
    return session.client("dynamodb", endpoint_url=settings.endpoint_url, config=config)


def create_table(settings: DynamoSettings, client: DynamoDBClient | None = None) -> bool:
    """Create the KV table (on-demand billing) and wait until it is active.

    Returns:
        ``True`` if the table was created, ``False`` if it already existed.

    Raises:
        KVUnavailableError: DynamoDB refused or could not be reached.
    """
    client = client or make_dynamodb_client(settings)
    created = True
    try:
        client.create_table(
            TableName=settings.table,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "B"},
            ],
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ResourceInUseException":
            raise KVUnavailableError(f"create table {settings.table!r}: {exc}") from exc
        created = False
    except BotoCoreError as exc:
        raise KVUnavailableError(f"create table {settings.table!r}: {exc}") from exc
    try:
        # replicas starting together find the table being created: poll it every second, not
        # every 20 (the waiter's default)
        client.get_waiter("table_exists").wait(
            TableName=settings.table, WaiterConfig={"Delay": 1, "MaxAttempts": 300}
        )
    except Exception as exc:
        raise KVUnavailableError(f"table {settings.table!r} did not become active: {exc}") from exc
    return created


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _prefix_end(prefix: bytes) -> bytes | None:
    """Return the smallest key greater than every key starting with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


class DynamoKV:
    """:class:`~mirror.kv.protocol.KV` over one partition of a DynamoDB table.

    Args:
        settings: Table, partition and connection settings.
        client: A client to share (boto3 clients are thread-safe); made from ``settings`` if
            omitted.
    """

    def __init__(self, settings: DynamoSettings, client: DynamoDBClient | None = None) -> None:
        self._settings = settings
        self._table = settings.table
        self._pk: dict[str, Any] = {"S": settings.partition}
        self._owns_client = client is None
        self._client = client or make_dynamodb_client(settings)
        # backoff jitter, no secret
        self._random = random.Random()  # nosec B311
        self._lock = threading.Lock()

    @property
    def settings(self) -> DynamoSettings:
        """Return the settings this store was opened with."""
        return self._settings

    def _item_key(self, key: bytes) -> dict[str, Any]:
        if len(key) > _MAX_KEY:
            raise InvalidValueError(f"key {key[:32]!r}... of {len(key)} bytes exceeds {_MAX_KEY}")
        return {"pk": self._pk, "sk": {"B": _TAG + key}}

    def _error(self, exc: Exception, action: str, key: bytes | None = None) -> KVUnavailableError:
        what = f"{action} {key!r}" if key is not None else action
        if isinstance(exc, ClientError) and _code(exc) == "ResourceNotFoundException":
            return KVUnavailableError(
                f"dynamodb {what}: table {self._table!r} is missing (run `lakemirror kv init`)"
            )
        return KVUnavailableError(f"dynamodb {self._table!r} {what}: {exc}")

    def check(self) -> None:
        """Verify the table exists and the credentials may read it.

        Raises:
            KVUnavailableError: the table is missing, access is refused or DynamoDB is unreachable.
        """
        try:
            self._client.describe_table(TableName=self._table)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "describe table") from exc

    def get(self, key: bytes) -> bytes:
        """Return the value of ``key`` by a strongly consistent read."""
        try:
            response = self._client.get_item(
                TableName=self._table, Key=self._item_key(key), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "get", key) from exc
        item = response.get("Item")
        if item is None:
            raise KeyNotFoundError(key)
        return bytes(item["v"]["B"])

    def _find(self, key: bytes) -> bytes | None:
        try:
            return self.get(key)
        except KeyNotFoundError:
            return None

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``."""
        item = {**self._item_key(key), "v": {"B": value}}
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "set", key) from exc

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store every pair, 25 per ``BatchWriteItem``, retrying unprocessed items."""
        self._batches(
            "set_many",
            ((k, {"PutRequest": {"Item": {**self._item_key(k), "v": {"B": v}}}}) for k, v in items),
        )

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Remove every key, 25 per ``BatchWriteItem``, retrying unprocessed items."""
        self._batches(
            "delete_many", ((k, {"DeleteRequest": {"Key": self._item_key(k)}}) for k in keys)
        )

    def _batches(self, action: str, requests: Iterable[tuple[bytes, Any]]) -> None:
        """Send ``(key, write request)`` pairs, ``_BATCH`` keys a request."""
        batch: dict[bytes, Any] = {}
        for key, request in requests:
            # one request may not name a key twice; the later write wins, as in a loop of calls
            batch.pop(key, None)
            batch[key] = request
            if len(batch) == _BATCH:
                self._write_batch(action, list(batch.values()))
                batch = {}
        if batch:
            self._write_batch(action, list(batch.values()))

    def _write_batch(self, action: str, requests: list[Any]) -> None:
        for attempt in range(self._settings.batch_tries):
            try:
                response = self._client.batch_write_item(RequestItems={self._table: requests})
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, action) from exc
            requests = list(response.get("UnprocessedItems", {}).get(self._table, []))
            if not requests:
                return
            self._backoff(attempt)
        raise KVUnavailableError(
            f"dynamodb {self._table!r} {action}: {len(requests)} items still unprocessed after "
            f"{self._settings.batch_tries} tries"
        )

    def _backoff(self, attempt: int) -> None:
        """Wait before another round of unprocessed items (full jitter, capped at 2 s)."""
        with self._lock:
            delay = self._random.uniform(0, min(2.0, 0.05 * (2**attempt)))
        threading.Event().wait(delay)

    def _conditional(self, key: bytes, expected: bytes | None, value: bytes | None) -> None:
        if expected is None:
            condition = "attribute_not_exists(sk)"
            names: dict[str, str] = {}
            values: dict[str, Any] = {}
        else:
            condition = "#v = :expected"
            names = {"#v": "v"}
            values = {":expected": {"B": expected}}
        args: dict[str, Any] = {
            "TableName": self._table,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if names:
            args["ExpressionAttributeNames"] = names
            args["ExpressionAttributeValues"] = values
        action = "set_if" if value is not None else "delete_if"
        try:
            if value is None:
                self._client.delete_item(Key=self._item_key(key), **args)
            else:
                self._client.put_item(Item={**self._item_key(key), "v": {"B": value}}, **args)
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._error(exc, action, key) from exc
            response: Any = exc.response
            if "Item" in response:
                found: bytes | None = bytes(response["Item"]["v"]["B"])
            else:
                # absent, or an endpoint that does not return the old item: read it
                found = self._find(key)
            raise KVPreconditionFailedError(key, expected, found) from None
        except BotoCoreError as exc:
            raise self._error(exc, action, key) from exc

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        """Store ``value`` if the current value equals ``expected`` (``None``: absent)."""
        self._conditional(key, expected, value)

    def delete(self, key: bytes) -> None:
        """Remove ``key`` if present."""
        try:
            self._client.delete_item(TableName=self._table, Key=self._item_key(key))
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "delete", key) from exc

    def delete_if(self, key: bytes, expected: bytes) -> None:
        """Remove ``key`` if it holds ``expected``."""
        self._conditional(key, expected, None)

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yield pairs under ``prefix`` from ``start`` on: one ``Query``, paged lazily."""
        end = _prefix_end(prefix)
        if start > prefix:
            if end is not None and start >= end:
                return
            condition = "pk = :pk AND sk >= :lo"
            values: dict[str, Any] = {":pk": self._pk, ":lo": {"B": _TAG + start}}
        else:
            condition = "pk = :pk AND begins_with(sk, :prefix)"
            values = {":pk": self._pk, ":prefix": {"B": _TAG + prefix}}
        args: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
            "ConsistentRead": True,
            "Limit": self._settings.page_size,
        }
        while True:
            try:
                page = self._client.query(**args)
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, "scan", prefix) from exc
            for item in page.get("Items", []):
                key = bytes(item["sk"]["B"])[len(_TAG) :]
                if not key.startswith(prefix):
                    return
                yield key, bytes(item["v"]["B"])
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            args["ExclusiveStartKey"] = last

    def close(self) -> None:
        """Release the client's connections, unless the client was passed in (shared)."""
        if self._owns_client:
            self._client.close()

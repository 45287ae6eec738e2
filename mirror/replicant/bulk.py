"""Bulk first syncs: a Spark job validates a huge commit the first time a mirror sees it.

A mirror's first validation has no base tree, so the async validator would check every object
(one listing per 1,000). Above ``replicant.bulk_threshold`` entries the worker hands that first
validation to :func:`mirror.spark.bulk_first_sync`: a local Spark job anti-joins the commit's
range files with a listing of the namespace, the ranges it finds whole join the validated set,
and the async validator checks only what is left. pyspark is imported, and the Spark session
started (about 20 s), only when the first such commit comes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio.to_thread

from mirror.block.errors import BlockNotFoundError
from mirror.block.protocol import BlockStore
from mirror.core.committed import METADATA_PREFIX, decode_metarange
from mirror.validator import ValidatedRanges, ValidationReport, Validator

__all__ = ["BulkFirstSync"]


def _local_session() -> Any:
    from mirror.spark.bulk_validator import local_spark_session

    return local_spark_session("lakemirror-replicant")


class BulkFirstSync:
    """Run first validations of commits above ``threshold`` entries as a Spark job.

    Args:
        threshold: Entries (objects) a commit must exceed to be validated in bulk.
        spark_factory: Returns the Spark session to use; a local one by default.
    """

    def __init__(self, threshold: int, spark_factory: Callable[[], Any] | None = None) -> None:
        self.threshold = threshold
        self._factory = spark_factory or _local_session
        self._spark: Any = None
        self._lock = asyncio.Lock()
        self.runs = 0

    async def entries(self, validator: Validator, metarange_id: str) -> int | None:
        """Return how many entries a metarange lists, or ``None`` if its file has not arrived."""
        try:
            data = await validator.reader.get(METADATA_PREFIX + metarange_id)
        except BlockNotFoundError:
            return None
        return sum(r.count for r in decode_metarange(data))

    async def validate(
        self,
        namespace: str,
        store: BlockStore,
        validated: ValidatedRanges,
        validator: Validator,
        metarange_id: str,
    ) -> ValidationReport | None:
        """Validate ``metarange_id`` in bulk if it is large enough.

        Returns ``None`` to leave it to ``validator``: too small, or its metarange file has not
        arrived yet.
        """
        entries = await self.entries(validator, metarange_id)
        if entries is None or entries <= self.threshold:
            return None
        from mirror.spark.bulk_validator import bulk_first_sync

        async with self._lock:
            if self._spark is None:
                self._spark = await anyio.to_thread.run_sync(self._factory)
        self.runs += 1
        return await bulk_first_sync(
            namespace,
            metarange_id,
            spark=self._spark,
            validated=validated,
            validator=validator,
            store=store,
        )

    def stop(self) -> None:
        """Stop the Spark session, if one was started."""
        if self._spark is not None:
            self._spark.stop()
            self._spark = None

"""The baseline existence check: read every range and ``HEAD`` every object, remembering nothing.

It is what a mirror would do without range-level caching, base-tree comparison or listings, and
what :class:`~mirror.validator.validator.Validator` is measured against (``bench.mirror``).
"""

from __future__ import annotations

from collections.abc import Callable
from sys import maxsize

from mirror.validator.caches import MemoryValidatedRanges
from mirror.validator.events import ValidationEvents
from mirror.validator.readers import AsyncObjectReader
from mirror.validator.run import ValidationReport
from mirror.validator.validator import Validator

__all__ = ["NaiveChecker"]


class NaiveChecker:
    """Check a tree by reading its metarange and every range, then one ``HEAD`` per object.

    Args:
        reader: Reads the destination namespace.
        concurrency: Requests in flight at most.
        events: Receives one call per request and object result.
        open_external: Opens a reader for objects with a full address (else they are missing).
    """

    def __init__(
        self,
        reader: AsyncObjectReader,
        *,
        concurrency: int = 32,
        events: ValidationEvents | None = None,
        open_external: Callable[[str], AsyncObjectReader] | None = None,
    ) -> None:
        self._reader = reader
        self._concurrency = concurrency
        self._events = events
        self._open_external = open_external

    async def check(self, metarange_id: str) -> ValidationReport:
        """Check every file of tree ``metarange_id``, with no cache from any earlier check.

        Raises:
            BlockUnavailableError: the destination failed transiently.
        """
        # a validator with nothing known and listings never worth it is exactly the naive walk
        fresh = Validator(
            self._reader,
            validated=MemoryValidatedRanges(),
            objects=None,
            events=self._events,
            concurrency=self._concurrency,
            list_threshold=maxsize,
            open_external=self._open_external,
        )
        return await fresh.validate(metarange_id)

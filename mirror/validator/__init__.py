"""Existence checking for transactional mirroring: metarange -> ranges -> data objects.

Start with :class:`Validator`: give it an :class:`AsyncObjectReader` of the destination namespace
(:class:`~mirror.block.s3_async.AsyncS3BlockStore`, or :class:`ThreadedObjectReader` over any
synchronous store), a set of :class:`ValidatedRanges` (persisted with
:class:`KVValidatedRanges`) and an :class:`ObjectCache`, then ``await validate(H, base)``.
"""

from mirror.validator.caches import (
    KVValidatedRanges,
    MemoryValidatedRanges,
    ObjectCache,
    RetainingRanges,
    ValidatedRanges,
)
from mirror.validator.events import CountingEvents, NullEvents, ValidationEvents
from mirror.validator.existence import split_full_address
from mirror.validator.naive import NaiveChecker
from mirror.validator.readers import (
    LIST_PAGE_SIZE,
    AsyncObjectReader,
    CountingReader,
    ThreadedObjectReader,
)
from mirror.validator.retention import RangeRetention
from mirror.validator.run import MISSING_SAMPLE_SIZE, ValidationReport
from mirror.validator.validator import Validator

__all__ = [
    "LIST_PAGE_SIZE",
    "MISSING_SAMPLE_SIZE",
    "AsyncObjectReader",
    "CountingEvents",
    "CountingReader",
    "KVValidatedRanges",
    "MemoryValidatedRanges",
    "NaiveChecker",
    "NullEvents",
    "ObjectCache",
    "RangeRetention",
    "RetainingRanges",
    "ThreadedObjectReader",
    "ValidatedRanges",
    "ValidationEvents",
    "ValidationReport",
    "Validator",
    "split_full_address",
]

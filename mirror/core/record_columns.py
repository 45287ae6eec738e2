"""New records given as columns: a range's worth of records without an entry object each.

An import lists objects as parallel lists (keys, addresses, sizes, checksums, mtimes). Building
an :class:`~mirror.core.model.Entry` per object, then its canonical encoding and identity one by
one, costs microseconds an object. :func:`rows_of_columns` instead turns such columns into a
:class:`~mirror.core.columnar.RangeData` directly: the Arrow table of range files, with each
record's identity hashed over slices of one encoding built for the whole batch. The tree writer
takes the result as runs of records (:meth:`~mirror.core.tree_writer.MetaRangeWriter.add_run`),
so range splits, IDs and files are exactly those of the same records added one by one.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mirror.core.columnar import RangeData, _int64s, _join, _maps, _offsets, _string_fields
from mirror.core.encoding import RANGE_FIELDS, RANGE_SCHEMA
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Entry

__all__ = ["rows_of_columns", "rows_of_records"]

_METADATA_TYPE = RANGE_FIELDS[7].type
_EMPTY = pa.scalar(b"", pa.binary())


def _repeated(value: str, n: int) -> pa.Array[Any]:
    return pa.array([value] * n, pa.string())


def rows_of_columns(
    keys: list[str],
    addresses: Sequence[str],
    sizes: Sequence[int],
    checksums: Sequence[str],
    mtimes: Sequence[int],
    *,
    content_types: Sequence[str] | str = DEFAULT_CONTENT_TYPE,
    address_types: Sequence[str] | str = AddressType.RELATIVE,
    metadata: Sequence[dict[str, str]] | None = None,
) -> RangeData:
    """Return the records ``keys[i]`` -> entry of the ``i``-th values, as range rows.

    ``keys`` must be sorted, unique and non-empty. A single ``content_types`` or
    ``address_types`` value is every record's; ``metadata`` ``None`` means none for any.
    The table and each record's identity are those :func:`~mirror.core.columnar.records_table`
    and :attr:`Entry.identity` give for the same entries.
    """
    n = len(keys)
    checksum = pa.array(checksums, pa.string())
    size = pa.array(sizes, pa.int64())
    content_type = (
        _repeated(content_types, n)
        if isinstance(content_types, str)
        else pa.array(content_types, pa.string())
    )
    address_type = (
        _repeated(str(address_types), n)
        if isinstance(address_types, str)
        else pa.array([str(t) for t in address_types], pa.string())
    )
    maps = pa.array(
        [[]] * n if metadata is None else [list(m.items()) for m in metadata], _METADATA_TYPE
    )
    table = pa.table(
        [
            pa.array(keys, pa.string()),
            pa.array(addresses, pa.string()),
            address_type,
            size,
            pa.array(mtimes, pa.int64()),
            checksum,
            content_type,
            maps,
            pa.array(_identities(size, checksum, maps, content_type), pa.string()),
        ],
        schema=RANGE_SCHEMA,
    )
    return RangeData(table, keys)


def _identities(size: Any, checksum: Any, maps: Any, content_type: Any) -> list[str]:
    """Return each record's identity: SHA-256 of its size, checksum, metadata, content type.

    The bytes are those :func:`~mirror.core.ids.entry_identity` hashes (an empty content type
    adds nothing), built for all records at once and hashed slice by slice.
    """
    if not len(size):
        return []
    fields = [_int64s(size.to_numpy(zero_copy_only=False)), *_string_fields(checksum)]
    fields.append(_maps(maps)[0])
    head, value = _string_fields(content_type)
    lengths = np.diff(_offsets(content_type))
    if not lengths.all():
        head = pc.if_else(pa.array(lengths == 0), _EMPTY, head)
    fields += [head, value]
    blob, starts = _join(fields)
    sha256 = hashlib.sha256
    bounds: list[int] = starts.tolist()
    return [sha256(blob[a:b]).hexdigest() for a, b in itertools.pairwise(bounds)]


def rows_of_records(records: Sequence[tuple[str, Entry]]) -> RangeData:
    """Return :func:`rows_of_columns` of ``(key, entry)`` records."""
    entries = [e for _, e in records]
    return rows_of_columns(
        [k for k, _ in records],
        [e.address for e in entries],
        [e.size for e in entries],
        [e.checksum for e in entries],
        [e.mtime for e in entries],
        content_types=[e.content_type for e in entries],
        address_types=[e.address_type for e in entries],
        metadata=[e.metadata for e in entries],
    )

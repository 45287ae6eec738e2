"""The Range header: any value reads as the whole object, a range inside it, or a refusal.

The target checks the bounds (see :mod:`tests.fuzz.targets.range_header`); here every range a
client can ask for reads back as asked, and numbers of any length only refuse or clamp.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mirror.httputil.streams import parse_range
from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import range_header


@fuzz_settings(100)
@given(
    st.integers(1, 10**12).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))),
    st.data(),
)
def test_ranges_inside_the_object_read_back(
    size_start: tuple[int, int], data: st.DataObject
) -> None:
    size, start = size_start
    end = data.draw(st.integers(start + 1, size))
    assert parse_range(f"bytes={start}-{end - 1}", size) == (start, end)
    assert parse_range(f"bytes={start}-", size) == (start, size)
    assert parse_range(f"bytes=-{size - start}", size) == (start, size)


numbers = st.one_of(
    st.integers(0, 10**30).map(str),
    # around the digits an int64 holds and the 4,300 int() reads
    st.sampled_from([18, 19, 20, 4300, 4301, 10000]).map(lambda n: "9" * n),
    st.just(""),
    st.text(max_size=6),
)


@fuzz_settings(100)
@given(
    st.integers(0, 10**15), numbers, numbers, st.sampled_from(["bytes=", "bytes =", "", "BYTES="])
)
def test_numbers_of_any_length_clamp_or_refuse(size: int, first: str, last: str, unit: str) -> None:
    range_header.check(range_header.frame(size, f"{unit}{first}-{last}"))

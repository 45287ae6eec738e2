"""Hypothesis's side of the fuzz targets: the settings of the short run, and mutated seeds.

:func:`mutated` is a small mutation engine in the manner of libFuzzer's (byte flips, cuts,
insertions of random bytes or of the target's tokens, repeats, splices of two seeds), driven by
Hypothesis so that the short run is reproducible and a failure shrinks to a small input.
"""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.fuzz.harness import seeds
from tests.fuzz.tokens import COMMON, TOKENS

__all__ = ["SCALE", "fuzz_settings", "mutated"]

SCALE = int(os.environ.get("LAKEMIRROR_FUZZ_SCALE", "1"))
"""Multiplies every fuzz test's examples: ``LAKEMIRROR_FUZZ_SCALE=100`` for a long run."""


def fuzz_settings(examples: int) -> settings:
    """Return the short run's settings: ``examples`` (times :data:`SCALE`), derandomized.

    Derandomized and without an example database, every run draws the same examples.
    """
    return settings(
        max_examples=examples * SCALE,
        # a parse takes milliseconds: five seconds is a hang, not a slow machine
        deadline=timedelta(seconds=5),
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@st.composite
def mutated(draw: st.DrawFn, target: str) -> bytes:
    """Draw a seed of ``target`` and apply one to four mutations to it."""
    corpus = [data for _, data in seeds(target)]
    tokens = TOKENS[target] + COMMON
    data = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(("flip", "cut", "bytes", "token", "repeat", "splice")))
        if kind == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif kind == "bytes":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "token":
            data[at:at] = draw(st.sampled_from(tokens))
        elif kind == "repeat":
            piece = bytes(data[at : at + draw(st.integers(1, 32))])
            data[at:at] = piece * draw(st.integers(1, 16))
        else:
            other = draw(st.sampled_from(corpus))
            data[at:] = other[draw(st.integers(0, len(other))) :]
    return bytes(data)

"""Parse and check the values of process commands' options (seconds, ``MIN:MAX`` intervals)."""

from __future__ import annotations

import math

from mirror.errors import InvalidValueError

__all__ = ["UsageError", "parse_interval", "parse_seconds"]


class UsageError(InvalidValueError):
    """An argument is invalid: the message is the line to print."""


def parse_seconds(option: str, text: str, *, positive: bool = False) -> float:
    """Parse a finite, non-negative number of seconds (``positive``: above zero).

    Raises:
        UsageError: ``text`` is not such a number; the message names ``option``.
    """
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a number of seconds") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "positive" if positive else "zero or more"
        raise UsageError(f"{option} {text!r}: must be a finite number {bound}")
    return value


def parse_interval(option: str, text: str) -> tuple[float, float]:
    """Parse ``MIN:MAX`` (or one number, for both) into seconds.

    Raises:
        UsageError: a bound is not a number of seconds, or MIN exceeds MAX.
    """
    low_text, sep, high_text = text.partition(":")
    low = parse_seconds(option, low_text)
    high = parse_seconds(option, high_text) if sep else low
    if low > high:
        raise UsageError(f"{option} {text!r}: MIN must not exceed MAX")
    return low, high

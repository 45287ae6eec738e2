"""Parse and check the values of process commands' options: seconds, intervals, namespaces."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mirror.block.errors import InvalidNamespaceError
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from mirror.block.protocol import BlockStore
    from mirror.block.resolver import BlockResolver
    from mirror.config import LakeMirrorConfig

__all__ = [
    "UsageError",
    "namespace_resolver",
    "open_namespace",
    "parse_interval",
    "parse_seconds",
]


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


def namespace_resolver(config: LakeMirrorConfig, uri: str, option: str) -> BlockResolver:
    """Return a resolver that serves the namespace ``uri`` as ``lakemirror server`` would.

    ``local://`` namespaces are taken under the configured local root; ``s3://`` ones use the
    configured S3 settings.

    Raises:
        UsageError: the URI is malformed, of another scheme, or names ``s3://`` without the
            ``s3`` extra; the message names ``option``.
    """
    from mirror.block.resolver import BlockResolver, split_namespace

    try:
        scheme, _ = split_namespace(uri)
    except InvalidNamespaceError as exc:
        raise UsageError(f"{option}: {exc}") from None
    if scheme not in ("local", "s3"):
        raise UsageError(f"{option} {uri!r}: use a local:///abs/path or s3://bucket/prefix URI")
    resolver = BlockResolver(config.local_root().resolve())
    if scheme == "s3":
        try:
            from mirror.cli.server import register_s3
        except ImportError as exc:
            raise UsageError(f"{option} {uri!r}: s3:// needs the s3 extra: {exc}") from None
        if not register_s3(resolver, config):
            raise UsageError(
                f"{option} {uri!r}: s3:// needs the s3 extra (pip install 'lakemirror[s3]')"
            )
    return resolver


def open_namespace(resolver: BlockResolver, uri: str, option: str) -> BlockStore:
    """Open the namespace ``uri`` with ``resolver``.

    Raises:
        UsageError: the resolver refuses the URI; the message names ``option``.
    """
    try:
        return resolver.open(uri)
    except InvalidNamespaceError as exc:
        raise UsageError(f"{option}: {exc}") from None

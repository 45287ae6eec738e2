"""Errors of the audit trail, under the shared tree."""

from __future__ import annotations

from mirror.errors import InvalidValueError

__all__ = ["InvalidAuditQueryError"]


class InvalidAuditQueryError(InvalidValueError):
    """A filter of an audit listing is malformed; the message names it and what to use."""

"""The CLI's errors and the exit codes scripts can rely on (documented in ``docs/cli.md``)."""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "AuthError",
    "CLIError",
    "ConflictError",
    "ExitCode",
    "NotFoundError",
    "RejectedError",
    "UnavailableError",
    "UsageError",
]


class ExitCode(IntEnum):
    """The process exit codes of ``lakemirror``'s client commands."""

    OK = 0
    ERROR = 1
    USAGE = 2
    AUTH = 3
    NOT_FOUND = 4
    CONFLICT = 5
    REJECTED = 6
    UNAVAILABLE = 7
    INTERRUPTED = 130


class CLIError(Exception):
    """An error that ends a command with one line on stderr and an exit code.

    Attributes:
        message: The line to print (never a secret).
        status: The HTTP status the server answered, when the error came from it.
    """

    code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class UsageError(CLIError):
    """Bad arguments, an invalid ``lakefs://`` URI, or a missing or malformed configuration."""

    code = ExitCode.USAGE


class AuthError(CLIError):
    """The server refused the credentials (401) or the permission (403)."""

    code = ExitCode.AUTH


class NotFoundError(CLIError):
    """A repository, ref, object or local source path does not exist (404)."""

    code = ExitCode.NOT_FOUND


class ConflictError(CLIError):
    """The target already exists, a merge conflicts, or a precondition failed (409, 412)."""

    code = ExitCode.CONFLICT


class RejectedError(CLIError):
    """The server refused the request as invalid: no changes, dirty branch, bad value (400)."""

    code = ExitCode.REJECTED


class UnavailableError(CLIError):
    """The server cannot be reached, timed out, or answered 503 or 429 (retry later)."""

    code = ExitCode.UNAVAILABLE

"""What a client command runs with: its configuration, its server client and its output."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from typing import BinaryIO, TextIO

from mirror.cli.output import Output
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig, load_config
from mirror.client.errors import CLIError, UsageError

__all__ = ["Command", "Context", "parse_metadata"]


class Context:
    """The environment of one client command; the server client is opened on first use."""

    def __init__(
        self,
        *,
        config_path: str | None,
        output: str,
        stdin: TextIO,
        stdout: TextIO,
        stderr: TextIO,
        environ: Mapping[str, str],
    ) -> None:
        self.config_path = config_path
        self.environ = environ
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.output = Output(output, stdout)
        self._client: LakeFSClient | None = None

    @property
    def config(self) -> ClientConfig:
        """Return the configuration (file, then ``LAKECTL_*`` variables)."""
        return load_config(self.config_path, self.environ)

    @property
    def client(self) -> LakeFSClient:
        """Return the server client, opening it on first use."""
        if self._client is None:
            self._client = LakeFSClient(self.config)
        return self._client

    @property
    def binary_stdout(self) -> BinaryIO:
        """Return standard output for bytes."""
        return self.stdout.buffer

    def close(self) -> None:
        """Close the server client if it was opened."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def confirm(self, question: str, assume_yes: bool) -> None:
        """Ask ``question`` on a terminal unless ``assume_yes``; without a terminal, go ahead.

        Raises:
            CLIError: the answer was not yes.
        """
        if assume_yes or not self.stdin.isatty():
            return
        self.stderr.write(f"{question} [y/N] ")
        self.stderr.flush()
        answer = self.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise CLIError("aborted")


Command = Callable[[argparse.Namespace, Context], int]


def parse_metadata(pairs: Iterable[str] | None) -> dict[str, str]:
    """Return ``key=value`` arguments as a mapping.

    Raises:
        UsageError: an argument has no ``=`` or an empty key.
    """
    metadata: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"metadata {pair!r}: use key=value")
        metadata[key] = value
    return metadata

"""The fuzz targets' registry and their corpus, shared by the pytest run and the long run.

A target is a module of :mod:`tests.fuzz.targets` with ``check(data: bytes) -> str | None``: it
feeds ``data`` to one parser and returns ``None`` when the parser accepted it, or the name of the
documented refusal it raised (``"S3Error:MalformedXML"``, ``"InvalidRefError"``, ...). Any other
exception, or a wrong answer to one of the target's own properties (a round trip that does not
come back), propagates: that is a finding.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Protocol, cast

__all__ = ["CORPUS", "FUZZ_NOW", "TARGETS", "Target", "load", "seeds"]

CORPUS = Path(__file__).parent / "corpus"
"""One directory per target: the seeds, ``ok-*`` (accepted) and ``bad-*`` (refused) inputs."""

FUZZ_NOW = 1714564800.0
"""2024-05-01T12:00:00Z: the time the corpus's requests were signed, and the targets' clock."""

TARGETS = (
    "sigv4",
    "sigv2",
    "aws_chunked",
    "delete_objects",
    "complete_multipart",
    "ref_expr",
    "protection_glob",
    "actions_glob",
    "action_file",
    "range_header",
)
"""The targets, each a module of :mod:`tests.fuzz.targets` and a directory of the corpus."""


class Target(Protocol):
    """What a target module holds."""

    def check(self, data: bytes) -> str | None:
        """Feed ``data`` to the parser; return ``None`` (accepted) or the refusal's name."""
        ...


def load(name: str) -> Target:
    """Return the target module ``name``."""
    if name not in TARGETS:
        raise KeyError(f"unknown fuzz target {name!r}: one of {', '.join(TARGETS)}")
    module: ModuleType = importlib.import_module(f"tests.fuzz.targets.{name}")
    return cast(Target, module)


def seeds(name: str) -> list[tuple[str, bytes]]:
    """Return the corpus of target ``name`` as ``(file name, bytes)``, sorted by name."""
    folder = CORPUS / name
    return [(p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()]

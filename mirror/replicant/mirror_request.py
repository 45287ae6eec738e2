"""A request to mirror a repository: what the configuration API's body asks of the replicant."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MirrorRequest"]


@dataclass(frozen=True, slots=True)
class MirrorRequest:
    """A request to mirror ``source_repo`` (the configuration API's body)."""

    name: str
    region: str
    storage_namespace: str
    """May be empty when adopting (``existing``): the repository's own namespace is used."""
    source_region: str | None = None
    branches: tuple[str, ...] = ("*",)
    tags: bool = True
    existing: bool = False
    """Adopt the existing local repository ``name`` instead of creating one."""
    preserve_diverged: bool = False
    """When adopting, keep diverged branch heads on preserved branches instead of refusing."""

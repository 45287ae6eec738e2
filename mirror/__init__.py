"""LakeMirror: a lakeFS-compatible versioning server with transactional cross-region mirroring."""

__version__ = "0.1.0"

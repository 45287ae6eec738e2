"""The lakeFS-compatible HTTP API: ``/api/v1`` with HTTP Basic auth and lakeFS policies."""

from mirror.api.app import API_PREFIX, LAKEFS_COMPATIBLE_VERSION, create_app
from mirror.api.errors import status_for
from mirror.auth.store import AuthStore

__all__ = ["API_PREFIX", "LAKEFS_COMPATIBLE_VERSION", "AuthStore", "create_app", "status_for"]

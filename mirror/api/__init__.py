"""The lakeFS-compatible HTTP API: ``/api/v1`` with HTTP Basic auth and lakeFS policies."""

from mirror.api.app import API_PREFIX, LAKEFS_COMPATIBLE_VERSION, create_app
from mirror.auth.store import AuthStore
from mirror.httputil.errors import status_for

__all__ = ["API_PREFIX", "LAKEFS_COMPATIBLE_VERSION", "AuthStore", "create_app", "status_for"]

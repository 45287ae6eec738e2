"""The authenticated principal of a request, and its authorization checks.

Every front door (the REST API, the S3 gateway, the replicant's API) signs a request in by its
own protocol and hands the result to the same :class:`Caller`.
"""

from __future__ import annotations

from mirror.auth.errors import PermissionDeniedError
from mirror.auth.model import Policy, User
from mirror.auth.permissions import Permission
from mirror.auth.policy import is_allowed
from mirror.auth.store import AuthStore

__all__ = ["Caller"]


class Caller:
    """The authenticated user of a request, and its authorization checks.

    Args:
        auth: The auth store the user signed in with.
        user: The user.
        policies: The user's effective policies, when signing in read them already.
    """

    def __init__(
        self, auth: AuthStore, user: User, policies: tuple[Policy, ...] | None = None
    ) -> None:
        self.auth = auth
        self.user = user
        self._policies = policies

    @property
    def id(self) -> str:
        """Return the user's ID."""
        return self.user.id

    @property
    def policies_known(self) -> bool:
        """Return whether :meth:`require` is a computation only (no KV read)."""
        return self._policies is not None

    def allows(self, permission: Permission) -> bool:
        """Return whether the user's policies allow ``permission`` (no error when they do not)."""
        if self._policies is None:
            self._policies = self.auth.effective_policies(self.user.id)
        return is_allowed(self._policies, [permission], self.user.id)

    def require(self, *permissions: Permission) -> None:
        """Return if the user's policies allow every permission.

        Raises:
            PermissionDeniedError: some permission is not granted; the message names it.
        """
        if self._policies is None:
            self._policies = self.auth.effective_policies(self.user.id)
        for p in permissions:
            if not is_allowed(self._policies, [p], self.user.id):
                raise PermissionDeniedError(
                    f"insufficient permissions: user {self.user.id!r} may not {p.action} "
                    f"on {p.resource}"
                )

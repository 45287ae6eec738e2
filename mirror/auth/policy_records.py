"""Policies of the auth store, their attachments to users and groups, and what they allow."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from mirror.auth.acl import is_acl_policy_name
from mirror.auth.errors import (
    InvalidAuthValueError,
    PolicyAttachmentNotFoundError,
    PolicyExistsError,
    PolicyNotFoundError,
    UserNotFoundError,
)
from mirror.auth.model import Policy, Statement
from mirror.auth.permissions import Permission
from mirror.auth.policy import is_allowed
from mirror.auth.principals import PrincipalRecords
from mirror.auth.records import ID_PATTERN, changes, check_id, encode, record_key
from mirror.kv.errors import KVPreconditionFailedError

__all__ = ["PolicyRecords"]


class PolicyRecords(PrincipalRecords):
    """The auth store's policies, attached to users and groups; effective policies, cached."""

    @changes
    def create_policy(self, policy: Policy) -> Policy:
        """Create a policy.

        Raises:
            InvalidAuthValueError: malformed ID or no statements.
            PolicyExistsError: the ID is taken.
        """
        check_id("policy", policy.id)
        if not policy.statements:
            raise InvalidAuthValueError(f"policy {policy.id!r} has no statements")
        try:
            self.kv.set_if(record_key("policies", policy.id), encode(policy.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise PolicyExistsError(f"policy {policy.id!r} already exists") from exc
        return policy

    @changes
    def update_policy(self, policy_id: str, statements: Sequence[Statement]) -> Policy:
        """Replace the statements of a policy.

        Raises:
            PolicyNotFoundError: no such policy.
            InvalidAuthValueError: no statements.
        """
        old = self.get_policy(policy_id)
        if not statements:
            raise InvalidAuthValueError(f"policy {policy_id!r} has no statements")
        new = Policy(policy_id, old.creation_date, tuple(statements))
        self.kv.set(record_key("policies", policy_id), encode(new.to_dict()))
        return new

    def get_policy(self, policy_id: str) -> Policy:
        """Return a policy.

        Raises:
            PolicyNotFoundError: no such policy.
        """
        well_formed = ID_PATTERN.fullmatch(policy_id) or is_acl_policy_name(policy_id)
        record = self._get(record_key("policies", policy_id)) if well_formed else None
        if record is None:
            raise PolicyNotFoundError(f"policy {policy_id!r} not found")
        return Policy.from_dict(record)

    def list_policies(self, prefix: str = "", after: str = "") -> Iterator[Policy]:
        """Yield policies in ID order."""
        return (Policy.from_dict(r) for r in self._records("policies", prefix, after))

    @changes
    def delete_policy(self, policy_id: str) -> None:
        """Delete a policy and detach it from every user and group.

        Raises:
            PolicyNotFoundError: no such policy.
        """
        self.get_policy(policy_id)
        self.kv.delete(record_key("policies", policy_id))
        for user_id in list(self._ids("policy-users", policy_id)):
            self.kv.delete(record_key("user-policies", user_id, policy_id))
            self.kv.delete(record_key("policy-users", policy_id, user_id))
        for group_id in list(self._ids("policy-groups", policy_id)):
            self.kv.delete(record_key("group-policies", group_id, policy_id))
            self.kv.delete(record_key("policy-groups", policy_id, group_id))

    @changes
    def attach_user_policy(self, user_id: str, policy_id: str) -> None:
        """Attach a policy to a user.

        Raises:
            UserNotFoundError, PolicyNotFoundError.
        """
        self.get_user(user_id)
        self.get_policy(policy_id)
        self.kv.set(record_key("user-policies", user_id, policy_id), b"")
        self.kv.set(record_key("policy-users", policy_id, user_id), b"")

    @changes
    def detach_user_policy(self, user_id: str, policy_id: str) -> None:
        """Detach a policy from a user.

        Raises:
            UserNotFoundError, PolicyAttachmentNotFoundError.
        """
        self.get_user(user_id)
        if not self._exists(record_key("user-policies", user_id, policy_id)):
            raise PolicyAttachmentNotFoundError(
                f"policy {policy_id!r} is not attached to user {user_id!r}"
            )
        self.kv.delete(record_key("user-policies", user_id, policy_id))
        self.kv.delete(record_key("policy-users", policy_id, user_id))

    @changes
    def attach_group_policy(self, group_id: str, policy_id: str) -> None:
        """Attach a policy to a group.

        Raises:
            GroupNotFoundError, PolicyNotFoundError.
        """
        self.get_group(group_id)
        self.get_policy(policy_id)
        self.kv.set(record_key("group-policies", group_id, policy_id), b"")
        self.kv.set(record_key("policy-groups", policy_id, group_id), b"")

    @changes
    def detach_group_policy(self, group_id: str, policy_id: str) -> None:
        """Detach a policy from a group.

        Raises:
            GroupNotFoundError, PolicyAttachmentNotFoundError.
        """
        self.get_group(group_id)
        if not self._exists(record_key("group-policies", group_id, policy_id)):
            raise PolicyAttachmentNotFoundError(
                f"policy {policy_id!r} is not attached to group {group_id!r}"
            )
        self.kv.delete(record_key("group-policies", group_id, policy_id))
        self.kv.delete(record_key("policy-groups", policy_id, group_id))

    def _policies(self, policy_ids: Iterable[str]) -> Iterator[Policy]:
        for policy_id in policy_ids:
            record = self._get(record_key("policies", policy_id))
            if record is not None:
                yield Policy.from_dict(record)

    def list_user_policies(
        self, user_id: str, *, effective: bool = False, prefix: str = "", after: str = ""
    ) -> Iterator[Policy]:
        """Yield the policies attached to a user (``effective``: also through its groups).

        Raises:
            UserNotFoundError: no such user.
        """
        self.get_user(user_id)
        ids = set(self._ids("user-policies", user_id))
        if effective:
            for group_id in self._ids("user-groups", user_id):
                ids.update(self._ids("group-policies", group_id))
        wanted = sorted(i for i in ids if i.startswith(prefix) and (not after or i > after))
        return self._policies(wanted)

    def list_group_policies(
        self, group_id: str, prefix: str = "", after: str = ""
    ) -> Iterator[Policy]:
        """Yield the policies attached to a group in ID order.

        Raises:
            GroupNotFoundError: no such group.
        """
        self.get_group(group_id)
        return self._policies(
            list(self._ids("group-policies", group_id, prefix=prefix, after=after))
        )

    def effective_policies(self, user_id: str) -> tuple[Policy, ...]:
        """Return the policies of a user and of its groups (none for an unknown user)."""
        return self._effective_policies(user_id, self._cache.generation())

    def _effective_policies(self, user_id: str, generation: bytes) -> tuple[Policy, ...]:
        def load() -> tuple[Policy, ...] | None:
            try:
                return tuple(self.list_user_policies(user_id, effective=True))
            except UserNotFoundError:
                return None

        return self._cache.fetch("policies", user_id, generation, load) or ()

    def is_allowed(self, user_id: str, permissions: Iterable[Permission]) -> bool:
        """Return whether the user's effective policies allow every permission."""
        policies = self.effective_policies(user_id)
        return bool(policies) and is_allowed(policies, permissions, user_id)

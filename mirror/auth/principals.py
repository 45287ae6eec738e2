"""Users and groups of the auth store, and which users belong to which groups."""

from __future__ import annotations

from collections.abc import Iterator

from mirror.auth.errors import (
    GroupExistsError,
    GroupNotFoundError,
    MembershipNotFoundError,
    UserExistsError,
    UserNotFoundError,
)
from mirror.auth.model import Group, User
from mirror.auth.records import (
    ID_PATTERN,
    AuthRecords,
    changes,
    check_email,
    check_id,
    encode,
    record_key,
)
from mirror.kv.errors import KVPreconditionFailedError

__all__ = ["PrincipalRecords"]


class PrincipalRecords(AuthRecords):
    """The auth store's users, groups and memberships (a user's access keys go with it)."""

    # users

    @changes
    def create_user(
        self, user_id: str, friendly_name: str | None = None, email: str | None = None
    ) -> User:
        """Create a user.

        Raises:
            InvalidAuthValueError: malformed ID or e-mail address.
            UserExistsError: the ID is taken.
        """
        check_id("user", user_id)
        if email is not None:
            check_email(email)
        user = User(user_id, self.now(), friendly_name, email)
        try:
            self.kv.set_if(record_key("users", user_id), encode(user.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise UserExistsError(f"user {user_id!r} already exists") from exc
        return user

    def get_user(self, user_id: str) -> User:
        """Return a user.

        Raises:
            UserNotFoundError: no such user.
        """
        record = self._get(record_key("users", user_id)) if ID_PATTERN.fullmatch(user_id) else None
        if record is None:
            raise UserNotFoundError(f"user {user_id!r} not found")
        return User.from_dict(record)

    def list_users(self, prefix: str = "", after: str = "") -> Iterator[User]:
        """Yield users in ID order."""
        return (User.from_dict(r) for r in self._records("users", prefix, after))

    @changes
    def delete_user(self, user_id: str) -> None:
        """Delete a user with its access keys, memberships and policy attachments.

        Raises:
            UserNotFoundError: no such user.
        """
        self.get_user(user_id)
        self.kv.delete(record_key("users", user_id))
        for key_id in list(self._ids("user-credentials", user_id)):
            self._drop_credentials(user_id, key_id)
        for group_id in list(self._ids("user-groups", user_id)):
            self.kv.delete(record_key("group-members", group_id, user_id))
            self.kv.delete(record_key("user-groups", user_id, group_id))
        for policy_id in list(self._ids("user-policies", user_id)):
            self.kv.delete(record_key("policy-users", policy_id, user_id))
            self.kv.delete(record_key("user-policies", user_id, policy_id))

    # groups

    @changes
    def create_group(self, group_id: str, description: str | None = None) -> Group:
        """Create a group.

        Raises:
            InvalidAuthValueError: malformed ID.
            GroupExistsError: the ID is taken.
        """
        group = Group(check_id("group", group_id), self.now(), description)
        try:
            self.kv.set_if(record_key("groups", group_id), encode(group.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise GroupExistsError(f"group {group_id!r} already exists") from exc
        return group

    def get_group(self, group_id: str) -> Group:
        """Return a group.

        Raises:
            GroupNotFoundError: no such group.
        """
        record = (
            self._get(record_key("groups", group_id)) if ID_PATTERN.fullmatch(group_id) else None
        )
        if record is None:
            raise GroupNotFoundError(f"group {group_id!r} not found")
        return Group.from_dict(record)

    def list_groups(self, prefix: str = "", after: str = "") -> Iterator[Group]:
        """Yield groups in ID order."""
        return (Group.from_dict(r) for r in self._records("groups", prefix, after))

    @changes
    def delete_group(self, group_id: str) -> None:
        """Delete a group with its memberships and policy attachments.

        Raises:
            GroupNotFoundError: no such group.
        """
        self.get_group(group_id)
        self.kv.delete(record_key("groups", group_id))
        for user_id in list(self._ids("group-members", group_id)):
            self.kv.delete(record_key("user-groups", user_id, group_id))
            self.kv.delete(record_key("group-members", group_id, user_id))
        for policy_id in list(self._ids("group-policies", group_id)):
            self.kv.delete(record_key("policy-groups", policy_id, group_id))
            self.kv.delete(record_key("group-policies", group_id, policy_id))

    @changes
    def add_member(self, group_id: str, user_id: str) -> None:
        """Add a user to a group (adding a member again is not an error).

        Raises:
            GroupNotFoundError, UserNotFoundError.
        """
        self.get_group(group_id)
        self.get_user(user_id)
        self.kv.set(record_key("group-members", group_id, user_id), b"")
        self.kv.set(record_key("user-groups", user_id, group_id), b"")

    @changes
    def remove_member(self, group_id: str, user_id: str) -> None:
        """Remove a user from a group.

        Raises:
            GroupNotFoundError, MembershipNotFoundError.
        """
        self.get_group(group_id)
        if not self._exists(record_key("group-members", group_id, user_id)):
            raise MembershipNotFoundError(f"user {user_id!r} is not a member of {group_id!r}")
        self.kv.delete(record_key("group-members", group_id, user_id))
        self.kv.delete(record_key("user-groups", user_id, group_id))

    def list_members(self, group_id: str, prefix: str = "", after: str = "") -> Iterator[User]:
        """Yield the members of a group in ID order.

        Raises:
            GroupNotFoundError: no such group.
        """
        self.get_group(group_id)
        for user_id in self._ids("group-members", group_id, prefix=prefix, after=after):
            record = self._get(record_key("users", user_id))
            if record is not None:
                yield User.from_dict(record)

    def list_user_group_ids(self, user_id: str) -> list[str]:
        """Return the IDs of the groups a user belongs to, in order."""
        return list(self._ids("user-groups", user_id))

    def list_user_groups(self, user_id: str, prefix: str = "", after: str = "") -> Iterator[Group]:
        """Yield the groups of a user in ID order.

        Raises:
            UserNotFoundError: no such user.
        """
        self.get_user(user_id)
        for group_id in self._ids("user-groups", user_id, prefix=prefix, after=after):
            record = self._get(record_key("groups", group_id))
            if record is not None:
                yield Group.from_dict(record)

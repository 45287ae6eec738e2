"""Users, access keys, groups and policies in the KV, under the ``auth/`` prefix.

Layout (every ID is free of ``/``):

- ``auth/users/<user>``, ``auth/groups/<group>``, ``auth/policies/<policy>``: the records.
- ``auth/credentials/<key>``: an access key with its owner and the scrypt hash of its secret.
- ``auth/user-credentials/<user>/<key>``, ``auth/group-members/<group>/<user>``,
  ``auth/user-groups/<user>/<group>``, ``auth/user-policies/<user>/<policy>``,
  ``auth/group-policies/<group>/<policy>``, ``auth/policy-users/<policy>/<user>``,
  ``auth/policy-groups/<policy>/<group>``: empty index records, both directions.
- ``auth/setup``: present once the installation has its first administrator.

Secrets are never stored: only salted hashes. A successful verification is remembered in memory
(keyed by a per-process HMAC of the secret) so that scrypt runs once per key, not per request.

Several processes share the records. What a request needs (the key, its user, the user's
effective policies) is cached per process under the KV's auth generation (:mod:`.cache`): each
change renews the generation, each request reads it once, so a change made through any process
applies to every request that starts after it was acknowledged.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from mirror.api.auth.builtin import ADMINS, BUILTIN_GROUPS, BUILTIN_POLICIES
from mirror.api.auth.cache import AUTH_CACHE_SIZE, AUTH_CACHE_TTL_SECONDS, AuthCache
from mirror.api.auth.errors import (
    AuthenticationError,
    CredentialsNotFoundError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidAuthValueError,
    MembershipNotFoundError,
    PolicyAttachmentNotFoundError,
    PolicyExistsError,
    PolicyNotFoundError,
    SetupDoneError,
    UserExistsError,
    UserNotFoundError,
)
from mirror.api.auth.hashing import (
    hash_secret,
    new_access_key_id,
    new_secret_access_key,
    verify_secret,
)
from mirror.api.auth.model import Credential, Group, NewCredential, Policy, Statement, User
from mirror.api.auth.permissions import Permission
from mirror.api.auth.policy import is_allowed
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["AUTH_CHANGE_BOUND_SECONDS", "AuthStore", "SignedIn"]

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=,:-]{0,127}")
_KEY_ID = re.compile(r"[A-Za-z0-9_.+=@-]{3,128}")
_ROOT = "auth/"
_SETUP = b"auth/setup"
_VERIFIED_MAX = 10_000

AUTH_CHANGE_BOUND_SECONDS = 0.0
"""How long an auth change acknowledged by one process may go unseen by requests to another.

None at all: caches are checked against the auth generation on every request.
"""

P = ParamSpec("P")
R = TypeVar("R")


def _check_id(kind: str, value: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidAuthValueError(
            f"invalid {kind} ID {value!r}: use 1-128 of letters, digits and _.@+=,:- "
            "starting with a letter, digit or '_'"
        )
    return value


def _check_key_id(value: str) -> str:
    if not isinstance(value, str) or not _KEY_ID.fullmatch(value):
        raise InvalidAuthValueError(
            f"invalid access key ID {value!r}: use 3-128 of letters, digits and _.+=@-"
        )
    return value


def _key(*parts: str) -> bytes:
    return (_ROOT + "/".join(parts)).encode()


def _encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(data)
    return record


def _changes(
    method: Callable[Concatenate[AuthStore, P], R],
) -> Callable[Concatenate[AuthStore, P], R]:
    """Renew the auth generation once ``method`` is done writing (once for nested changes)."""

    @functools.wraps(method)
    def change(self: AuthStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        local = self._changing
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            if depth == 0:
                # part of the change may be written: announce it, keeping the first error
                try:
                    self._cache.renew()
                except Exception:
                    pass
            raise
        finally:
            local.depth = depth
        if depth == 0:
            self._cache.renew()
        return result

    return change


@dataclass(frozen=True, slots=True)
class SignedIn:
    """An authenticated user and its effective policies, as of one auth generation."""

    user: User
    policies: tuple[Policy, ...]


class AuthStore:
    """The auth records of one installation, kept in a KV store.

    Args:
        kv: The store (shared with the versioning core; everything lives under ``auth/``).
        clock: Returns the current time in seconds.
        cache_ttl: Seconds a cached record serves at most while the auth generation stands
            (``0``: no cache).
        cache_size: Records cached at most.
    """

    def __init__(
        self,
        kv: KV,
        clock: Callable[[], float] = time.time,
        *,
        cache_ttl: float = AUTH_CACHE_TTL_SECONDS,
        cache_size: int = AUTH_CACHE_SIZE,
    ) -> None:
        self.kv = kv
        self._clock = clock
        self._process_key = secrets.token_bytes(32)
        self._verified: dict[str, tuple[str, bytes]] = {}
        self._lock = threading.Lock()
        self._cache = AuthCache(kv, ttl=cache_ttl, size=cache_size)
        self._changing = threading.local()

    def now(self) -> int:
        """Return the current time in whole seconds, by the store's clock."""
        return int(self._clock())

    # plumbing

    def _get(self, key: bytes) -> dict[str, Any] | None:
        try:
            return _decode(self.kv.get(key))
        except KeyNotFoundError:
            return None

    def _exists(self, key: bytes) -> bool:
        try:
            self.kv.get(key)
        except KeyNotFoundError:
            return False
        return True

    def _ids(self, *parts: str, prefix: str = "", after: str = "") -> Iterator[str]:
        base = _key(*parts) + b"/"
        start = base + after.encode() + b"\x00" if after else b""
        for key, _ in self.kv.scan(base + prefix.encode(), start):
            yield key[len(base) :].decode()

    def _records(self, kind: str, prefix: str, after: str) -> Iterator[dict[str, Any]]:
        base = _key(kind) + b"/"
        start = base + after.encode() + b"\x00" if after else b""
        for _, value in self.kv.scan(base + prefix.encode(), start):
            yield _decode(value)

    # installation

    @_changes
    def ensure_builtins(self) -> None:
        """Create the built-in policies and groups that are missing (idempotent)."""
        now = self.now()
        for policy_id, statements in BUILTIN_POLICIES.items():
            try:
                self.create_policy(Policy(policy_id, now, statements))
            except PolicyExistsError:
                pass
        for group_id, policy_ids in BUILTIN_GROUPS.items():
            try:
                self.create_group(group_id)
            except GroupExistsError:
                continue
            for policy_id in policy_ids:
                self.attach_group_policy(group_id, policy_id)

    def is_initialized(self) -> bool:
        """Return whether the installation has its first administrator."""
        return self._exists(_SETUP)

    @_changes
    def setup(
        self, user_id: str, access_key_id: str | None = None, secret: str | None = None
    ) -> NewCredential:
        """Create the first administrator (a member of Admins) with one access key.

        Raises:
            SetupDoneError: the installation is already set up.
        """
        _check_id("user", user_id)
        if access_key_id is not None:
            _check_key_id(access_key_id)
        self.ensure_builtins()
        try:
            self.kv.set_if(_SETUP, _encode({"creation_date": self.now()}), None)
        except KVPreconditionFailedError as exc:
            raise SetupDoneError("the installation is already set up") from exc
        try:
            self.create_user(user_id)
        except UserExistsError:
            pass
        self.add_member(ADMINS, user_id)
        return self.create_credentials(user_id, access_key_id, secret)

    @_changes
    def bootstrap_admin(self, user_id: str, access_key_id: str, secret: str) -> bool:
        """Make sure ``access_key_id``/``secret`` sign in as administrator ``user_id``.

        The user, its Admins membership and the key are created when missing; a key whose
        stored hash does not match ``secret`` gets the new hash. Returns whether anything
        was created or changed.

        Raises:
            InvalidAuthValueError: the key belongs to another user, or an ID is malformed.
        """
        _check_id("user", user_id)
        _check_key_id(access_key_id)
        if not secret:
            raise InvalidAuthValueError("the administrator's secret access key is empty")
        self.ensure_builtins()
        changed = False
        try:
            self.create_user(user_id)
            changed = True
        except UserExistsError:
            pass
        if ADMINS not in self.list_user_group_ids(user_id):
            self.add_member(ADMINS, user_id)
            changed = True
        record = self._get(_key("credentials", access_key_id))
        if record is None:
            try:
                self.create_credentials(user_id, access_key_id, secret)
                changed = True
            except InvalidAuthValueError:
                # replicas starting together on a fresh KV race to create the same key: the
                # loser checks what the winner wrote like any existing key
                record = self._get(_key("credentials", access_key_id))
                if record is None:
                    raise
        if record is not None:
            cred = Credential.from_dict(record)
            if cred.user_id != user_id:
                raise InvalidAuthValueError(
                    f"access key {access_key_id!r} belongs to user {cred.user_id!r}"
                )
            if not verify_secret(secret, cred.secret_hash):
                updated = Credential(
                    access_key_id, user_id, cred.creation_date, hash_secret(secret)
                )
                self.kv.set(_key("credentials", access_key_id), _encode(updated.to_dict()))
                changed = True
        if not self.is_initialized():
            try:
                self.kv.set_if(_SETUP, _encode({"creation_date": self.now()}), None)
            except KVPreconditionFailedError:
                pass
            changed = True
        return changed

    # users

    @_changes
    def create_user(
        self, user_id: str, friendly_name: str | None = None, email: str | None = None
    ) -> User:
        """Create a user.

        Raises:
            InvalidAuthValueError: malformed ID.
            UserExistsError: the ID is taken.
        """
        user = User(_check_id("user", user_id), self.now(), friendly_name, email)
        try:
            self.kv.set_if(_key("users", user_id), _encode(user.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise UserExistsError(f"user {user_id!r} already exists") from exc
        return user

    def get_user(self, user_id: str) -> User:
        """Return a user.

        Raises:
            UserNotFoundError: no such user.
        """
        record = self._get(_key("users", user_id)) if _ID.fullmatch(user_id) else None
        if record is None:
            raise UserNotFoundError(f"user {user_id!r} not found")
        return User.from_dict(record)

    def list_users(self, prefix: str = "", after: str = "") -> Iterator[User]:
        """Yield users in ID order."""
        return (User.from_dict(r) for r in self._records("users", prefix, after))

    @_changes
    def delete_user(self, user_id: str) -> None:
        """Delete a user with its access keys, memberships and policy attachments.

        Raises:
            UserNotFoundError: no such user.
        """
        self.get_user(user_id)
        self.kv.delete(_key("users", user_id))
        for key_id in list(self._ids("user-credentials", user_id)):
            self._drop_credentials(user_id, key_id)
        for group_id in list(self._ids("user-groups", user_id)):
            self.kv.delete(_key("group-members", group_id, user_id))
            self.kv.delete(_key("user-groups", user_id, group_id))
        for policy_id in list(self._ids("user-policies", user_id)):
            self.kv.delete(_key("policy-users", policy_id, user_id))
            self.kv.delete(_key("user-policies", user_id, policy_id))

    # credentials

    @_changes
    def create_credentials(
        self, user_id: str, access_key_id: str | None = None, secret: str | None = None
    ) -> NewCredential:
        """Create an access key for a user; the returned secret is never available again.

        Raises:
            UserNotFoundError: no such user.
            InvalidAuthValueError: the key ID is malformed or taken.
        """
        self.get_user(user_id)
        key_id = _check_key_id(access_key_id) if access_key_id else new_access_key_id()
        plain = secret or new_secret_access_key()
        cred = Credential(key_id, user_id, self.now(), hash_secret(plain))
        try:
            self.kv.set_if(_key("credentials", key_id), _encode(cred.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise InvalidAuthValueError(f"access key {key_id!r} is taken") from exc
        self.kv.set(_key("user-credentials", user_id, key_id), b"")
        return NewCredential(key_id, plain, user_id, cred.creation_date)

    def get_credentials(self, user_id: str, access_key_id: str) -> Credential:
        """Return a user's access key (without any secret).

        Raises:
            CredentialsNotFoundError: the user has no such key.
        """
        record = self._get(_key("credentials", access_key_id))
        if record is None or record["user_id"] != user_id:
            raise CredentialsNotFoundError(
                f"access key {access_key_id!r} of user {user_id!r} not found"
            )
        return Credential.from_dict(record)

    def list_credentials(
        self, user_id: str, prefix: str = "", after: str = ""
    ) -> Iterator[Credential]:
        """Yield a user's access keys in key order.

        Raises:
            UserNotFoundError: no such user.
        """
        self.get_user(user_id)
        for key_id in self._ids("user-credentials", user_id, prefix=prefix, after=after):
            record = self._get(_key("credentials", key_id))
            if record is not None:
                yield Credential.from_dict(record)

    @_changes
    def delete_credentials(self, user_id: str, access_key_id: str) -> None:
        """Delete a user's access key.

        Raises:
            CredentialsNotFoundError: the user has no such key.
        """
        self.get_credentials(user_id, access_key_id)
        self._drop_credentials(user_id, access_key_id)

    def _drop_credentials(self, user_id: str, access_key_id: str) -> None:
        self.kv.delete(_key("credentials", access_key_id))
        self.kv.delete(_key("user-credentials", user_id, access_key_id))
        with self._lock:
            self._verified.pop(access_key_id, None)

    def _digest(self, secret: str) -> bytes:
        return hmac.new(self._process_key, secret.encode(), hashlib.sha256).digest()

    def authenticate(self, access_key_id: str, secret: str) -> User:
        """Return the user an access key and secret sign in as.

        Raises:
            AuthenticationError: unknown key, wrong secret, or the user is gone.
        """
        return self._authenticate(access_key_id, secret, self._cache.generation())

    def sign_in(self, access_key_id: str, secret: str) -> SignedIn:
        """Return the user an access key and secret sign in as, with its effective policies.

        Raises:
            AuthenticationError: unknown key, wrong secret, or the user is gone.
        """
        generation = self._cache.generation()
        user = self._authenticate(access_key_id, secret, generation)
        return SignedIn(user, self._effective_policies(user.id, generation))

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

    def _authenticate(self, access_key_id: str, secret: str, generation: bytes) -> User:
        failed = AuthenticationError("error authenticating request: invalid credentials")
        if not _KEY_ID.fullmatch(access_key_id):
            raise failed

        def load_credential() -> Credential | None:
            record = self._get(_key("credentials", access_key_id))
            return None if record is None else Credential.from_dict(record)

        cred = self._cache.fetch("credential", access_key_id, generation, load_credential)
        if cred is None:
            raise failed
        digest = self._digest(secret)
        with self._lock:
            known = self._verified.get(access_key_id)
        if (
            known is None
            or known[0] != cred.secret_hash
            or not hmac.compare_digest(known[1], digest)
        ):
            if not verify_secret(secret, cred.secret_hash):
                raise failed
            with self._lock:
                if len(self._verified) >= _VERIFIED_MAX:
                    self._verified.clear()
                self._verified[access_key_id] = (cred.secret_hash, digest)

        def load_user() -> User | None:
            record = self._get(_key("users", cred.user_id))
            return None if record is None else User.from_dict(record)

        user = self._cache.fetch("user", cred.user_id, generation, load_user)
        if user is None:
            raise failed
        return user

    # groups

    @_changes
    def create_group(self, group_id: str, description: str | None = None) -> Group:
        """Create a group.

        Raises:
            InvalidAuthValueError: malformed ID.
            GroupExistsError: the ID is taken.
        """
        group = Group(_check_id("group", group_id), self.now(), description)
        try:
            self.kv.set_if(_key("groups", group_id), _encode(group.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise GroupExistsError(f"group {group_id!r} already exists") from exc
        return group

    def get_group(self, group_id: str) -> Group:
        """Return a group.

        Raises:
            GroupNotFoundError: no such group.
        """
        record = self._get(_key("groups", group_id)) if _ID.fullmatch(group_id) else None
        if record is None:
            raise GroupNotFoundError(f"group {group_id!r} not found")
        return Group.from_dict(record)

    def list_groups(self, prefix: str = "", after: str = "") -> Iterator[Group]:
        """Yield groups in ID order."""
        return (Group.from_dict(r) for r in self._records("groups", prefix, after))

    @_changes
    def delete_group(self, group_id: str) -> None:
        """Delete a group with its memberships and policy attachments.

        Raises:
            GroupNotFoundError: no such group.
        """
        self.get_group(group_id)
        self.kv.delete(_key("groups", group_id))
        for user_id in list(self._ids("group-members", group_id)):
            self.kv.delete(_key("user-groups", user_id, group_id))
            self.kv.delete(_key("group-members", group_id, user_id))
        for policy_id in list(self._ids("group-policies", group_id)):
            self.kv.delete(_key("policy-groups", policy_id, group_id))
            self.kv.delete(_key("group-policies", group_id, policy_id))

    @_changes
    def add_member(self, group_id: str, user_id: str) -> None:
        """Add a user to a group (adding a member again is not an error).

        Raises:
            GroupNotFoundError, UserNotFoundError.
        """
        self.get_group(group_id)
        self.get_user(user_id)
        self.kv.set(_key("group-members", group_id, user_id), b"")
        self.kv.set(_key("user-groups", user_id, group_id), b"")

    @_changes
    def remove_member(self, group_id: str, user_id: str) -> None:
        """Remove a user from a group.

        Raises:
            GroupNotFoundError, MembershipNotFoundError.
        """
        self.get_group(group_id)
        if not self._exists(_key("group-members", group_id, user_id)):
            raise MembershipNotFoundError(f"user {user_id!r} is not a member of {group_id!r}")
        self.kv.delete(_key("group-members", group_id, user_id))
        self.kv.delete(_key("user-groups", user_id, group_id))

    def list_members(self, group_id: str, prefix: str = "", after: str = "") -> Iterator[User]:
        """Yield the members of a group in ID order.

        Raises:
            GroupNotFoundError: no such group.
        """
        self.get_group(group_id)
        for user_id in self._ids("group-members", group_id, prefix=prefix, after=after):
            record = self._get(_key("users", user_id))
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
            record = self._get(_key("groups", group_id))
            if record is not None:
                yield Group.from_dict(record)

    # policies

    @_changes
    def create_policy(self, policy: Policy) -> Policy:
        """Create a policy.

        Raises:
            InvalidAuthValueError: malformed ID or no statements.
            PolicyExistsError: the ID is taken.
        """
        _check_id("policy", policy.id)
        if not policy.statements:
            raise InvalidAuthValueError(f"policy {policy.id!r} has no statements")
        try:
            self.kv.set_if(_key("policies", policy.id), _encode(policy.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise PolicyExistsError(f"policy {policy.id!r} already exists") from exc
        return policy

    @_changes
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
        self.kv.set(_key("policies", policy_id), _encode(new.to_dict()))
        return new

    def get_policy(self, policy_id: str) -> Policy:
        """Return a policy.

        Raises:
            PolicyNotFoundError: no such policy.
        """
        record = self._get(_key("policies", policy_id)) if _ID.fullmatch(policy_id) else None
        if record is None:
            raise PolicyNotFoundError(f"policy {policy_id!r} not found")
        return Policy.from_dict(record)

    def list_policies(self, prefix: str = "", after: str = "") -> Iterator[Policy]:
        """Yield policies in ID order."""
        return (Policy.from_dict(r) for r in self._records("policies", prefix, after))

    @_changes
    def delete_policy(self, policy_id: str) -> None:
        """Delete a policy and detach it from every user and group.

        Raises:
            PolicyNotFoundError: no such policy.
        """
        self.get_policy(policy_id)
        self.kv.delete(_key("policies", policy_id))
        for user_id in list(self._ids("policy-users", policy_id)):
            self.kv.delete(_key("user-policies", user_id, policy_id))
            self.kv.delete(_key("policy-users", policy_id, user_id))
        for group_id in list(self._ids("policy-groups", policy_id)):
            self.kv.delete(_key("group-policies", group_id, policy_id))
            self.kv.delete(_key("policy-groups", policy_id, group_id))

    @_changes
    def attach_user_policy(self, user_id: str, policy_id: str) -> None:
        """Attach a policy to a user.

        Raises:
            UserNotFoundError, PolicyNotFoundError.
        """
        self.get_user(user_id)
        self.get_policy(policy_id)
        self.kv.set(_key("user-policies", user_id, policy_id), b"")
        self.kv.set(_key("policy-users", policy_id, user_id), b"")

    @_changes
    def detach_user_policy(self, user_id: str, policy_id: str) -> None:
        """Detach a policy from a user.

        Raises:
            UserNotFoundError, PolicyAttachmentNotFoundError.
        """
        self.get_user(user_id)
        if not self._exists(_key("user-policies", user_id, policy_id)):
            raise PolicyAttachmentNotFoundError(
                f"policy {policy_id!r} is not attached to user {user_id!r}"
            )
        self.kv.delete(_key("user-policies", user_id, policy_id))
        self.kv.delete(_key("policy-users", policy_id, user_id))

    @_changes
    def attach_group_policy(self, group_id: str, policy_id: str) -> None:
        """Attach a policy to a group.

        Raises:
            GroupNotFoundError, PolicyNotFoundError.
        """
        self.get_group(group_id)
        self.get_policy(policy_id)
        self.kv.set(_key("group-policies", group_id, policy_id), b"")
        self.kv.set(_key("policy-groups", policy_id, group_id), b"")

    @_changes
    def detach_group_policy(self, group_id: str, policy_id: str) -> None:
        """Detach a policy from a group.

        Raises:
            GroupNotFoundError, PolicyAttachmentNotFoundError.
        """
        self.get_group(group_id)
        if not self._exists(_key("group-policies", group_id, policy_id)):
            raise PolicyAttachmentNotFoundError(
                f"policy {policy_id!r} is not attached to group {group_id!r}"
            )
        self.kv.delete(_key("group-policies", group_id, policy_id))
        self.kv.delete(_key("policy-groups", policy_id, group_id))

    def _policies(self, policy_ids: Iterable[str]) -> Iterator[Policy]:
        for policy_id in policy_ids:
            record = self._get(_key("policies", policy_id))
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

    def is_allowed(self, user_id: str, permissions: Iterable[Permission]) -> bool:
        """Return whether the user's effective policies allow every permission."""
        policies = self.effective_policies(user_id)
        return bool(policies) and is_allowed(policies, permissions, user_id)

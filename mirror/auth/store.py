"""Users, access keys, groups and policies in the KV, under the ``auth/`` prefix.

:class:`AuthStore` is built in layers, one module each: :mod:`.records` (the KV layout, the
encoding and what a process keeps), :mod:`.principals` (users, groups and memberships),
:mod:`.policy_records` (policies and their attachments), :mod:`.acl_records` (groups' ACLs,
kept as derived policies), :mod:`.credentials` (access keys, signing in, and the secrets the
S3 gateway verifies signatures with, sealed by :mod:`.secrets`), and this module (setting an
installation up).

Several processes share the records. What a request needs (the key, its user, the user's
effective policies) is cached per process under the KV's auth generation (:mod:`.cache`): each
change renews the generation, each request reads it once, so a change made through any process
applies to every request that starts after it was acknowledged.
"""

from __future__ import annotations

from mirror.auth.acl_records import AclRecords
from mirror.auth.builtin import ADMINS, BUILTIN_GROUPS, BUILTIN_POLICIES
from mirror.auth.credentials import CredentialRecords, SignedIn, SigningKey
from mirror.auth.errors import (
    GroupExistsError,
    InvalidAuthValueError,
    PolicyExistsError,
    SetupDoneError,
    UserExistsError,
)
from mirror.auth.hashing import hash_secret, verify_secret
from mirror.auth.model import Credential, NewCredential, Policy
from mirror.auth.records import changes, check_id, check_key_id, encode, record_key
from mirror.auth.throttle import SignInThrottle
from mirror.kv.errors import KVPreconditionFailedError

__all__ = ["AUTH_CHANGE_BOUND_SECONDS", "AuthStore", "SignedIn", "SigningKey"]

_SETUP = b"auth/setup"

AUTH_CHANGE_BOUND_SECONDS = 0.0
"""How long an auth change acknowledged by one process may go unseen by requests to another.

None at all: caches are checked against the auth generation on every request.
"""


class AuthStore(CredentialRecords, AclRecords):
    """The auth records of one installation, kept in a KV store.

    Args:
        kv: The store (shared with the versioning core; everything lives under ``auth/``).
        clock: Returns the current time in seconds.
        cache_ttl: Seconds a cached record serves at most while the auth generation stands
            (``0``: no cache).
        cache_size: Records cached at most.
        cipher: Seals secret access keys for the S3 gateway (:mod:`.secrets`); ``None``: keys
            are only hashed, and the gateway refuses them.
    """

    throttle: SignInThrottle | None = None
    """The failed sign-ins this process counts, which every front door consults before it
    checks a secret (:mod:`.throttle`); ``None``: none are refused."""

    # installation

    @changes
    def ensure_builtins(self) -> None:
        """Create the built-in policies and groups that are missing (idempotent).

        A built-in policy that a release adds is attached to the existing built-in groups that
        list it, once, when it is created; a policy an administrator detached later stays
        detached.
        """
        now = self.now()
        added: set[str] = set()
        for policy_id, statements in BUILTIN_POLICIES.items():
            try:
                self.create_policy(Policy(policy_id, now, statements))
            except PolicyExistsError:
                continue
            added.add(policy_id)
        for group_id, policy_ids in BUILTIN_GROUPS.items():
            try:
                self.create_group(group_id)
            except GroupExistsError:
                policy_ids = tuple(p for p in policy_ids if p in added)
            for policy_id in policy_ids:
                self.attach_group_policy(group_id, policy_id)

    def is_initialized(self) -> bool:
        """Return whether the installation has its first administrator."""
        return self._exists(_SETUP)

    @changes
    def setup(
        self, user_id: str, access_key_id: str | None = None, secret: str | None = None
    ) -> NewCredential:
        """Create the first administrator (a member of Admins) with one access key.

        Raises:
            SetupDoneError: the installation is already set up.
        """
        check_id("user", user_id)
        if access_key_id is not None:
            check_key_id(access_key_id)
        self.ensure_builtins()
        try:
            self.kv.set_if(_SETUP, encode({"creation_date": self.now()}), None)
        except KVPreconditionFailedError as exc:
            raise SetupDoneError("the installation is already set up") from exc
        try:
            self.create_user(user_id)
        except UserExistsError:
            pass
        self.add_member(ADMINS, user_id)
        return self.create_credentials(user_id, access_key_id, secret)

    @changes
    def bootstrap_admin(self, user_id: str, access_key_id: str, secret: str) -> bool:
        """Make sure ``access_key_id``/``secret`` sign in as administrator ``user_id``.

        The user, its Admins membership and the key are created when missing; a key whose
        stored hash does not match ``secret`` gets the new hash. Returns whether anything
        was created or changed. A key stored without its sealed secret gets it.

        Raises:
            InvalidAuthValueError: the key belongs to another user, or an ID is malformed.
        """
        check_id("user", user_id)
        check_key_id(access_key_id)
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
        record = self._get(record_key("credentials", access_key_id))
        if record is None:
            try:
                self.create_credentials(user_id, access_key_id, secret)
                changed = True
            except InvalidAuthValueError:
                # replicas starting together on a fresh KV race to create the same key: the
                # loser checks what the winner wrote like any existing key
                record = self._get(record_key("credentials", access_key_id))
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
                    access_key_id,
                    user_id,
                    cred.creation_date,
                    hash_secret(secret),
                    self._seal(access_key_id, secret),
                )
                self.kv.set(record_key("credentials", access_key_id), encode(updated.to_dict()))
                changed = True
            elif self.cipher is not None and not self._opens(access_key_id, cred.encrypted_secret):
                self._store_sealed(cred, secret)
                changed = True
        if not self.is_initialized():
            try:
                self.kv.set_if(_SETUP, encode({"creation_date": self.now()}), None)
            except KVPreconditionFailedError:
                pass
            changed = True
        return changed

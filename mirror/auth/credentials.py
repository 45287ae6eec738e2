"""Access keys of the auth store and signing in with them.

A secret is stored twice, never in the clear: as a salted hash, which the REST API signs in
with, and sealed with the configured key (:mod:`.secrets`), which the S3 gateway opens to
recompute signatures. A successful verification is remembered in memory (keyed by a per-process
HMAC of the secret) so that scrypt runs once per key, not per request.

Keys stored before secrets were sealed have only the hash. The first REST sign-in with such a
key, the plain secret then being known, adds the sealed secret to the record by compare-and-swap;
until then the gateway refuses the key and says why.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from dataclasses import dataclass, field

from mirror.auth.errors import (
    AuthenticationError,
    CredentialsNotFoundError,
    InvalidAuthValueError,
    SecretKeyMismatchError,
    SecretNotStoredError,
)
from mirror.auth.hashing import (
    hash_secret,
    new_access_key_id,
    new_secret_access_key,
    verify_secret,
)
from mirror.auth.model import Credential, NewCredential, Policy, User
from mirror.auth.policy_records import PolicyRecords
from mirror.auth.records import (
    KEY_ID_PATTERN,
    changes,
    check_key_id,
    decode,
    encode,
    record_key,
)
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError

__all__ = ["CredentialRecords", "SignedIn", "SigningKey"]

_VERIFIED_MAX = 10_000
_SEAL_TRIES = 5


@dataclass(frozen=True, slots=True)
class SignedIn:
    """An authenticated user and its effective policies, as of one auth generation."""

    user: User
    policies: tuple[Policy, ...]


@dataclass(frozen=True, slots=True)
class SigningKey:
    """What verifying a request signed with an access key needs: its secret, user and policies."""

    user: User
    policies: tuple[Policy, ...]
    secret: str = field(repr=False)


def _failed() -> AuthenticationError:
    return AuthenticationError("error authenticating request: invalid credentials")


class CredentialRecords(PolicyRecords):
    """The auth store's access keys, and who a key and secret sign in as."""

    @changes
    def create_credentials(
        self, user_id: str, access_key_id: str | None = None, secret: str | None = None
    ) -> NewCredential:
        """Create an access key for a user; the returned secret is never available again.

        Raises:
            UserNotFoundError: no such user.
            InvalidAuthValueError: the key ID is malformed or taken.
        """
        self.get_user(user_id)
        key_id = check_key_id(access_key_id) if access_key_id else new_access_key_id()
        plain = secret or new_secret_access_key()
        cred = Credential(
            key_id, user_id, self.now(), hash_secret(plain), self._seal(key_id, plain)
        )
        try:
            self.kv.set_if(record_key("credentials", key_id), encode(cred.to_dict()), None)
        except KVPreconditionFailedError as exc:
            raise InvalidAuthValueError(f"access key {key_id!r} is taken") from exc
        self.kv.set(record_key("user-credentials", user_id, key_id), b"")
        return NewCredential(key_id, plain, user_id, cred.creation_date)

    def get_credentials(self, user_id: str, access_key_id: str) -> Credential:
        """Return a user's access key (without any secret).

        Raises:
            CredentialsNotFoundError: the user has no such key.
        """
        record = self._get(record_key("credentials", access_key_id))
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
            record = self._get(record_key("credentials", key_id))
            if record is not None:
                yield Credential.from_dict(record)

    @changes
    def delete_credentials(self, user_id: str, access_key_id: str) -> None:
        """Delete a user's access key.

        Raises:
            CredentialsNotFoundError: the user has no such key.
        """
        self.get_credentials(user_id, access_key_id)
        self._drop_credentials(user_id, access_key_id)

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

    def sign_in_remembered(self, access_key_id: str, secret: str) -> SignedIn | None:
        """Return :meth:`sign_in`'s answer when it needs no scrypt run, else ``None``.

        The answer is :meth:`sign_in`'s, as of the current auth generation, when this process
        remembers verifying this secret for the key as it stands; ``None`` says the secret must
        be verified first (:meth:`sign_in` does it). Without scrypt a sign-in is a few KV reads,
        cheap enough to run on the event loop when the KV is local.

        Raises:
            AuthenticationError: unknown key, wrong secret, or the user is gone.
        """
        generation = self._cache.generation()
        cred = self._credential(access_key_id, generation)
        if not self._remembers(cred, secret):
            return None
        user = self._user(cred, generation)
        return SignedIn(user, self._effective_policies(user.id, generation))

    def _authenticate(self, access_key_id: str, secret: str, generation: bytes) -> User:
        cred = self._credential(access_key_id, generation)
        if not self._remembers(cred, secret):
            if not verify_secret(secret, cred.secret_hash):
                raise _failed()
            self._store_sealed(cred, secret)
            with self._lock:
                if len(self._verified) >= _VERIFIED_MAX:
                    self._verified.clear()
                self._verified[cred.access_key_id] = (cred.secret_hash, self._digest(secret))
        return self._user(cred, generation)

    def _credential(self, access_key_id: str, generation: bytes) -> Credential:
        if not KEY_ID_PATTERN.fullmatch(access_key_id):
            raise _failed()

        def load_credential() -> Credential | None:
            record = self._get(record_key("credentials", access_key_id))
            return None if record is None else Credential.from_dict(record)

        cred = self._cache.fetch("credential", access_key_id, generation, load_credential)
        if cred is None:
            raise _failed()
        return cred

    def _remembers(self, cred: Credential, secret: str) -> bool:
        """Return whether this process verified ``secret`` against the key's current hash."""
        with self._lock:
            known = self._verified.get(cred.access_key_id)
        return (
            known is not None
            and known[0] == cred.secret_hash
            and hmac.compare_digest(known[1], self._digest(secret))
        )

    def _user(self, cred: Credential, generation: bytes) -> User:
        def load_user() -> User | None:
            record = self._get(record_key("users", cred.user_id))
            return None if record is None else User.from_dict(record)

        user = self._cache.fetch("user", cred.user_id, generation, load_user)
        if user is None:
            raise _failed()
        return user

    def secret_for_signing(self, access_key_id: str) -> SigningKey:
        """Return the plain secret of an access key, with its user and effective policies.

        Raises:
            CredentialsNotFoundError: no such access key.
            AuthenticationError: the key's user is gone.
            SecretNotStoredError: the key predates encrypted secrets (or this store has no
                cipher): rotate it, or sign in with it once on the REST API.
            SecretKeyMismatchError: its secret was sealed with another encryption key.
        """
        generation = self._cache.generation()
        unknown = CredentialsNotFoundError(f"access key {access_key_id!r} not found")
        if not KEY_ID_PATTERN.fullmatch(access_key_id):
            raise unknown

        def load_credential() -> Credential | None:
            record = self._get(record_key("credentials", access_key_id))
            return None if record is None else Credential.from_dict(record)

        cred = self._cache.fetch("credential", access_key_id, generation, load_credential)
        if cred is None:
            raise unknown
        if self.cipher is None:
            raise SecretNotStoredError(
                "this server keeps no encrypted secrets (no auth.encrypt_secret_key): signed "
                "requests cannot be verified"
            )
        if cred.encrypted_secret is None:
            raise SecretNotStoredError(
                f"access key {access_key_id!r} predates encrypted secrets: rotate it (create a "
                "new key), or sign in with it once on the REST API"
            )
        secret = self.cipher.open(access_key_id, cred.encrypted_secret)

        def load_user() -> User | None:
            record = self._get(record_key("users", cred.user_id))
            return None if record is None else User.from_dict(record)

        user = self._cache.fetch("user", cred.user_id, generation, load_user)
        if user is None:
            raise AuthenticationError(
                f"error authenticating request: the user of access key {access_key_id!r} is gone"
            )
        return SigningKey(user, self._effective_policies(user.id, generation), secret)

    def _seal(self, access_key_id: str, secret: str) -> str | None:
        return None if self.cipher is None else self.cipher.seal(access_key_id, secret)

    def _opens(self, access_key_id: str, sealed: object) -> bool:
        if self.cipher is None or not isinstance(sealed, str):
            return False
        try:
            self.cipher.open(access_key_id, sealed)
        except SecretKeyMismatchError:
            return False
        return True

    def _store_sealed(self, verified: Credential, secret: str) -> None:
        """Add the sealed ``secret`` to a record that lacks it (or whose seal does not open).

        Compare-and-swap on the record: a concurrent rotation or migration wins, and nothing it
        wrote is lost.
        """
        if self.cipher is None or self._opens(verified.access_key_id, verified.encrypted_secret):
            return
        key = record_key("credentials", verified.access_key_id)
        for _ in range(_SEAL_TRIES):
            try:
                raw = self.kv.get(key)
            except KeyNotFoundError:
                return
            record = decode(raw)
            if record.get("secret_hash") != verified.secret_hash or self._opens(
                verified.access_key_id, record.get("encrypted_secret")
            ):
                return
            record["encrypted_secret"] = self.cipher.seal(verified.access_key_id, secret)
            try:
                self.kv.set_if(key, encode(record), raw)
            except KVPreconditionFailedError:
                continue
            self._cache.renew()
            return

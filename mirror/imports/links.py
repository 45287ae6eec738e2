"""Signed physical addresses for direct-to-storage writes (lakeFS's staging backing).

A client asks for an address, writes the object's bytes there itself, then links the address
to a path. The address is a fresh ``data/<partition>/<unique>`` key of the repository's
namespace followed by ``,<signature>``: base64url (unpadded) HMAC-SHA256 over the JSON
``{"Repository","Branch","Path","PhysicalAddress"}`` of the request, as lakeFS signs it. The
signature is part of the object's key, so a client cannot link any other address inside the
namespace, nor this one to another repository, branch or path. Addresses expire 24 hours
after they were handed out: the first characters of ``<unique>`` are its time in milliseconds
(:class:`~mirror.core.paths.DataPathProvider`).

The key is derived (HKDF-SHA256, a label of its own) from the same material as the secret
encryption key, so every process of an installation agrees on it and it never leaves them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mirror.core.errors import LakeFSText
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from mirror.config import LakeMirrorConfig

__all__ = [
    "LINK_LIFETIME",
    "LinkAddressExpiredError",
    "LinkAddressInvalidError",
    "LinkSigner",
    "link_key_material",
]

LINK_LIFETIME = 24 * 3600.0
"""Seconds a handed-out address may be linked (lakeFS's)."""

_LABEL = b"lakemirror/staging/link-address/v1"
_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
_TIME_CHARS = 9


class LinkAddressInvalidError(LakeFSText, InvalidValueError):
    """The address was not handed out for this repository, branch and path (400)."""

    lakefs_text = "link address invalid"


class LinkAddressExpiredError(LakeFSText, InvalidValueError):
    """The address was handed out more than 24 hours ago (400)."""

    lakefs_text = "link address expired"


def link_key_material(config: LakeMirrorConfig) -> str:
    """Return the installation's secret material: ``auth.encrypt_secret_key`` or its key file.

    Raises:
        ConfigurationError: unset with the DynamoDB KV, or the key file is unusable.
    """
    from mirror.auth.secrets import ENCRYPT_KEY_FILE, load_or_create_key_file
    from mirror.config import ConfigurationError

    configured = config.auth.encrypt_secret_key
    if configured is not None and configured.get_secret_value():
        return configured.get_secret_value()
    if config.kv.type != "sqlite":
        raise ConfigurationError(
            "auth.encrypt_secret_key is required with kv.type "
            f"{config.kv.type!r}: every process needs the same key to sign link addresses"
        )
    try:
        return load_or_create_key_file(config.data_dir / ENCRYPT_KEY_FILE)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read the generated secret key file: {exc}") from exc


def _issued_ms(key: str) -> int | None:
    """Return when the address of ``key`` was handed out (ms), from its unique part."""
    unique = key.rsplit("/", 1)[-1]
    head = unique[:_TIME_CHARS]
    if len(head) < _TIME_CHARS or any(c not in _ALPHABET for c in head):
        return None
    value = 0
    for c in head:
        value = value * 32 + _ALPHABET.index(c)
    return value


class LinkSigner:
    """Sign and check link addresses with one installation key.

    Args:
        key: The signing key (at least 32 bytes).
        clock: Returns the time in Unix seconds.
    """

    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 32:
            raise ValueError("a link signing key needs at least 32 bytes")
        self._key = key
        self.clock = clock

    def __repr__(self) -> str:
        return "LinkSigner(<key hidden>)"

    @classmethod
    def from_material(cls, material: str) -> LinkSigner:
        """Return the signer whose key is derived from the installation's secret material."""
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_LABEL)
        return cls(hkdf.derive(material.encode()))

    @classmethod
    def ephemeral(cls) -> LinkSigner:
        """Return a signer with a random key: for an app that is the only process."""
        return cls(secrets.token_bytes(32))

    def _signature(self, repository: str, branch: str, path: str, address: str) -> str:
        # the field names and order of lakeFS's signed struct
        payload = json.dumps(
            {
                "Repository": repository,
                "Branch": branch,
                "Path": path,
                "PhysicalAddress": address,
            },
            separators=(",", ":"),
        ).encode()
        digest = hmac.new(self._key, payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def sign(self, repository: str, branch: str, path: str, address: str) -> str:
        """Return ``address`` with its signature after a comma."""
        return f"{address},{self._signature(repository, branch, path, address)}"

    def verify(self, repository: str, branch: str, path: str, signed: str) -> None:
        """Check a signed address handed out for this repository, branch and path.

        Raises:
            LinkAddressInvalidError: no signature, or another one.
            LinkAddressExpiredError: handed out more than :data:`LINK_LIFETIME` ago.
        """
        address, comma, signature = signed.rpartition(",")
        expected = self._signature(repository, branch, path, address)
        # compared as bytes: compare_digest refuses str holding non-ASCII (TypeError)
        if not comma or not hmac.compare_digest(
            signature.encode("utf-8", "surrogatepass"), expected.encode()
        ):
            raise LinkAddressInvalidError(f"address {signed!r} was not issued for {path!r}")
        issued = _issued_ms(address)
        if issued is None:
            raise LinkAddressInvalidError(f"address {signed!r} has no issue time")
        if self.clock() - issued / 1000 > LINK_LIFETIME:
            raise LinkAddressExpiredError(f"address {signed!r}")

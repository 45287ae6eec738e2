"""Signed link addresses: bound to repository, branch and path, and valid for 24 hours."""

from __future__ import annotations

import time

import pytest

from mirror.core.paths import DataPathProvider
from mirror.imports.links import (
    LINK_LIFETIME,
    LinkAddressExpiredError,
    LinkAddressInvalidError,
    LinkSigner,
)

KEY = b"k" * 32


def test_a_signed_address_verifies_only_for_its_request() -> None:
    signer = LinkSigner(KEY)
    address = "s3://bucket/ns/" + DataPathProvider().new_path()
    signed = signer.sign("repo", "main", "a/b", address)
    assert signed.startswith(address + ",") and "=" not in signed.rsplit(",", 1)[1]
    signer.verify("repo", "main", "a/b", signed)
    for repository, branch, path in (
        ("other", "main", "a/b"),
        ("repo", "dev", "a/b"),
        ("repo", "main", "a/c"),
    ):
        with pytest.raises(LinkAddressInvalidError, match=r"^link address invalid"):
            signer.verify(repository, branch, path, signed)
    with pytest.raises(LinkAddressInvalidError):
        signer.verify("repo", "main", "a/b", address)
    with pytest.raises(LinkAddressInvalidError):
        LinkSigner(b"x" * 32).verify("repo", "main", "a/b", signed)


def test_addresses_expire_after_a_day() -> None:
    address = "local://ns/" + DataPathProvider().new_path()
    signed = LinkSigner(KEY).sign("repo", "main", "p", address)
    now = time.time()
    LinkSigner(KEY, clock=lambda: now + LINK_LIFETIME - 60).verify("repo", "main", "p", signed)
    late = LinkSigner(KEY, clock=lambda: now + LINK_LIFETIME + 60)
    with pytest.raises(LinkAddressExpiredError, match=r"^link address expired"):
        late.verify("repo", "main", "p", signed)


def test_the_key_comes_from_the_installation_secret() -> None:
    one = LinkSigner.from_material("installation secret")
    two = LinkSigner.from_material("installation secret")
    other = LinkSigner.from_material("another secret")
    signed = one.sign("r", "b", "p", "mem://x/data/p/0000000000")
    assert two.sign("r", "b", "p", "mem://x/data/p/0000000000") == signed
    assert other.sign("r", "b", "p", "mem://x/data/p/0000000000") != signed
    assert "secret" not in repr(one)

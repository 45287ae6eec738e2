"""The records of the auth store: users, access keys, groups and policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Credential",
    "Effect",
    "Group",
    "NewCredential",
    "Policy",
    "Statement",
    "User",
]


class Effect(StrEnum):
    """What a matching statement does; ``deny`` beats ``allow``."""

    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class User:
    """A principal that signs requests with its access keys."""

    id: str
    creation_date: int
    friendly_name: str | None = None
    email: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dictionary."""
        return {
            "id": self.id,
            "creation_date": self.creation_date,
            "friendly_name": self.friendly_name,
            "email": self.email,
        }

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> User:
        """Build a user from :meth:`to_dict` output."""
        return cls(r["id"], int(r["creation_date"]), r.get("friendly_name"), r.get("email"))


@dataclass(frozen=True, slots=True)
class Credential:
    """A stored access key: its owner, the salted hash of its secret and the sealed secret.

    ``encrypted_secret`` is ``None`` for a key stored before secrets were encrypted (see
    :mod:`mirror.auth.secrets`); the REST API signs in with the hash alone.
    """

    access_key_id: str
    user_id: str
    creation_date: int
    secret_hash: str = field(repr=False)
    encrypted_secret: str | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dictionary."""
        record: dict[str, Any] = {
            "access_key_id": self.access_key_id,
            "user_id": self.user_id,
            "creation_date": self.creation_date,
            "secret_hash": self.secret_hash,
        }
        if self.encrypted_secret is not None:
            record["encrypted_secret"] = self.encrypted_secret
        return record

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> Credential:
        """Build a credential from :meth:`to_dict` output."""
        return cls(
            r["access_key_id"],
            r["user_id"],
            int(r["creation_date"]),
            r["secret_hash"],
            r.get("encrypted_secret"),
        )


@dataclass(frozen=True, slots=True)
class NewCredential:
    """A freshly created access key with its secret: the only time the secret is known."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    user_id: str
    creation_date: int


@dataclass(frozen=True, slots=True)
class Group:
    """A named set of users that policies can be attached to."""

    id: str
    creation_date: int
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dictionary."""
        return {"id": self.id, "creation_date": self.creation_date, "description": self.description}

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> Group:
        """Build a group from :meth:`to_dict` output."""
        return cls(r["id"], int(r["creation_date"]), r.get("description"))


@dataclass(frozen=True, slots=True)
class Statement:
    """One rule of a policy: ``effect`` for ``actions`` (patterns) on ``resource`` (pattern)."""

    effect: Effect
    actions: tuple[str, ...]
    resource: str

    def to_dict(self) -> dict[str, Any]:
        """Return the statement in lakeFS's JSON form."""
        return {
            "effect": self.effect.value,
            "action": list(self.actions),
            "resource": self.resource,
        }

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> Statement:
        """Build a statement from lakeFS's JSON form."""
        return cls(Effect(r["effect"]), tuple(r["action"]), r["resource"])


@dataclass(frozen=True, slots=True)
class Policy:
    """A named list of statements; ``acl``: the ACL permission it was derived from, if any."""

    id: str
    creation_date: int
    statements: tuple[Statement, ...]
    acl: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the policy in lakeFS's JSON form (with ``acl`` when derived from an ACL)."""
        record: dict[str, Any] = {
            "id": self.id,
            "creation_date": self.creation_date,
            "statement": [s.to_dict() for s in self.statements],
        }
        if self.acl is not None:
            record["acl"] = self.acl
        return record

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> Policy:
        """Build a policy from :meth:`to_dict` output."""
        return cls(
            r["id"],
            int(r["creation_date"]),
            tuple(Statement.from_dict(s) for s in r["statement"]),
            r.get("acl"),
        )

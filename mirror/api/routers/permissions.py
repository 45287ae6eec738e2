"""``POST /user/permissions``: which of a list of permissions the signed-in user holds.

A LakeMirror extension (lakeFS has no such call). The web UI asks it before drawing a write
control, so that a reader sees no button the server would refuse; the server still checks every
request it then receives. It answers only about the caller's own policies, so it needs no
permission of its own, and it reveals nothing about other users.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from mirror.api.deps import CallerDep
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Permission

__all__ = ["MAX_CHECKS", "PermissionAnswer", "PermissionCheck", "PermissionChecks", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["auth"])

MAX_CHECKS = 1000
"""At most this many permissions in one request (a page of lakeFS's largest listing)."""


class PermissionCheck(BaseModel):
    """One action on one resource, spelled as in a policy statement."""

    action: str = Field(min_length=1, examples=["fs:CreateBranch"])
    resource: str = Field(min_length=1, examples=["arn:lakefs:fs:::repository/example/branch/*"])


class PermissionChecks(BaseModel):
    """``POST /user/permissions`` body: the permissions to look up."""

    permissions: list[PermissionCheck] = Field(max_length=MAX_CHECKS)


class PermissionAnswer(PermissionCheck):
    """One permission and whether the caller holds it."""

    allowed: bool


class PermissionAnswers(BaseModel):
    """The answer, one entry per permission asked, in the same order."""

    results: list[PermissionAnswer]


@router.post("/user/permissions", response_model=PermissionAnswers)
def check_permissions(body: PermissionChecks, caller: CallerDep) -> PermissionAnswers:
    """Return, for each permission, whether the signed-in user's policies allow it."""
    return PermissionAnswers(
        results=[
            PermissionAnswer(
                action=c.action,
                resource=c.resource,
                allowed=caller.allows(Permission(c.action, c.resource)),
            )
            for c in body.permissions
        ]
    )

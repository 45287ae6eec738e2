"""lakeFS's group ACLs: ``GET`` and ``POST /auth/groups/{groupId}/acl``.

An ACL is ``{"permission": "Read"|"Write"|"Super"|"Admin"}``, kept as the group's one policy
``ACL(_-_)<group>`` (:mod:`mirror.auth.acl`). The calls need what lakeFS's handlers require:
``auth:ReadGroup`` on the group and ``auth:ReadPolicy`` on that policy to read it;
``auth:ReadGroup`` on the group and ``auth:AttachPolicy`` and ``auth:UpdatePolicy`` on the policy
to set it.

- ``GET`` answers 200 with the ACL, ``{"permission": ""}`` (lakeFS's blank ACL) when no policy
  is attached to the group, and 404 ``{"message", "no_acl": true}`` when its policies are not
  one ACL policy.
- ``POST`` answers 201 without a body; 400 for a permission that is no level.

Both answer 404 for an unknown group. Setting an ACL is recorded in the audit trail
(``auth.group.acl.set``, with the level before and after).
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict

from mirror.api.audit import AuditDep
from mirror.api.deps import CallerDep, StateDep
from mirror.api.routing import LakeFSRoute
from mirror.audit import kinds
from mirror.auth.acl import NoAclError, acl_policy_name
from mirror.auth.permissions import Action, Permission, group_arn, policy_arn
from mirror.errors import NotFoundError
from mirror.httputil.errors import error_response

__all__ = ["ACL", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["auth"])

_ACL = "/auth/groups/{groupId}/acl"


class ACL(BaseModel):
    """A group's permission level (lakeFS's ``ACL``)."""

    model_config = ConfigDict(extra="ignore")

    permission: str


@router.get(_ACL, response_model=ACL)
def get_group_acl(groupId: str, state: StateDep, caller: CallerDep) -> object:
    """Return the ACL of a group, read from the one policy attached to it."""
    caller.require(
        Permission(Action.READ_GROUP, group_arn(groupId)),
        Permission(Action.READ_POLICY, policy_arn(acl_policy_name(groupId))),
    )
    try:
        permission = state.auth.group_acl(groupId)
    except NoAclError as exc:
        return error_response(404, str(exc), no_acl=True)
    return ACL(permission=permission)


@router.post(_ACL, status_code=201, response_class=Response)
def set_group_acl(
    groupId: str, body: ACL, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Give a group an ACL: its policy replaces every policy attached to the group."""
    policy = policy_arn(acl_policy_name(groupId))
    caller.require(
        Permission(Action.READ_GROUP, group_arn(groupId)),
        Permission(Action.ATTACH_POLICY, policy),
        Permission(Action.UPDATE_POLICY, policy),
    )
    with audit.change(
        kinds.AUTH_GROUP_ACL_SET,
        target={"group": groupId},
        after={"permission": body.permission},
        status=201,
    ) as change:
        change.before = {"permission": _current_acl(state, groupId)}
        state.auth.set_group_acl(groupId, body.permission)
    return Response(status_code=201)


def _current_acl(state: StateDep, group_id: str) -> str | None:
    """Return a group's ACL level for the audit trail (``None``: none, or no such group).

    Never raises: the change itself answers for a missing group, after checking the level.
    """
    try:
        return state.auth.group_acl(group_id)
    except NotFoundError:  # no such group, or its policies are no ACL (NoAclError)
        return None

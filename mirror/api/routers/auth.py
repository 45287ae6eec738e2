"""lakeFS's ``/auth`` API: users, access keys, groups, memberships, policies; and ``/user``.

Every call checks one permission, asks the auth store, and answers in one of a few shapes: a
page of a list (:meth:`~mirror.api.paging.PageQuery.listed`), one record in its wire form, 201
with no body for an attachment or a membership added, 204 for anything removed. The store
raises what lakeFS answers with 404 (missing) and 409 (existing).

Every change, once the caller may make it, is recorded in the audit trail (``auth.*`` kinds,
:mod:`mirror.audit.kinds`): the user, group, policy or key it names, the statements a policy had
and gets, an access key's ID (never its secret).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from mirror.api.audit import AuditDep
from mirror.api.convert import group_model, policy_model, user_model
from mirror.api.deps import ApiState, CallerDep, OptionalCallerDep, StateDep
from mirror.api.models import (
    CredentialsList,
    CredentialsModel,
    CredentialsWithSecret,
    CurrentUser,
    GroupCreation,
    GroupList,
    GroupModel,
    PolicyList,
    PolicyModel,
    UserCreation,
    UserList,
    UserModel,
)
from mirror.api.paging import PageDep, PageQuery
from mirror.api.routing import AfterQuery, AmountQuery, LakeFSRoute, PrefixQuery
from mirror.audit import kinds
from mirror.auth.model import Credential, Policy
from mirror.auth.permissions import (
    ALL_RESOURCES,
    Action,
    Permission,
    group_arn,
    policy_arn,
    user_arn,
)
from mirror.auth.policy import validate_statement
from mirror.errors import InvalidValueError, LakeMirrorError

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["auth"])

_USER = "/auth/users/{userId}"
_GROUP = "/auth/groups/{groupId}"
_POLICY = "/auth/policies/{policyId}"


def _no_content() -> Response:
    return Response(status_code=204)


def _created() -> Response:
    return Response(status_code=201)


def _credentials_model(credentials: Credential) -> CredentialsModel:
    """Return the wire form of an access key: its ID and creation date, never its secret."""
    return CredentialsModel(
        access_key_id=credentials.access_key_id, creation_date=credentials.creation_date
    )


def _policy(policy_id: str, body: PolicyModel, creation_date: int) -> Policy:
    statements = tuple(validate_statement(s.effect, s.action, s.resource) for s in body.statement)
    return Policy(policy_id, creation_date, statements)


def _statements(policy: Policy) -> list[dict[str, object]]:
    """Return a policy's statements in lakeFS's JSON form, for the audit trail."""
    return [s.to_dict() for s in policy.statements]


def _statements_before(state: ApiState, policy_id: str) -> list[dict[str, object]] | None:
    """Return a policy's statements before a change; ``None`` when it cannot be read.

    Never raises: the change itself answers for a missing policy.
    """
    try:
        return _statements(state.auth.get_policy(policy_id))
    except LakeMirrorError:
        return None


@router.get("/user", response_model=CurrentUser)
async def get_current_user(caller: OptionalCallerDep) -> CurrentUser:
    """Return the user who signed the request; an empty user when it presents no credentials.

    lakeFS answers an anonymous request 200 with a user whose ID is empty, which its web UI
    reads as signed out; credentials that do not sign anyone in stay 401.
    """
    # a coroutine: this reads no record (signing in did), so it needs no worker thread
    if caller is None:
        return CurrentUser(user=UserModel(id="", creation_date=0))
    return CurrentUser(user=user_model(caller.user))


# users


@router.get("/auth/users", response_model=UserList)
def list_users(state: StateDep, caller: CallerDep, paging: PageDep) -> UserList:
    """List users by ID."""
    caller.require(Permission(Action.LIST_USERS, ALL_RESOURCES))
    return paging.listed(UserList, state.auth.list_users(paging.prefix, paging.after), user_model)


@router.post("/auth/users", status_code=201, response_model=UserModel)
def create_user(
    body: UserCreation, state: StateDep, caller: CallerDep, audit: AuditDep
) -> UserModel:
    """Create a user (without access keys; create those separately), with its e-mail if given."""
    caller.require(Permission(Action.CREATE_USER, user_arn(body.id)))
    email = body.email or None
    with audit.change(
        kinds.AUTH_USER_CREATE, target={"user": body.id}, after={"email": email}, status=201
    ):
        return user_model(state.auth.create_user(body.id, email=email))


@router.get(_USER, response_model=UserModel)
def get_user(userId: str, state: StateDep, caller: CallerDep) -> UserModel:
    """Return a user."""
    caller.require(Permission(Action.READ_USER, user_arn(userId)))
    return user_model(state.auth.get_user(userId))


@router.delete(_USER, status_code=204, response_class=Response)
def delete_user(userId: str, state: StateDep, caller: CallerDep, audit: AuditDep) -> Response:
    """Delete a user with its access keys, memberships and attachments."""
    caller.require(Permission(Action.DELETE_USER, user_arn(userId)))
    with audit.change(kinds.AUTH_USER_DELETE, target={"user": userId}, status=204):
        state.auth.delete_user(userId)
    return _no_content()


@router.get(_USER + "/groups", response_model=GroupList)
def list_user_groups(userId: str, state: StateDep, caller: CallerDep, paging: PageDep) -> GroupList:
    """List the groups a user belongs to."""
    caller.require(Permission(Action.READ_USER, user_arn(userId)))
    groups = state.auth.list_user_groups(userId, paging.prefix, paging.after)
    return paging.listed(GroupList, groups, group_model)


@router.get(_USER + "/policies", response_model=PolicyList)
def list_user_policies(
    userId: str,
    state: StateDep,
    caller: CallerDep,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    effective: bool = False,
) -> PolicyList:
    """List the policies attached to a user (``effective``: also through its groups)."""
    # no PageDep here: lakeFS lists ``effective`` after the paging parameters, and a
    # dependency's parameters would follow the call's own in the OpenAPI document
    caller.require(Permission(Action.READ_USER, user_arn(userId)))
    policies = state.auth.list_user_policies(
        userId, effective=effective, prefix=prefix, after=after
    )
    return PageQuery(prefix, after, amount).listed(PolicyList, policies, policy_model)


@router.put(_USER + "/policies/{policyId}", status_code=201, response_class=Response)
def attach_policy_to_user(
    userId: str, policyId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Attach a policy to a user."""
    caller.require(Permission(Action.ATTACH_POLICY, user_arn(userId)))
    target = {"policy": policyId, "user": userId}
    with audit.change(kinds.AUTH_POLICY_ATTACH, target=target, status=201):
        state.auth.attach_user_policy(userId, policyId)
    return _created()


@router.delete(_USER + "/policies/{policyId}", status_code=204, response_class=Response)
def detach_policy_from_user(
    userId: str, policyId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Detach a policy from a user."""
    caller.require(Permission(Action.DETACH_POLICY, user_arn(userId)))
    target = {"policy": policyId, "user": userId}
    with audit.change(kinds.AUTH_POLICY_DETACH, target=target, status=204):
        state.auth.detach_user_policy(userId, policyId)
    return _no_content()


# credentials


@router.get(_USER + "/credentials", response_model=CredentialsList)
def list_user_credentials(
    userId: str, state: StateDep, caller: CallerDep, paging: PageDep
) -> CredentialsList:
    """List a user's access keys (never their secrets)."""
    caller.require(Permission(Action.LIST_CREDENTIALS, user_arn(userId)))
    keys = state.auth.list_credentials(userId, paging.prefix, paging.after)
    return paging.listed(CredentialsList, keys, _credentials_model, key=lambda c: c.access_key_id)


@router.post(_USER + "/credentials", status_code=201, response_model=CredentialsWithSecret)
def create_credentials(
    userId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> CredentialsWithSecret:
    """Create an access key; its secret is in this response and nowhere else, ever."""
    caller.require(Permission(Action.CREATE_CREDENTIALS, user_arn(userId)))
    with audit.change(kinds.AUTH_CREDENTIALS_CREATE, target={"user": userId}, status=201) as c:
        created = state.auth.create_credentials(userId)
        # the key's ID only: its secret is in the response and nowhere else
        c.target["access_key_id"] = created.access_key_id
    return CredentialsWithSecret(
        access_key_id=created.access_key_id,
        secret_access_key=created.secret_access_key,
        creation_date=created.creation_date,
    )


@router.get(_USER + "/credentials/{accessKeyId}", response_model=CredentialsModel)
def get_credentials(
    userId: str, accessKeyId: str, state: StateDep, caller: CallerDep
) -> CredentialsModel:
    """Return one of a user's access keys (without its secret)."""
    caller.require(Permission(Action.READ_CREDENTIALS, user_arn(userId)))
    return _credentials_model(state.auth.get_credentials(userId, accessKeyId))


@router.delete(_USER + "/credentials/{accessKeyId}", status_code=204, response_class=Response)
def delete_credentials(
    userId: str, accessKeyId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Delete one of a user's access keys."""
    caller.require(Permission(Action.DELETE_CREDENTIALS, user_arn(userId)))
    target = {"user": userId, "access_key_id": accessKeyId}
    with audit.change(kinds.AUTH_CREDENTIALS_DELETE, target=target, status=204):
        state.auth.delete_credentials(userId, accessKeyId)
    return _no_content()


# groups


@router.get("/auth/groups", response_model=GroupList)
def list_groups(state: StateDep, caller: CallerDep, paging: PageDep) -> GroupList:
    """List groups by ID."""
    caller.require(Permission(Action.LIST_GROUPS, ALL_RESOURCES))
    return paging.listed(
        GroupList, state.auth.list_groups(paging.prefix, paging.after), group_model
    )


@router.post("/auth/groups", status_code=201, response_model=GroupModel)
def create_group(
    state: StateDep, caller: CallerDep, audit: AuditDep, body: GroupCreation | None = None
) -> GroupModel:
    """Create a group."""
    if body is None:
        raise InvalidValueError("create group: the body needs an id")
    caller.require(Permission(Action.CREATE_GROUP, group_arn(body.id)))
    with audit.change(
        kinds.AUTH_GROUP_CREATE,
        target={"group": body.id},
        after={"description": body.description},
        status=201,
    ):
        return group_model(state.auth.create_group(body.id, body.description))


@router.get(_GROUP, response_model=GroupModel)
def get_group(groupId: str, state: StateDep, caller: CallerDep) -> GroupModel:
    """Return a group."""
    caller.require(Permission(Action.READ_GROUP, group_arn(groupId)))
    return group_model(state.auth.get_group(groupId))


@router.delete(_GROUP, status_code=204, response_class=Response)
def delete_group(groupId: str, state: StateDep, caller: CallerDep, audit: AuditDep) -> Response:
    """Delete a group with its memberships and attachments."""
    caller.require(Permission(Action.DELETE_GROUP, group_arn(groupId)))
    with audit.change(kinds.AUTH_GROUP_DELETE, target={"group": groupId}, status=204):
        state.auth.delete_group(groupId)
    return _no_content()


@router.get(_GROUP + "/members", response_model=UserList)
def list_group_members(
    groupId: str, state: StateDep, caller: CallerDep, paging: PageDep
) -> UserList:
    """List the members of a group."""
    caller.require(Permission(Action.READ_GROUP, group_arn(groupId)))
    members = state.auth.list_members(groupId, paging.prefix, paging.after)
    return paging.listed(UserList, members, user_model)


@router.put(_GROUP + "/members/{userId}", status_code=201, response_class=Response)
def add_group_membership(
    groupId: str, userId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Add a user to a group."""
    caller.require(Permission(Action.ADD_GROUP_MEMBER, group_arn(groupId)))
    target = {"group": groupId, "user": userId}
    with audit.change(kinds.AUTH_GROUP_MEMBER_ADD, target=target, status=201):
        state.auth.add_member(groupId, userId)
    return _created()


@router.delete(_GROUP + "/members/{userId}", status_code=204, response_class=Response)
def delete_group_membership(
    groupId: str, userId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Remove a user from a group."""
    caller.require(Permission(Action.REMOVE_GROUP_MEMBER, group_arn(groupId)))
    target = {"group": groupId, "user": userId}
    with audit.change(kinds.AUTH_GROUP_MEMBER_REMOVE, target=target, status=204):
        state.auth.remove_member(groupId, userId)
    return _no_content()


@router.get(_GROUP + "/policies", response_model=PolicyList)
def list_group_policies(
    groupId: str, state: StateDep, caller: CallerDep, paging: PageDep
) -> PolicyList:
    """List the policies attached to a group."""
    caller.require(Permission(Action.READ_GROUP, group_arn(groupId)))
    policies = state.auth.list_group_policies(groupId, paging.prefix, paging.after)
    return paging.listed(PolicyList, policies, policy_model)


@router.put(_GROUP + "/policies/{policyId}", status_code=201, response_class=Response)
def attach_policy_to_group(
    groupId: str, policyId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Attach a policy to a group."""
    caller.require(Permission(Action.ATTACH_POLICY, group_arn(groupId)))
    target = {"policy": policyId, "group": groupId}
    with audit.change(kinds.AUTH_POLICY_ATTACH, target=target, status=201):
        state.auth.attach_group_policy(groupId, policyId)
    return _created()


@router.delete(_GROUP + "/policies/{policyId}", status_code=204, response_class=Response)
def detach_policy_from_group(
    groupId: str, policyId: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Detach a policy from a group."""
    caller.require(Permission(Action.DETACH_POLICY, group_arn(groupId)))
    target = {"policy": policyId, "group": groupId}
    with audit.change(kinds.AUTH_POLICY_DETACH, target=target, status=204):
        state.auth.detach_group_policy(groupId, policyId)
    return _no_content()


# policies


@router.get("/auth/policies", response_model=PolicyList)
def list_policies(state: StateDep, caller: CallerDep, paging: PageDep) -> PolicyList:
    """List policies by ID."""
    caller.require(Permission(Action.LIST_POLICIES, ALL_RESOURCES))
    policies = state.auth.list_policies(paging.prefix, paging.after)
    return paging.listed(PolicyList, policies, policy_model)


@router.post("/auth/policies", status_code=201, response_model=PolicyModel)
def create_policy(
    body: PolicyModel, state: StateDep, caller: CallerDep, audit: AuditDep
) -> PolicyModel:
    """Create a policy."""
    caller.require(Permission(Action.CREATE_POLICY, policy_arn(body.id)))
    asked = [s.model_dump() for s in body.statement]
    with audit.change(
        kinds.AUTH_POLICY_CREATE, target={"policy": body.id}, after=asked, status=201
    ) as change:
        created = state.auth.create_policy(_policy(body.id, body, state.auth.now()))
        change.after = _statements(created)
    return policy_model(created)


@router.get(_POLICY, response_model=PolicyModel)
def get_policy(policyId: str, state: StateDep, caller: CallerDep) -> PolicyModel:
    """Return a policy."""
    caller.require(Permission(Action.READ_POLICY, policy_arn(policyId)))
    return policy_model(state.auth.get_policy(policyId))


@router.put(_POLICY, response_model=PolicyModel)
def update_policy(
    policyId: str, body: PolicyModel, state: StateDep, caller: CallerDep, audit: AuditDep
) -> PolicyModel:
    """Replace a policy's statements."""
    caller.require(Permission(Action.UPDATE_POLICY, policy_arn(policyId)))
    asked = [s.model_dump() for s in body.statement]
    with audit.change(kinds.AUTH_POLICY_UPDATE, target={"policy": policyId}, after=asked) as c:
        if body.id != policyId:
            raise InvalidValueError(f"policy ID {body.id!r} does not match the path's {policyId!r}")
        updated = _policy(policyId, body, 0)
        c.before = _statements_before(state, policyId)
        result = state.auth.update_policy(policyId, updated.statements)
        c.after = _statements(result)
    return policy_model(result)


@router.delete(_POLICY, status_code=204, response_class=Response)
def delete_policy(policyId: str, state: StateDep, caller: CallerDep, audit: AuditDep) -> Response:
    """Delete a policy and detach it everywhere."""
    caller.require(Permission(Action.DELETE_POLICY, policy_arn(policyId)))
    with audit.change(kinds.AUTH_POLICY_DELETE, target={"policy": policyId}, status=204) as c:
        c.before = _statements_before(state, policyId)
        state.auth.delete_policy(policyId)
    return _no_content()

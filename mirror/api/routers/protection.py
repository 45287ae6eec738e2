"""Branch protection rules: lakeFS's ``…/settings/branch_protection`` and its deprecated aliases.

``GET`` answers the rules with their ``ETag`` (the hex SHA-256 of the stored rules, unquoted;
empty while none were ever stored). ``PUT`` replaces them all (``[]`` clears them) under lakeFS's
``If-Match``: absent writes unconditionally, ``""`` only if no rules were ever stored, any other
value only if it is the current ETag (else 412 ``Precondition failed``). The deprecated
``…/branch_protection`` adds (POST) or removes (DELETE) one pattern; removing a pattern that is
not there answers 404 with no body, as lakeFS does. Read-only repositories (mirrors) refuse every
change with 403 ``read-only repository``.

lakeFS stores any pattern and then fails every write of the repository with 500 if one does not
compile; LakeMirror refuses such a pattern with 400 ``invalid branch pattern syntax`` instead.

Every change is recorded in the audit trail (``branch_protection.*``) with the patterns before
and after it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from mirror.api.audit import AuditDep
from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.routing import LakeFSRoute
from mirror.audit import Change, kinds
from mirror.auth.permissions import Permission, repository_arn
from mirror.core import protection
from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import Repository

__all__ = ["GET_RULES", "SET_RULES", "BranchProtectionRule", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["branch protection"])

GET_RULES = "branches:GetBranchProtectionRules"
SET_RULES = "branches:SetBranchProtectionRules"

_REPO = "/repositories/{repository}"


class BranchProtectionRule(BaseModel):
    """One protected branch-name pattern (gobwas/glob, ``*`` crossing ``/``)."""

    pattern: str


def _rules_response(repo: Repository, state: StateDep, *, etag: bool) -> JSONResponse:
    rules = protection.get_rules(state.catalog.kv, repo)
    body = [{"pattern": p} for p in rules.patterns]
    return JSONResponse(body, headers={"ETag": rules.etag} if etag else None)


def _get_rules(
    repo: str | Repository, repository: str, state: ApiState, caller: Caller, etag: bool
) -> JSONResponse:
    caller.require(Permission(GET_RULES, repository_arn(repository)))
    return _rules_response(state.catalog.get_repository(repo), state, etag=etag)


def _writable(state: StateDep, repository: str) -> Repository:
    repo = state.catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    return repo


def _patterns(state: ApiState, repo: Repository) -> list[str]:
    return list(protection.get_rules(state.catalog.kv, repo).patterns)


def _writable_audited(state: ApiState, repository: str, change: Change) -> Repository:
    """Return the repository if writable, noting its patterns before the change."""
    repo = _writable(state, repository)
    change.before = _patterns(state, repo)
    return repo


@router.get(
    _REPO + "/settings/branch_protection",
    response_model=list[BranchProtectionRule],
    responses={200: {"headers": {"ETag": {"schema": {"type": "string"}}}}},
)
async def get_branch_protection_rules(
    repository: str, state: StateDep, caller: CallerDep
) -> JSONResponse:
    """Return the protected patterns and, in ``ETag``, the version of the rules."""
    return await run_read(state, repository, _get_rules, repository, state, caller, True)


@router.put(_REPO + "/settings/branch_protection", status_code=204, response_class=Response)
def set_branch_protection_rules(
    repository: str,
    body: Annotated[list[BranchProtectionRule], Body()],
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
    if_match: Annotated[str | None, Header(alias="If-Match")] = None,
) -> Response:
    """Replace the protected patterns (``If-Match``: the ETag the caller read, or ``""``)."""
    caller.require(Permission(SET_RULES, repository_arn(repository)))
    asked = sorted({r.pattern for r in body})
    with audit.change(
        kinds.BRANCH_PROTECTION_SET,
        target={"repository": repository},
        after=asked,
        details={"if_match": if_match},
        status=204,
    ) as change:
        repo = _writable_audited(state, repository, change)
        protection.set_rules(state.catalog.kv, repo, [r.pattern for r in body], if_match)
    return Response(status_code=204)


@router.get(_REPO + "/branch_protection", response_model=list[BranchProtectionRule])
async def internal_get_branch_protection_rules(
    repository: str, state: StateDep, caller: CallerDep
) -> JSONResponse:
    """Return the protected patterns (deprecated: use ``…/settings/branch_protection``)."""
    return await run_read(state, repository, _get_rules, repository, state, caller, False)


@router.get(_REPO + "/branch_protection/set_allowed", status_code=204, response_class=Response)
def create_branch_protection_rule_preflight(
    repository: str, state: StateDep, caller: CallerDep
) -> Response:
    """Answer 204 if the caller may change the rules of a writable repository."""
    caller.require(Permission(SET_RULES, repository_arn(repository)))
    _writable(state, repository)
    return Response(status_code=204)


@router.post(_REPO + "/branch_protection", status_code=204, response_class=Response)
def internal_create_branch_protection_rule(
    repository: str,
    body: BranchProtectionRule,
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
) -> Response:
    """Protect one more pattern (deprecated); 409 if it is protected already."""
    caller.require(Permission(SET_RULES, repository_arn(repository)))
    with audit.change(
        kinds.BRANCH_PROTECTION_CREATE,
        target={"repository": repository, "pattern": body.pattern},
        status=204,
    ) as change:
        repo = _writable_audited(state, repository, change)
        protection.add_rule(state.catalog.kv, repo, body.pattern)
        change.after = _patterns(state, repo)
    return Response(status_code=204)


@router.delete(_REPO + "/branch_protection", status_code=204, response_class=Response)
def internal_delete_branch_protection_rule(
    repository: str,
    body: Annotated[BranchProtectionRule, Body()],
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
) -> Response:
    """Stop protecting one pattern (deprecated); 404 with no body if it is not protected."""
    caller.require(Permission(SET_RULES, repository_arn(repository)))
    with audit.change(
        kinds.BRANCH_PROTECTION_DELETE,
        target={"repository": repository, "pattern": body.pattern},
        status=204,
    ) as change:
        repo = _writable_audited(state, repository, change)
        try:
            protection.delete_rule(state.catalog.kv, repo, body.pattern)
        except protection.RuleNotFoundError as exc:
            change.refuse(404, str(exc))
            return Response(status_code=404)
        change.after = _patterns(state, repo)
    return Response(status_code=204)

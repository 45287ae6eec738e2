"""``GET /audit``: the audit trail of security and operations changes (beyond lakeFS).

Needs ``auth:ReadAudit`` on ``*`` (:data:`READ_AUDIT`), which the built-in ``AuthFullAccess``
policy (``auth:*``) of the ``Admins`` group grants; any other caller gets 403. Filters: ``kind``
(a kind or the start of kinds: ``auth`` matches ``auth.user.create``), ``user``, ``repository``,
``since`` and ``until`` (inclusive; Unix seconds or RFC 3339), ``result`` (``success`` or
``failure``). lakeFS's paging: ``after`` (the ``next_offset`` of the previous page) and
``amount`` (default 100, at most 1000); the answer is ``{"pagination": {...}, "results": [...]}``
with the events newest first. See docs/audit.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel

from mirror.api.audit import audit_trail
from mirror.api.deps import CallerDep
from mirror.api.models import Pagination
from mirror.api.paging import MAX_PER_PAGE, page_size
from mirror.api.routing import AfterQuery, AmountQuery
from mirror.audit import AuditQuery
from mirror.auth.permissions import ALL_RESOURCES, Permission

__all__ = ["READ_AUDIT", "AuditActor", "AuditEventList", "AuditEventModel", "router"]

# every field of an event is always there, null included (not lakeFS's routes, which drop nulls)
router = APIRouter(tags=["audit"])

READ_AUDIT = "auth:ReadAudit"
"""The action reading the audit trail needs, on ``*``."""


class AuditActor(BaseModel):
    """Who asked for a change, and from where."""

    user_id: str | None
    access_key_id: str | None
    address: str | None
    user_agent: str | None
    via: str


class AuditEventModel(BaseModel):
    """One recorded change, made (``success``) or refused (``failure``, with status and text)."""

    id: str
    time: str
    kind: str
    actor: AuditActor
    target: dict[str, str]
    result: str
    status: int
    message: str | None
    before: Any
    after: Any
    details: dict[str, Any]
    request_id: str | None


class AuditEventList(BaseModel):
    """A page of audit events, newest first."""

    pagination: Pagination
    results: list[AuditEventModel]


@router.get("/audit", response_model=AuditEventList)
def list_audit_events(
    request: Request,
    caller: CallerDep,
    kind: Annotated[str, Query(description="a kind, or the start of kinds (auth)")] = "",
    user: Annotated[str, Query(description="the user who made the change")] = "",
    repository: Annotated[str, Query(description="the repository the change names")] = "",
    since: Annotated[str | None, Query(description="at or after: Unix seconds or RFC 3339")] = None,
    until: Annotated[
        str | None, Query(description="at or before: Unix seconds or RFC 3339")
    ] = None,
    result: Annotated[str, Query(description="success or failure")] = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
) -> AuditEventList:
    """List audit events, newest first (``auth:ReadAudit``)."""
    caller.require(Permission(READ_AUDIT, ALL_RESOURCES))
    query = AuditQuery.parse(
        kind=kind, user=user, repository=repository, since=since, until=until, result=result
    )
    page = audit_trail(request).page(query, after=after, amount=page_size(amount))
    return AuditEventList(
        pagination=Pagination(
            has_more=page.has_more,
            next_offset=page.next_offset,
            results=len(page.events),
            max_per_page=MAX_PER_PAGE,
        ),
        results=[AuditEventModel.model_validate(e.to_json()) for e in page.events],
    )

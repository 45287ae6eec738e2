"""The REST API's side of the audit trail: the trail of the app, and a request's recorder.

A route that changes something security- or operations-relevant takes :data:`AuditDep` and
makes the change inside ``audit.change(kind, ...)`` once the caller is authorized (see
:mod:`mirror.audit.recorder`). The recorder's actor is the request's: the signed-in user, the
access key of HTTP Basic (none for a login token), the client's address and ``User-Agent``.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPBasicCredentials
from starlette.exceptions import HTTPException

from mirror.api.deps import ApiState, CallerDep, basic_credentials
from mirror.audit import Actor, AuditRecorder, AuditTrail
from mirror.errors import LakeMirrorError
from mirror.httputil.errors import answer_for

__all__ = ["AuditDep", "audit_trail", "describe", "get_audit", "request_actor"]


def audit_trail(request: Request) -> AuditTrail:
    """Return the app's audit trail (``app.state.audit``; by default one over the app's KV).

    The process assembling the app sets it from the ``audit`` configuration section.
    """
    trail: AuditTrail | None = getattr(request.app.state, "audit", None)
    if trail is None:
        state: ApiState = request.app.state.api
        trail = AuditTrail(state.catalog.kv)
        request.app.state.audit = trail
    return trail


def describe(exc: BaseException) -> tuple[int, str]:
    """Return the status and message the API answers ``exc`` with, for a failed change."""
    if isinstance(exc, LakeMirrorError):
        return answer_for(exc)
    if isinstance(exc, HTTPException):
        return exc.status_code, str(exc.detail)
    return 500, "internal server error"


def request_actor(request: Request, user_id: str | None, access_key_id: str | None) -> Actor:
    """Return the actor of ``request``: the user, the key, the client's address and agent."""
    client = request.client
    return Actor(
        user_id=user_id,
        access_key_id=access_key_id,
        address=client.host if client is not None else None,
        user_agent=request.headers.get("user-agent"),
        via="api",
    )


async def get_audit(
    request: Request,
    caller: CallerDep,
    credentials: Annotated[HTTPBasicCredentials | None, Depends(basic_credentials)],
) -> AuditRecorder:
    """Return the recorder of the request's changes (a FastAPI dependency, :data:`AuditDep`).

    The caller and the credentials are the ones the route signed in with (FastAPI resolves a
    dependency once per request). HTTP Basic names the access key; a login token (Bearer, or
    the session cookie, which Basic would take precedence over) names none.
    """
    key = credentials.username if credentials is not None else None
    actor = request_actor(request, caller.id, key)
    return AuditRecorder(audit_trail(request), actor, describe)


AuditDep = Annotated[AuditRecorder, Depends(get_audit)]
"""The recorder of the changes a request makes, bound to its caller."""

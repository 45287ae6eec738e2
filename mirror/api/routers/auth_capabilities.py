"""lakeFS's ``GET /auth/capabilities``: which sign-in helpers the server offers (no sign-in).

lakeFS's web UI asks it before offering to invite a user by e-mail. lakeFS answers
``invite_user`` from whether its auth service can send invitations; LakeMirror sends no e-mail,
so it answers ``{"invite_user": false}``, as lakeFS does without an e-mail service. lakeFS's
schema also has ``forgot_password``, which its handler leaves out; so does this one.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from mirror.api.routing import LakeFSRoute

__all__ = ["AuthCapabilities", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["internal"])


class AuthCapabilities(BaseModel):
    """What lakeFS's ``AuthCapabilities`` reports (``None`` fields are left out)."""

    invite_user: bool | None = None
    forgot_password: bool | None = None


@router.get("/auth/capabilities", response_model=AuthCapabilities)
async def get_auth_capabilities() -> AuthCapabilities:
    """Return the authentication capabilities: no invitations (LakeMirror sends no e-mail)."""
    return AuthCapabilities(invite_user=False)

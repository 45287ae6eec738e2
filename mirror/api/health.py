"""Liveness and readiness probes (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mirror.api.deps import StateDep
from mirror.errors import UnavailableError
from mirror.kv.errors import KeyNotFoundError

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Answer while the process serves requests (on the event loop: no thread hop per probe)."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(state: StateDep) -> JSONResponse | dict[str, str]:
    """Answer 200 when the KV store answers, 503 otherwise."""
    try:
        state.catalog.kv.get(b"auth/setup")
    except KeyNotFoundError:
        pass
    except UnavailableError as exc:
        return JSONResponse({"status": "unavailable", "message": str(exc)}, status_code=503)
    return {"status": "ok"}

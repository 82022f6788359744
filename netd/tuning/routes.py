"""``/v1/tuning``: the tuner's latest recommendation, and applying or rolling it back.

``GET /v1/tuning`` is open (like every read); ``POST /v1/tuning/apply`` and ``POST
/v1/tuning/rollback`` change NIC parameters and therefore require the API bearer token
(:func:`netd.api.auth.token_guard`, docs/architecture.md, Safety rules). Both answer with the
applier's outcome; a failed write (already undone) is 409 with the outcome, a journal or device
error 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from netd.api.auth import token_guard
from netd.errors import TuningError
from netd.tuning.applier import Outcome
from netd.tuning.service import TuningService

__all__ = ["tuning_router"]


def tuning_router(service: TuningService, token: str | None) -> APIRouter:
    router = APIRouter(prefix="/v1/tuning", tags=["tuning"])
    guard = Depends(token_guard(token))

    @router.get("")
    def tuning() -> dict[str, Any]:
        """Mode, devices and parameters in force, the latest recommendation with its explanation."""
        return service.document()

    def answer(outcome: Outcome) -> dict[str, Any]:
        doc = outcome.to_dict()
        if outcome.state == "failed":
            raise HTTPException(status_code=409, detail=doc)
        return doc

    @router.post("/apply", dependencies=[guard], responses={409: {"description": "write failed; undone"}})
    def apply() -> dict[str, Any]:
        """Write the latest recommendation's NIC changes (journaled, verified, undone on failure)."""
        try:
            return answer(service.apply_latest(source="api"))
        except TuningError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc

    @router.post("/rollback", dependencies=[guard], responses={409: {"description": "write failed; undone"}})
    def rollback() -> dict[str, Any]:
        """Undo the newest applied change set."""
        try:
            return answer(service.rollback(source="api"))
        except TuningError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc

    return router

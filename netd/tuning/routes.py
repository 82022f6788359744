"""``/v1/tuning``: the tuner's latest recommendation, and applying or rolling it back.

``GET /v1/tuning`` is open (like every read); ``POST /v1/tuning/apply`` and ``POST
/v1/tuning/rollback`` change NIC parameters and therefore require the API bearer token
(:func:`netd.api.auth.token_guard`, docs/architecture.md, Safety rules). Both answer 200 with the
applier's outcome when every file is as intended (``applied``, ``recovered``, ``nothing``);
otherwise 409 with a problem document (``type`` :data:`NOT_APPLIED`) whose ``outcome`` member is
the full outcome, file by file (``failed`` and undone, ``refused`` before any write, or
``recovery-needed``). A device or journal error outside a change set is 500.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from netd.api.auth import token_guard
from netd.api.problems import ProblemError
from netd.errors import TuningError
from netd.tuning.applier import Outcome
from netd.tuning.service import TuningService

__all__ = ["NOT_APPLIED", "tuning_router"]

NOT_APPLIED = "urn:netd:problem:tuning-not-applied"
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"description": "not applied: the outcome (failed, refused, recovery-needed) is in the body"}
}


def answer(outcome: Outcome) -> dict[str, Any]:
    doc = outcome.to_dict()
    if not outcome.ok:
        raise ProblemError(
            409,
            f"{outcome.state}: {outcome.error or 'the change set was not applied'}",
            type_=NOT_APPLIED,
            extensions={"outcome": doc},
        )
    return doc


def tuning_router(service: TuningService, token: str | None) -> APIRouter:
    router = APIRouter(prefix="/v1/tuning", tags=["tuning"])
    guard = Depends(token_guard(token))

    @router.get("")
    def tuning() -> dict[str, Any]:
        """Mode, devices and parameters in force, the latest recommendation with its explanation."""
        return service.document()

    @router.post("/apply", dependencies=[guard], responses=_CONFLICT)
    def apply() -> dict[str, Any]:
        """Write the latest recommendation's NIC changes (journaled, verified, undone on failure)."""
        try:
            return answer(service.apply_latest(source="api"))
        except TuningError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc

    @router.post("/rollback", dependencies=[guard], responses=_CONFLICT)
    def rollback() -> dict[str, Any]:
        """Close a change set left open (recovery), else undo the newest applied change set."""
        try:
            return answer(service.rollback(source="api"))
        except TuningError as exc:
            raise HTTPException(status_code=500, detail=str(exc)) from exc

    return router

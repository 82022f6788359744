"""``/v1/nccl``: the pin service endpoint, this host's hint table, and recommended NCCL settings.

* ``POST /v1/nccl/pins`` (bearer token): register one host's ranks of a multi-node communicator
  and wait for the verdict (netd.nccl.pins; the endpoint is netd.nccl.pin_route). A request whose
  client goes away before the verdict withdraws its ranks, so a daemon killed mid-registration
  cannot complete a pin. Any netd can be the pin service; the cluster points every daemon's
  ``[nccl] pin_service`` at one of them.
* ``GET /v1/nccl/pins``: the pins this netd holds (pending, applied, neutral).
* ``GET /v1/nccl/table``: this host's current table, decoded, with the conditions and the model's
  reasons; ``?format=binary`` gives the bytes (what ``netd nccl-table export`` saves).
* ``GET /v1/nccl/env``: NCCL environment settings for this host (netd.nccl.nccl_env).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query, Response

from netd.api.auth import CHECK_ATTR, header_check
from netd.nccl.pin_route import PinEndpoint
from netd.nccl.pins import PinAuthority
from netd.nccl.policy import PolicyResult

__all__ = ["nccl_router", "table_document"]


def table_document(result: PolicyResult, data: bytes) -> dict[str, Any]:
    t = result.table
    return {
        "version": f"{t.version:016x}",
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "generated_at": datetime.fromtimestamp(t.generated_at_ns / 1e9, UTC).isoformat(),
        "valid_for_s": t.valid_for_ms / 1000,
        "hint_count": t.hint_count(),
        "reason": result.reason,
        "conditions": result.conditions.as_dict(),
        "hints": [d.as_dict() for d in result.decisions],
    }


def nccl_router(
    *,
    token: str | None,
    authority: PinAuthority,
    current: Callable[[], tuple[PolicyResult, bytes] | None] | None = None,
    env: Callable[[], dict[str, Any] | None] | None = None,
) -> APIRouter:
    """The pin routes always; ``/table`` and ``/env`` where there is a host (``current``/``env``)."""
    router = APIRouter(prefix="/v1/nccl", tags=["nccl"])

    pin = PinEndpoint(authority, header_check(token))
    setattr(pin, CHECK_ATTR, pin.check_token)  # so the request guard checks it before the body is read
    # Starlette serves a non-function endpoint as a plain ASGI app (no Request/Response per call);
    # FastAPI's annotation only names the function form
    router.add_route(router.prefix + "/pins", pin, methods=["POST"])  # type: ignore[arg-type]

    @router.get("/pins")
    def pins() -> dict[str, Any]:
        """The pins this netd holds as pin authority for multi-node communicators."""
        return {"window_s": authority.window_s, "pins": authority.pins()}

    if current is not None:
        _table_route(router, current)
    if env is not None:
        _env_route(router, env)
    return router


def _table_route(router: APIRouter, current: Callable[[], tuple[PolicyResult, bytes] | None]) -> None:
    @router.get("/table", response_model=None)
    def table(format: Literal["json", "binary"] = Query("json")) -> dict[str, Any] | Response:
        """This host's hint table: decoded with its reasons, or the raw bytes."""
        got = current()
        if got is None:
            raise HTTPException(status_code=503, detail="no tick completed yet")
        result, data = got
        if format == "binary":
            return Response(
                data,
                media_type="application/octet-stream",
                headers={"X-Netd-Table-Version": f"{result.table.version:016x}"},
            )
        return table_document(result, data)


def _env_route(router: APIRouter, env: Callable[[], dict[str, Any] | None]) -> None:
    @router.get("/env")
    def nccl_env() -> dict[str, Any]:
        """Recommended NCCL environment for this host (settings the tuner plugin cannot change)."""
        doc = env()
        if doc is None:
            raise HTTPException(status_code=503, detail="no tick completed yet")
        return doc

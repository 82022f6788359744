"""``/v1/nccl``: the pin service endpoint, this host's hint table, and recommended NCCL settings.

* ``POST /v1/nccl/pins`` (bearer token): register one host's ranks of a multi-node communicator
  and wait for the verdict (netd.nccl.pins). A request whose client goes away before the verdict
  withdraws its ranks, so a daemon killed mid-registration cannot complete a pin. Any netd can be
  the pin service; the cluster points every daemon's ``[nccl] pin_service`` at one of them.
* ``GET /v1/nccl/pins``: the pins this netd holds (pending, applied, neutral).
* ``GET /v1/nccl/table``: this host's current table, decoded, with the conditions and the model's
  reasons; ``?format=binary`` gives the bytes (what ``netd nccl-table export`` saves).
* ``GET /v1/nccl/env``: NCCL environment settings for this host (netd.nccl.nccl_env).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from netd.api.auth import CHECK_ATTR, header_check
from netd.errors import HintTableError
from netd.nccl.pin_schema import PinRequestBody, response_body
from netd.nccl.pins import PinAuthority, PinVerdict, unless_gone
from netd.nccl.policy import PolicyResult
from netd.nccl.table import unpack_table

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

    checked: dict[bytes, None] = {}  # digests of offers already validated (tables change per tick)
    answers: dict[PinVerdict, bytes] = {}  # the JSON of recent verdicts

    def check_offer(offer: bytes) -> None:
        digest = hashlib.sha256(offer).digest()
        if digest not in checked:
            unpack_table(offer)  # the same checks as the plugin: a broken offer is refused
            if len(checked) >= 256:
                checked.clear()
            checked[digest] = None

    check_token = header_check(token)

    async def pin(request: Request) -> Response:
        """Register one host's ranks; answers once every rank asked (apply) or the pin's deadline passed.

        A plain route, not a FastAPI one: a 4096-rank communicator is 512 of these within a second,
        and FastAPI's per-request dependency and model machinery cost more than the pin itself."""
        refused = check_token(request.headers.get("authorization"))  # before the body is read
        if refused is not None:
            raise refused
        try:
            body = PinRequestBody.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"detail": json.loads(exc.json(include_url=False))}, status_code=422)
        key = body.key()
        if key.n_nodes > key.n_ranks:
            raise HTTPException(
                status_code=422, detail=f"n_nodes {key.n_nodes} exceeds n_ranks {key.n_ranks}"
            )
        try:
            offer = body.table_bytes()
            if offer is not None:
                check_offer(offer)
        except (ValueError, HintTableError) as exc:
            raise HTTPException(status_code=422, detail=f"table: {exc}") from exc
        joined = asyncio.ensure_future(
            authority.join(
                key,
                body.member_ids(),
                offer,
                body.host,
                digest=int(body.static_digest, 16),
                # Half the asker's budget: it counts from when the daemon *sent* the request, and a
                # busy service reads it later; deciding after the daemon gave up would split a pin.
                budget_s=body.budget_ms / 2000,
            )
        )
        # the body is read: the next ASGI message is the client's disconnect
        verdict = await unless_gone(joined, request.receive())
        if verdict is None:
            raise HTTPException(status_code=499, detail="client went away before the verdict")
        encoded = answers.get(verdict)
        if encoded is None:  # every host of a pin gets the same verdict: serialise it once
            encoded = response_body(key, verdict).model_dump_json().encode()
            if len(answers) >= 64:
                answers.clear()
            answers[verdict] = encoded
        return Response(encoded, media_type="application/json")

    setattr(pin, CHECK_ATTR, check_token)  # so the request guard checks it before the body is read
    router.add_route(router.prefix + "/pins", pin, methods=["POST"])

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

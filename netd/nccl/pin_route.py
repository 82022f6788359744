"""``POST /v1/nccl/pins`` as a bare ASGI endpoint: the one route that must keep up with a whole job.

A 4096-rank communicator on 8-GPU hosts is 512 of these requests within a second, all on the pin
service's one event loop, and the pin is abandoned if they are not all read within half the
ranks' budget. So the route does only the pin's own work (netd.nccl.routes keeps the documents):

* it is an ASGI callable, not a function: Starlette hands it the raw scope, receive and send,
  without building a Request and a Response per call;
* the token is checked from the raw headers before the body is read (and the daemon's request
  guard does the same earlier through :data:`netd.api.auth.CHECK_ATTR`);
* a host's table offer is decoded and checked only when it is pinned (the registration opens the
  pin), once per distinct offer; every other offer is not read;
* every host of a pin gets the same verdict, serialised once; a host that asks with
  ``?table=unless-offered`` and offered the pinned table (the first asker, or any host whose table
  is byte-equal) gets ``table_as_offered`` instead of the ~21 KB table back.

Errors are raised as HTTPException (before anything is sent), so the app's problem handlers shape
them exactly as for every other route.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import HTTPException
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from netd.errors import HintTableError
from netd.nccl.pin_schema import UNLESS_OFFERED, PinRequestBody, response_body
from netd.nccl.pins import PinAuthority, PinVerdict, until_decided
from netd.nccl.table import unpack_table

__all__ = ["MAX_PIN_BODY", "PinEndpoint"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# 65536 members of 19 bytes and a base64 table of ~21 KB fit; the daemon's guard may be stricter
MAX_PIN_BODY = 2 << 20
_JSON = (b"content-type", b"application/json")


class _Offers:
    """base64 offer -> its checked table bytes, for the last few distinct offers."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._seen: dict[str, bytes] = {}
        self._last: tuple[str | None, bytes | None] = (None, None)

    def checked(self, body: PinRequestBody) -> bytes | None:
        if body.table is None:
            return None
        if body.table == self._last[0]:  # a compare of two strings costs less than hashing one
            return self._last[1]
        got = self._seen.get(body.table)
        if got is None:
            got = body.table_bytes()
            assert got is not None
            unpack_table(got)  # the same checks as the plugin: a broken offer is refused
            if len(self._seen) >= self.size:
                self._seen.clear()
            self._seen[body.table] = got
        self._last = (body.table, got)
        return got


class PinEndpoint:
    """Register one host's ranks; answer once every rank asked (apply) or the pin's deadline passed."""

    def __init__(self, authority: PinAuthority, check_token: Callable[[str | None], HTTPException | None]):
        self.authority = authority
        self.check_token = check_token
        self._offers = _Offers()
        self._answers: dict[tuple[PinVerdict, bool], bytes] = {}  # the JSON of recent verdicts
        self._b64: tuple[bytes | None, str] = (None, "")  # the last pinned table, base64

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        refused = self.check_token(authorization)  # before the body is read
        if refused is not None:
            raise refused
        raw = await _read_body(receive)
        if raw is None:
            return  # the client went away before its request was complete: nothing registered
        try:
            body = PinRequestBody.model_validate_json(raw)
        except ValidationError as exc:
            answer = JSONResponse({"detail": json.loads(exc.json(include_url=False))}, status_code=422)
            await answer(scope, receive, send)
            return
        key = body.key()
        if key.n_nodes > key.n_ranks:
            raise HTTPException(
                status_code=422, detail=f"n_nodes {key.n_nodes} exceeds n_ranks {key.n_ranks}"
            )
        members = body.member_ids()
        # Only the first asker's offer is pinned, so it is decoded and checked only then: decoding
        # and checking each of 512 hosts' tables (all different: each is stamped by its host's
        # tick) cost the service far more than everything else together.
        try:
            got = self.authority.register(
                key,
                members,
                lambda: self._offers.checked(body),
                body.host,
                digest=int(body.static_digest, 16),
                # Half the asker's budget: it counts from when the daemon *sent* the request, and a
                # busy service reads it later; deciding after the daemon gave up would split a pin.
                budget_s=body.budget_ms / 2000,
            )
        except (ValueError, HintTableError) as exc:
            raise HTTPException(status_code=422, detail=f"table: {exc}") from exc
        if isinstance(got, PinVerdict):
            verdict = got
        else:
            waited: PinVerdict | None = None
            try:
                # the body is read: the next ASGI message is the client's disconnect
                waited = await until_decided(got, receive())
            finally:
                if waited is None:  # gone, or cancelled: a pin must not complete without them
                    self.authority.withdraw(key, members, got)
            if waited is None:
                raise HTTPException(status_code=499, detail="client went away before the verdict")
            verdict = waited
        # every host of a pin gets the same verdict: serialised once (twice if some hosts offered
        # the pinned table and asked, with ?table=unless-offered, not to get it back)
        as_offered = (
            verdict.table is not None
            and body.table is not None
            and scope.get("query_string") == UNLESS_OFFERED
            and body.table == self._encoded(verdict.table)  # differs within ~60 characters if at all
        )
        encoded = self._answers.get((verdict, as_offered))
        if encoded is None:
            encoded = response_body(key, verdict, as_offered).model_dump_json().encode()
            if len(self._answers) >= 64:
                self._answers.clear()
            self._answers[(verdict, as_offered)] = encoded
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [_JSON, (b"content-length", b"%d" % len(encoded))],
            }
        )
        await send({"type": "http.response.body", "body": encoded})

    def _encoded(self, table: bytes) -> str:
        if self._b64[0] is not table:
            self._b64 = (table, base64.b64encode(table).decode())
        return self._b64[1]


async def _read_body(receive: Receive) -> bytes | None:
    """The request body (413 past :data:`MAX_PIN_BODY`); None if the client disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_PIN_BODY:
            raise HTTPException(status_code=413, detail=f"pin request over {MAX_PIN_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)

"""The daemon's side of multi-node pins: ask the pin service (``POST /v1/nccl/pins``) for one rank.

Errors are sorted by one question — could the service have registered this rank?

* no: the connection was never made (refused, no route, connect or pool timeout), or the service
  rejected the request before its handler ran (401/403 token, 422 validation). Then the pin
  cannot complete without this rank, so NEUTRAL (NCCL untouched) is what every peer ends with too;
* maybe: anything after the request was sent (read timeout, reset, 5xx, a malformed answer).
  Then FAIL: the plugin fails init rather than guess.

No retries: a retry after "maybe" could register the rank in a restarted service and change
nothing for peers that already have their verdict.
"""

from __future__ import annotations

import base64
import logging

import httpx
from pydantic import ValidationError

from netd.nccl.pin_schema import PinRequestBody, PinResponseBody, verdict_from_body
from netd.nccl.pins import PinKey, PinVerdict

__all__ = ["RemotePins"]

log = logging.getLogger(__name__)

_NOT_REGISTERED = {401, 403, 404, 405, 413, 415, 422}  # refused before the handler ran
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class RemotePins:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout_s: float,
        host: str,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.host = host
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
            # one long-poll per waiting rank: room for many communicators initialising at once
            limits=httpx.Limits(max_connections=1024, max_keepalive_connections=64),
            transport=transport,
        )

    async def join(self, key: PinKey, member: int, table: bytes | None) -> PinVerdict:
        body = PinRequestBody(
            comm_id=f"{key.comm_id:016x}",
            n_ranks=key.n_ranks,
            n_nodes=key.n_nodes,
            member=f"{member:016x}",
            host=self.host,
            table=None if table is None else base64.b64encode(table).decode(),
        )
        where = f"pin service {self.base_url}"
        try:
            response = await self._client.post("/v1/nccl/pins", json=body.model_dump())
        except _NEVER_SENT as exc:
            log.warning("%s unreachable for %s: %s", where, key, exc)
            return PinVerdict.neutral(
                f"{where} unreachable ({type(exc).__name__}): this rank is not registered"
            )
        except httpx.HTTPError as exc:
            log.warning("%s: no verdict for %s: %s", where, key, exc)
            return PinVerdict.fail(f"{where} gave no verdict ({type(exc).__name__})")
        if response.status_code in _NOT_REGISTERED:
            log.warning("%s refused %s: HTTP %d", where, key, response.status_code)
            return PinVerdict.neutral(
                f"{where} refused the request (HTTP {response.status_code}): not registered"
            )
        if response.status_code != 200:
            return PinVerdict.fail(f"{where} answered HTTP {response.status_code}")
        try:
            answer = PinResponseBody.model_validate_json(response.content)
            if int(answer.comm_id, 16) != key.comm_id:
                raise ValueError(f"verdict for comm {answer.comm_id}")
            return verdict_from_body(answer)
        except (ValidationError, ValueError) as exc:
            return PinVerdict.fail(f"{where} sent a malformed verdict ({type(exc).__name__})")

    async def aclose(self) -> None:
        await self._client.aclose()

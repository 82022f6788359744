"""The daemon's side of multi-node pins: ask the pin service (``POST /v1/nccl/pins``) for this host's ranks.

Ranks of one communicator on one host arrive within milliseconds of each other; they are sent as
one request (``members``), flushed as soon as the host's expected share (n_ranks / n_nodes) is in
or ``coalesce_s`` after the first. So the service does one small request per host, the table
travels once per host each way, and a 4096-rank communicator costs the service 512 requests on
8-GPU hosts, not 4096.

Errors are sorted by one question — could the service have registered these ranks?

* no: the connection was never made (refused, no route, connect or pool timeout), or the service
  rejected the request before its handler ran (401/403 token, 422 validation — also what a pin
  service of another schema answers). Then the pin cannot complete without them: NEUTRAL, and
  every peer ends NEUTRAL too;
* maybe: anything after the request was sent (read timeout, reset, 5xx, a malformed answer).
  The service withdraws members whose request went away undecided, so a dropped request cannot
  complete a pin; the ranks here get NEUTRAL and a warning (docs/nccl.md, the residual case).

No retries: a retry after "maybe" could register the ranks in a restarted service.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass, field

import httpx
from pydantic import ValidationError

from netd.nccl.pin_schema import PinRequestBody, PinResponseBody, verdict_from_body
from netd.nccl.pins import PinKey, PinVerdict

__all__ = ["RemotePins"]

log = logging.getLogger(__name__)

_NOT_REGISTERED = {401, 403, 404, 405, 413, 415, 422}  # refused before the handler ran
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)
_MARGIN_S = 0.05  # kept from each rank's budget for the answer's way back to the plugin


@dataclass(slots=True)
class _Batch:
    key: PinKey
    digest: int
    offer: bytes | None
    deadline: float  # monotonic: the earliest member's, less the margin
    members: list[int] = field(default_factory=list)
    result: asyncio.Future[PinVerdict] | None = None
    timer: asyncio.TimerHandle | None = None


class RemotePins:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout_s: float,
        host: str,
        transport: httpx.AsyncBaseTransport | None = None,
        coalesce_s: float = 0.02,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.host = host
        self.timeout_s = timeout_s
        self.coalesce_s = coalesce_s
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
            # one long-poll per waiting communicator: room for many initialising at once
            limits=httpx.Limits(max_connections=1024, max_keepalive_connections=64),
            transport=transport,
        )
        self._open: dict[tuple[PinKey, int], _Batch] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def join(
        self, key: PinKey, member: int, table: bytes | None, *, digest: int = 0, budget_s: float | None = None
    ) -> PinVerdict:
        """Register one local rank (batched with its host's other ranks); its verdict."""
        loop = asyncio.get_running_loop()
        budget = self.timeout_s if budget_s is None else min(budget_s, self.timeout_s)
        deadline = time.monotonic() + budget - _MARGIN_S
        batch = self._open.get((key, digest))
        if batch is None:
            batch = _Batch(key, digest, table, deadline, result=loop.create_future())
            self._open[(key, digest)] = batch
            batch.timer = loop.call_later(self.coalesce_s, self._flush, batch)
        batch.members.append(member)
        batch.deadline = min(batch.deadline, deadline)
        if len(batch.members) >= max(key.n_ranks // key.n_nodes, 1):
            self._flush(batch)  # this host's share is in: no reason to wait
        assert batch.result is not None
        return await asyncio.shield(batch.result)  # one rank going away does not withdraw the others

    def _flush(self, batch: _Batch) -> None:
        if self._open.get((batch.key, batch.digest)) is not batch:
            return  # already sent
        del self._open[(batch.key, batch.digest)]
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._send(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: _Batch) -> None:
        assert batch.result is not None
        try:
            verdict = await self._post(batch)
        except Exception as exc:  # a bug here must still answer every waiting rank
            log.exception("pin request for %s failed", batch.key)
            verdict = PinVerdict.neutral(f"netd failed while pinning ({type(exc).__name__})")
        if not batch.result.done():
            batch.result.set_result(verdict)

    async def _post(self, batch: _Batch) -> PinVerdict:
        key = batch.key
        budget_s = batch.deadline - time.monotonic()
        where = f"pin service {self.base_url}"
        if budget_s <= 0:
            return PinVerdict.neutral(f"no time left to ask the {where}: not registered")
        body = PinRequestBody(
            comm_id=f"{key.comm_id:016x}",
            n_ranks=key.n_ranks,
            n_nodes=key.n_nodes,
            members=[f"{m:016x}" for m in batch.members],
            host=self.host,
            table=None if batch.offer is None or batch.digest else base64.b64encode(batch.offer).decode(),
            static_digest=f"{batch.digest:x}",
            budget_ms=int(budget_s * 1000),
        )
        try:
            response = await self._client.post(
                "/v1/nccl/pins", json=body.model_dump(), timeout=httpx.Timeout(budget_s, connect=budget_s)
            )
        except _NEVER_SENT as exc:
            log.warning("%s unreachable for %s: %s", where, key, exc)
            return PinVerdict.neutral(f"{where} unreachable ({type(exc).__name__}): not registered")
        except httpx.HTTPError as exc:
            log.warning("%s: no verdict for %s: %s", where, key, exc)
            return PinVerdict.neutral(f"{where} gave no verdict ({type(exc).__name__})")
        if response.status_code in _NOT_REGISTERED:
            log.warning("%s refused %s: HTTP %d", where, key, response.status_code)
            return PinVerdict.neutral(
                f"{where} refused the request (HTTP {response.status_code}): not registered"
            )
        if response.status_code != 200:
            return PinVerdict.neutral(f"{where} answered HTTP {response.status_code}")
        try:
            answer = PinResponseBody.model_validate_json(response.content)
            if int(answer.comm_id, 16) != key.comm_id:
                raise ValueError(f"verdict for comm {answer.comm_id}")
            return verdict_from_body(answer)
        except (ValidationError, ValueError) as exc:
            return PinVerdict.neutral(f"{where} sent a malformed verdict ({type(exc).__name__})")

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self._client.aclose()

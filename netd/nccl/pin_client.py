"""The daemon's side of multi-node pins: ask the pin service (``POST /v1/nccl/pins``) for this host's ranks.

Ranks of one communicator on one host arrive within milliseconds of each other; they are sent as
one request (``members``), flushed as soon as the host's expected share (n_ranks / n_nodes) is in
or ``coalesce_s`` after the first. So the service does one small request per host, the table
travels at most once per host each way (not back when the pinned table is the one this host
offered: ``?table=unless-offered``), and a 4096-rank communicator costs the service 512 requests
on 8-GPU hosts, not 4096.

Errors are sorted by one question — could the service have registered these ranks?

* no: the connection was never made (refused, no route, connect timeout), or the service
  rejected the request before its handler ran (401/403 token, 422 validation — also what a pin
  service of another schema answers). Then the pin cannot complete without them: NEUTRAL, and
  every peer ends NEUTRAL too;
* maybe: anything after the request was sent (timeout, reset, 5xx, a malformed answer). The
  service withdraws members whose request went away undecided, so a dropped request cannot
  complete a pin; the ranks here get FAIL — "no verdict": their plugin leaves NCCL alone and
  warns that peers may differ (docs/nccl.md, the case no protocol closes).

No retries: a retry after "maybe" could register the ranks in a restarted service.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import ssl
import time
from dataclasses import dataclass, field

from pydantic import ValidationError

from netd.nccl.pin_http import PinHttp
from netd.nccl.pin_schema import UNLESS_OFFERED, PinResponseBody, request_json, verdict_from_body
from netd.nccl.pins import PinKey, PinVerdict

__all__ = ["RemotePins"]

log = logging.getLogger(__name__)

_NOT_REGISTERED = {401, 403, 404, 405, 413, 415, 422}  # refused before the handler ran
_MARGIN_S = 0.05  # kept from each rank's budget for the answer's way back to the plugin


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying context per process: loading the CA store costs ~20 ms per client otherwise."""
    return ssl.create_default_context()


@dataclass(slots=True)
class _Batch:
    key: PinKey
    digest: int
    offer: bytes | None
    deadline: float  # monotonic: the earliest member's, less the margin
    members: list[int] = field(default_factory=list)
    # one per rank: a rank that goes away cancels only its own (no shield, no extra callbacks)
    waiters: list[asyncio.Future[PinVerdict]] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None


class RemotePins:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout_s: float,
        host: str,
        coalesce_s: float = 0.02,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.host = host
        self.timeout_s = timeout_s
        self.coalesce_s = coalesce_s
        self._http = PinHttp(self.base_url, token, _tls())
        self._open: dict[tuple[PinKey, int], _Batch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._b64: tuple[bytes, str] | None = None

    async def join(
        self, key: PinKey, member: int, table: bytes | None, *, digest: int = 0, budget_s: float | None = None
    ) -> PinVerdict:
        """Register one local rank (batched with its host's other ranks); its verdict."""
        loop = asyncio.get_running_loop()
        budget = self.timeout_s if budget_s is None else min(budget_s, self.timeout_s)
        deadline = time.monotonic() + budget - _MARGIN_S
        batch = self._open.get((key, digest))
        if batch is None:
            batch = _Batch(key, digest, table, deadline)
            self._open[(key, digest)] = batch
            batch.timer = loop.call_later(self.coalesce_s, self._flush, batch)
        batch.members.append(member)
        waiter: asyncio.Future[PinVerdict] = loop.create_future()
        batch.waiters.append(waiter)
        batch.deadline = min(batch.deadline, deadline)
        if len(batch.members) >= max(key.n_ranks // key.n_nodes, 1):
            self._flush(batch)  # this host's share is in: no reason to wait
        return await waiter  # one rank going away does not withdraw the others

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
        try:
            verdict = await self._post(batch)
        except Exception as exc:  # a bug here must still answer every waiting rank
            log.exception("pin request for %s failed", batch.key)
            verdict = PinVerdict.unknown(f"netd failed while pinning ({type(exc).__name__})")
        for waiter in batch.waiters:
            if not waiter.done():
                waiter.set_result(verdict)

    async def _post(self, batch: _Batch) -> PinVerdict:
        key = batch.key
        budget_s = batch.deadline - time.monotonic()
        where = f"pin service {self.base_url}"
        if budget_s <= 0:
            return PinVerdict.neutral(f"no time left to ask the {where}: not registered")
        offer = None if batch.offer is None or batch.digest else self._encoded(batch.offer)
        body = request_json(key, batch.members, self.host, offer, batch.digest, int(budget_s * 1000))
        path = "/v1/nccl/pins?" + UNLESS_OFFERED.decode() if offer is not None else "/v1/nccl/pins"
        sent = await self._http.post(path, body, budget_s)
        if not sent.sent:
            log.warning("%s unreachable for %s: %s", where, key, sent.error)
            return PinVerdict.neutral(f"{where} unreachable ({sent.error}): not registered")
        if sent.status == 0:
            log.warning("%s: no verdict for %s: %s", where, key, sent.error)
            return PinVerdict.unknown(f"{where} gave no verdict ({sent.error})")
        if sent.status in _NOT_REGISTERED:
            log.warning("%s refused %s: HTTP %d", where, key, sent.status)
            return PinVerdict.neutral(f"{where} refused the request (HTTP {sent.status}): not registered")
        if sent.status != 200:
            return PinVerdict.unknown(f"{where} answered HTTP {sent.status}")
        try:
            answer = PinResponseBody.model_validate_json(sent.body)
            if int(answer.comm_id, 16) != key.comm_id:
                raise ValueError(f"verdict for comm {answer.comm_id}")
            # the verdict's table is most often the one this host offered: not sent back, or (by an
            # older service) sent back and not decoded again
            offered = (offer, batch.offer) if offer is not None and batch.offer is not None else None
            return verdict_from_body(answer, offered)
        except (ValidationError, ValueError) as exc:
            return PinVerdict.unknown(f"{where} sent a malformed verdict ({type(exc).__name__})")

    def _encoded(self, table: bytes) -> str:
        """base64 of the daemon's table, once per table (it changes per tick, pins come by the rank)."""
        if self._b64 is None or self._b64[0] != table:
            self._b64 = (table, base64.b64encode(table).decode())
        return self._b64[1]

    async def connect(self) -> bool:
        """Open a connection to the pin service ahead of the first communicator."""
        return await self._http.connect(self.timeout_s)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self._http.aclose()

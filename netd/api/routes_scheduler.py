"""POST /scheduler/filter and /scheduler/prioritize: the Kubernetes scheduler-extender protocol.

Point kube-scheduler's ``extenders[].urlPrefix`` at ``http://<netd>/scheduler`` with ``filterVerb:
filter`` and ``prioritizeVerb: prioritize`` (docs/service.md has a complete KubeSchedulerConfiguration).
Both answer from the latest published snapshot (no I/O per request, except a pod group's peers).

The body is read on the event loop (bounded by netd.api.guard) and handed, as bytes or a memfd
(netd.api.extender_body), to a worker process (netd.api.extender_pool) that parses and scores it and
hands back the answer's bytes and the slices of the body it echoes: a 25 MB NodeList's parse or a
5000-name scoring on this interpreter would stall /healthz and every other request for its duration.
Parsing reads only the names and the pod's metadata (netd.api.extender_wire); scores come from a
:class:`NodeIndex` the worker builds once per congestion report from a score table. Nodes netd does not
know, and every node while the view is older than ``scheduler.stale_after`` or before the first one
exists, follow ``scheduler.unknown_nodes``; how many there were is said in the ``X-Netd-Unknown-Nodes``
header.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool

from netd.api.extender_body import PartsResponse, RequestBody
from netd.api.extender_pool import ExtenderPool, Tables, shared_pool
from netd.api.extender_types import ExtenderArgs, ExtenderFilterResult, HostPriority
from netd.api.extender_wire import unpack_parts
from netd.api.service_view import EncodedScores, ServiceView
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import UnknownPolicy
from netd.congestion.scorer import CongestionReport
from netd.errors import NetdError

__all__ = ["scheduler_router", "warm_extender"]

log = logging.getLogger(__name__)
UNKNOWN_HEADER = "X-Netd-Unknown-Nodes"


def _request_body(model: type[Any]) -> dict[str, Any]:
    """The OpenAPI requestBody of a route that reads its body itself (netd.api.problems lifts $defs)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def raise_problem(said: list[Any]) -> NoReturn:
    """Raise what the worker's reading raised, for the app's problem handlers (a 422 names fields)."""
    what, status, detail = said
    if what == "invalid":
        raise RequestValidationError(detail)
    if what == "http":
        raise HTTPException(status, detail)
    raise NetdError(f"extender worker: {detail}")


def warm_extender(app: FastAPI) -> None:
    """Start the extender's workers and send them the current score table, so that the first request
    waits for neither (netd fabric before it listens; it takes a second or two at 5000 nodes)."""
    for warm in getattr(app.state, "extender_warmers", ()):
        warm()


def scheduler_router(
    view: ServiceView,
    cfg: SchedulerConfig | None = None,
    pool: ExtenderPool | None = None,
    warmers: list[Callable[[], None]] | None = None,
) -> APIRouter:
    """``pool``: the worker processes that read and score the requests (default: the process's);
    ``warmers``: where to add this router's :func:`warm_extender` step."""
    cfg = cfg or SchedulerConfig()
    router = APIRouter(prefix="/scheduler", tags=["kubernetes scheduler extender"])
    tables = Tables(pool or shared_pool(), UnknownPolicy(cfg.unknown_nodes, cfg.unknown_node_score))

    def report() -> CongestionReport | EncodedScores | None:
        snap = view.current()
        if snap is None or time.time() - snap.timestamp > cfg.stale_after:
            return None  # no view, or too old to vouch for anyone: every node is unknown
        # scores encoded where the report was built (netd fabric): the report itself is not decoded
        return snap.scores if snap.scores is not None else snap.congestion

    def warm() -> None:
        tables.pool.start()
        tables.pool.broadcast(tables, tables.wanted(report()))

    if warmers is not None:
        warmers.append(warm)

    def peers(group: str) -> Mapping[str, int] | None:
        return view.peers(cfg.pod_group_label, group)

    def answer(kind: bytes, body: RequestBody) -> Response:
        meta = [tables.key, tables.wanted(report()), cfg.pod_group_label, cfg.peer_weight]
        try:
            got, said, payload = tables.pool.call(tables, kind, meta, body.data, peers, body.fd)
        except NetdError as exc:
            raise HTTPException(503, "the extender's workers are restarting", {"Retry-After": "1"}) from exc
        if got == b"E":
            raise_problem(said)
        unknown, removed, pod_name, _, plan = said
        if removed:
            log.info("filter %s: removed %d nodes", pod_name, removed)
        headers = {UNKNOWN_HEADER: str(unknown)}
        return PartsResponse(unpack_parts(plan, payload, body.data), headers, body)

    async def respond(kind: bytes, request: Request) -> Response:
        body = await RequestBody.read(request)
        try:
            return await run_in_threadpool(answer, kind, body)
        except BaseException:
            body.close()  # no answer will hold it
            raise

    @router.post("/filter", response_model=ExtenderFilterResult, openapi_extra=_request_body(ExtenderArgs))
    async def filter_nodes(request: Request) -> Response:
        """Remove nodes whose RoCE ports are down or in a PFC storm (``FailedAndUnresolvableNodes``:
        preempting pods would not help). Answers ``NodeNames`` when asked with ``NodeNames``
        (nodeCacheCapable), else the passing ``Nodes`` objects unchanged."""
        return await respond(b"F", request)

    @router.post("/prioritize", response_model=list[HostPriority], openapi_extra=_request_body(ExtenderArgs))
    async def prioritize(request: Request) -> Response:
        """Score every candidate 0–10: higher under less congested ToRs and spines and, for a pod of a
        multi-node job (``scheduler.pod_group_label``), on ToRs that already hold its peers."""
        return await respond(b"P", request)

    return router

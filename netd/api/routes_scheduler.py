"""POST /scheduler/filter and /scheduler/prioritize: the Kubernetes scheduler-extender protocol.

Point kube-scheduler's ``extenders[].urlPrefix`` at ``http://<netd>/scheduler`` with ``filterVerb:
filter`` and ``prioritizeVerb: prioritize`` (docs/service.md has a complete KubeSchedulerConfiguration).
Both answer from the latest published snapshot (no I/O per request, except a pod group's peers).

The body is read on the event loop (bounded by netd.api.guard) and everything else, parsing
included, runs in the thread pool: a 25 MB NodeList must not stall /healthz. Parsing reads only the
names and the pod's metadata (netd.api.extender_wire); scores come from a :class:`NodeIndex` built
once per congestion report. Nodes netd does not know, and every node while the view is older than
``scheduler.stale_after`` or before the first one exists, follow ``scheduler.unknown_nodes``; how many
there were is said in the ``X-Netd-Unknown-Nodes`` header.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from netd.api.extender_types import ExtenderArgs, ExtenderFilterResult, HostPriority
from netd.api.extender_wire import encode_filter, encode_priorities, read_args
from netd.api.service_view import ServiceView
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import NodeIndex, UnknownPolicy
from netd.congestion.scorer import CongestionReport

__all__ = ["scheduler_router"]

log = logging.getLogger(__name__)
UNKNOWN_HEADER = "X-Netd-Unknown-Nodes"


class _IndexCache:
    """One NodeIndex per congestion report, shared by every request until the next report.

    A small report's index is built by the first request that sees it (a few ms). A big one (5000
    nodes x 8 ports took 0.9 s on a loaded machine) is built by a thread while requests keep being
    answered from the previous index, one refresh older, and swapped in when ready: no request waits
    for a rebuild, so prioritize stays a lookup."""

    INLINE_PORTS = 2000

    def __init__(self, policy: UnknownPolicy) -> None:
        self.policy = policy
        self._lock = threading.Lock()
        self._memo: tuple[CongestionReport | None, NodeIndex] = (None, NodeIndex(None, policy))
        self._building: CongestionReport | None = None

    def get(self, report: CongestionReport | None) -> NodeIndex:
        memo = self._memo
        if memo[0] is report:
            return memo[1]
        small = report is None or len(report.ports) <= self.INLINE_PORTS
        if small or memo[0] is None:  # nothing older worth answering from
            with self._lock:  # concurrent requests after a new report build it once
                if self._memo[0] is not report:
                    self._memo = (report, NodeIndex(report, self.policy))
                return self._memo[1]
        with self._lock:
            if self._building is not report:
                self._building = report
                threading.Thread(
                    target=self._build, args=(report,), name="netd-node-index", daemon=True
                ).start()
        return memo[1]

    def _build(self, report: CongestionReport) -> None:
        index = NodeIndex(report, self.policy)
        with self._lock:
            if self._building is report:
                self._memo = (report, index)


def _request_body(model: type[Any]) -> dict[str, Any]:
    """The OpenAPI requestBody of a route that reads its body itself (netd.api.problems lifts $defs)."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def scheduler_router(view: ServiceView, cfg: SchedulerConfig | None = None) -> APIRouter:
    cfg = cfg or SchedulerConfig()
    router = APIRouter(prefix="/scheduler", tags=["kubernetes scheduler extender"])
    cache = _IndexCache(UnknownPolicy(cfg.unknown_nodes, cfg.unknown_node_score))

    def index() -> NodeIndex:
        snap = view.current()
        if snap is None or time.time() - snap.timestamp > cfg.stale_after:
            return cache.get(None)  # no view, or too old to vouch for anyone: every node is unknown
        return cache.get(snap.congestion)

    def answer(data: bytes, unknown: int) -> Response:
        headers = {UNKNOWN_HEADER: str(unknown)}
        return Response(data, media_type="application/json", headers=headers)

    def filter_sync(body: bytes) -> Response:
        asked = read_args(body)
        passed, failed, unknown = index().filter(asked.names)
        if failed:
            log.info("filter %s: removed %d nodes", asked.pod_name, len(failed))
        return answer(encode_filter(asked, passed, failed), unknown)

    def prioritize_sync(body: bytes) -> Response:
        asked = read_args(body)
        group = asked.group(cfg.pod_group_label)
        peers = view.peers(cfg.pod_group_label, group) if group else None
        scores, unknown = index().prioritize(asked.names, peers, cfg.peer_weight)
        return answer(encode_priorities(scores), unknown)

    @router.post("/filter", response_model=ExtenderFilterResult, openapi_extra=_request_body(ExtenderArgs))
    async def filter_nodes(request: Request) -> Response:
        """Remove nodes whose RoCE ports are down or in a PFC storm (``FailedAndUnresolvableNodes``:
        preempting pods would not help). Answers ``NodeNames`` when asked with ``NodeNames``
        (nodeCacheCapable), else the passing ``Nodes`` objects unchanged."""
        return await run_in_threadpool(filter_sync, await request.body())

    @router.post("/prioritize", response_model=list[HostPriority], openapi_extra=_request_body(ExtenderArgs))
    async def prioritize(request: Request) -> Response:
        """Score every candidate 0–10: higher under less congested ToRs and spines and, for a pod of a
        multi-node job (``scheduler.pod_group_label``), on ToRs that already hold its peers."""
        return await run_in_threadpool(prioritize_sync, await request.body())

    return router

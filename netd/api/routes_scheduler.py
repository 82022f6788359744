"""POST /scheduler/filter and /scheduler/prioritize: the Kubernetes scheduler-extender protocol.

Point kube-scheduler's ``extenders[].urlPrefix`` at ``http://<netd>/scheduler`` with ``filterVerb:
filter`` and ``prioritizeVerb: prioritize`` (docs/service.md has a complete KubeSchedulerConfiguration).
Both answer from the latest published snapshot (no I/O per request), so they take about a millisecond
even for hundreds of nodes. Before the first snapshot exists every node passes and scores the neutral
``scheduler.unknown_node_score``: with no evidence netd vetoes nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from netd.api.extender_types import ExtenderArgs, ExtenderFilterResult, HostPriority, NodeList
from netd.api.service_view import ServiceView
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import NodeIndex
from netd.congestion.scorer import CongestionReport

__all__ = ["scheduler_router"]

log = logging.getLogger(__name__)


class _IndexCache:
    """One NodeIndex per congestion report, shared by every request until the next report."""

    def __init__(self) -> None:
        self._memo: tuple[CongestionReport | None, NodeIndex] = (None, NodeIndex(None))

    def get(self, report: CongestionReport | None) -> NodeIndex:
        memo = self._memo
        if memo[0] is report:
            return memo[1]
        index = NodeIndex(report)
        self._memo = (report, index)
        return index


def scheduler_router(view: ServiceView, cfg: SchedulerConfig | None = None) -> APIRouter:
    cfg = cfg or SchedulerConfig()
    router = APIRouter(prefix="/scheduler", tags=["kubernetes scheduler extender"])
    cache = _IndexCache()

    def index() -> NodeIndex:
        snap = view.current()
        return cache.get(snap.congestion if snap is not None else None)

    @router.post("/filter", response_model=ExtenderFilterResult)
    async def filter_nodes(args: ExtenderArgs) -> dict[str, Any]:
        """Remove nodes whose RoCE ports are down or in a PFC storm (``FailedAndUnresolvableNodes``:
        preempting pods would not help). Answers ``NodeNames`` when asked with ``NodeNames``
        (nodeCacheCapable), else the passing ``Nodes`` objects unchanged."""
        passed, failed = index().filter(args.candidates())
        if failed:
            log.info("filter %s: removed %s", args.Pod.metadata.name, failed)
        result: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": failed,
            "Error": "",
        }
        if args.NodeNames is not None:
            result["NodeNames"] = passed
        elif args.Nodes is not None:
            keep = set(passed)
            items = [n for n in args.Nodes.items if n["metadata"]["name"] in keep]
            result["Nodes"] = NodeList.model_validate(
                {**args.Nodes.model_dump(exclude={"items"}), "items": items}
            )
        return result

    @router.post("/prioritize", response_model=list[HostPriority])
    async def prioritize(args: ExtenderArgs) -> list[dict[str, Any]]:
        """Score every candidate 0–10: higher under less congested ToRs and spines and, for a pod of a
        multi-node job (``scheduler.pod_group_label``), on ToRs that already hold its peers."""
        group = args.Pod.group(cfg.pod_group_label)
        # Handlers are async (no thread hop per request); a peer lookup may do I/O, so it goes to a thread.
        peers = await run_in_threadpool(view.peers, cfg.pod_group_label, group) if group else None
        scores = index().prioritize(args.candidates(), peers, cfg.peer_weight, cfg.unknown_node_score)
        return [{"Host": name, "Score": score} for name, score in scores]

    return router

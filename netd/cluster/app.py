"""The HTTP app of ``netd fabric`` with a Prometheus behind it: the cluster's topology, congestion and
scheduler extender, health, and the fabric service's own metrics. Per-host routes (/v1/ports) are
not served here: each host's daemon serves them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Response
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from netd.api.base import base_app
from netd.api.guard import GuardLimits
from netd.api.routes_scheduler import scheduler_router
from netd.api.routes_topology import topology_router
from netd.api.service_view import ServiceView
from netd.config.service import SchedulerConfig

__all__ = ["create_fabric_app"]


def create_fabric_app(
    view: ServiceView,
    readiness: Callable[[], tuple[bool, dict[str, Any]]],
    metrics: Collector,
    scheduler: SchedulerConfig | None = None,
    routers: Sequence[APIRouter] = (),
    guard: GuardLimits | None = None,
    version: Callable[[], object] | None = None,
) -> FastAPI:
    """``readiness()`` → (ready, details for /readyz); ``metrics`` is registered for /metrics and
    rendered again whenever ``version()`` returns a new object (default: the view's snapshot);
    ``routers`` are included as they are (the NCCL pin service: the fabric service is the natural pin
    authority for multi-node communicators)."""
    version = version or view.current
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    app = base_app(
        "netd fabric",
        "The cluster view of netd: every host's RoCE ports from Prometheus, congestion per port, "
        "ToR and spine, and the Kubernetes scheduler extender (docs/service.md). Errors are RFC 9457 "
        "problem+json.",
        registry,
        version,
        guard,
    )
    app.include_router(topology_router(view))
    app.state.extender_warmers = []  # netd.api.routes_scheduler.warm_extender
    app.include_router(scheduler_router(view, scheduler, warmers=app.state.extender_warmers))
    for router in routers:
        app.include_router(router)

    @app.get("/readyz")
    def readyz(response: Response) -> dict[str, Any]:
        """Ready once a refresh from Prometheus succeeded recently (within three refresh intervals)."""
        ready, details = readiness()
        if not ready:
            response.status_code = 503
        return {"ready": ready, **details}

    return app

"""The HTTP app of ``netd fabric`` with a Prometheus behind it: the cluster's topology, congestion and
scheduler extender, health, and the fabric service's own metrics. Per-host routes (/v1/ports) are
not served here: each host's daemon serves them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from netd import __version__
from netd.api.problems import install_problem_handlers
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
) -> FastAPI:
    """``readiness()`` → (ready, details for /readyz); ``metrics`` is registered for /metrics;
    ``routers`` are included as they are (the NCCL pin service: the fabric service is the natural pin
    authority for multi-node communicators)."""
    app = FastAPI(
        title="netd fabric",
        version=__version__,
        description="The cluster view of netd: every host's RoCE ports from Prometheus, congestion per port, "
        "ToR and spine, and the Kubernetes scheduler extender (docs/service.md). Errors are RFC 9457 "
        "problem+json.",
    )
    install_problem_handlers(app)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    app.include_router(topology_router(view))
    app.include_router(scheduler_router(view, scheduler))
    for router in routers:
        app.include_router(router)

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """The process is alive and serving."""
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz(response: Response) -> dict[str, Any]:
        """Ready once a refresh from Prometheus succeeded recently (within three refresh intervals)."""
        ready, details = readiness()
        if not ready:
            response.status_code = 503
        return {"ready": ready, **details}

    return app

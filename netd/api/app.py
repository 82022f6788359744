"""The daemon's one HTTP listener: Prometheus metrics, health, and /v1 JSON.

The app reads state through two callables injected by the composition root, so
it can be served by uvicorn in the daemon or exercised with a test client on a
hand-built state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Response
from prometheus_client import CollectorRegistry
from prometheus_client.registry import Collector

from netd.api.base import base_app
from netd.api.guard import GuardLimits
from netd.api.routes_anomalies import anomalies_router
from netd.api.routes_flows import flows_router
from netd.api.routes_scheduler import scheduler_router
from netd.api.routes_topology import topology_router
from netd.api.service_view import HostView, ServiceView
from netd.api.views import port_document, status_document
from netd.config.service import SchedulerConfig
from netd.daemon.state import PublishedState
from netd.exporter import NetdCollector

__all__ = ["create_app"]


def create_app(
    state: Callable[[], PublishedState | None],
    last_tick_age_s: Callable[[], float | None],
    interval_s: float,
    *,
    view: ServiceView | None = None,
    scheduler: SchedulerConfig | None = None,
    routers: Sequence[APIRouter] = (),
    collectors: Sequence[Collector] = (),
    guard: GuardLimits | None = None,
) -> FastAPI:
    """``view``: what /v1/topology, /v1/congestion and /scheduler read (default: this host's state);
    ``guard``: Host allow-list and request limits (netd.api.guard; default: its defaults)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NetdCollector(state))
    for collector in collectors:  # feature metrics built by the composition root (e.g. the tuner's)
        registry.register(collector)
    app = base_app(
        "netd",
        "RoCE congestion and NIC counter telemetry for this host; topology, congestion scores "
        "and the Kubernetes scheduler extender (docs/service.md). Errors are RFC 9457 problem+json.",
        registry,
        state,  # the loop publishes a new PublishedState per tick: /metrics is rendered once per tick
        guard,
    )
    view = view or HostView(state)
    app.include_router(topology_router(view))
    app.state.extender_warmers = []  # netd.api.routes_scheduler.warm_extender
    app.include_router(scheduler_router(view, scheduler, warmers=app.state.extender_warmers))
    app.include_router(flows_router(state))
    app.include_router(anomalies_router(state))
    for router in routers:  # feature routers built by the composition root (e.g. /v1/nccl)
        app.include_router(router)

    @app.get("/readyz", responses={503: {"description": "Not ready: no tick yet, or the last is too old"}})
    def readyz(response: Response) -> dict[str, Any]:
        """Ready once a tick has completed and the last one is younger than three intervals plus 1 s
        (``interval_s``: the longest between two ticks, the calm cadence's)."""
        age = last_tick_age_s()
        ready = age is not None and age < 3 * interval_s + 1.0
        if not ready:
            response.status_code = 503
        st = state()
        sources = (
            []
            if st is None
            else [{"source": s.source, "ok": s.ok, "error": s.error} for s in st.observation.snapshot.sources]
        )
        return {"ready": ready, "last_tick_age_s": age, "sources": sources}

    @app.get("/v1/ports")
    def ports() -> dict[str, Any]:
        """Every RDMA port: identity, raw counters (data in bytes), monotonic totals, rates and signals."""
        st = state()
        if st is None:
            raise HTTPException(status_code=503, detail="no tick completed yet")
        return status_document(st.observation)

    @app.get("/v1/ports/{device}/{port}")
    def one_port(device: str, port: int) -> dict[str, Any]:
        st = state()
        if st is None:
            raise HTTPException(status_code=503, detail="no tick completed yet")
        doc = port_document(st.observation, device, port)
        if doc is None:
            raise HTTPException(status_code=404, detail=f"no RDMA port {device}/{port} on this host")
        return doc

    return app

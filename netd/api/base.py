"""What every netd HTTP app has: problem+json errors, the request guard, no CDN-loaded docs,
/healthz and the cached /metrics. ``netd run`` (netd.api.app) and ``netd fabric``
(netd.cluster.app) add their routes to it."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from netd import __version__
from netd.api.connections import ConnectionStats
from netd.api.exposition import MetricsCache, MetricsEndpoint
from netd.api.guard import GuardLimits, RequestGuard
from netd.api.http_metrics import HttpCollector
from netd.api.problems import install_problem_handlers

__all__ = ["base_app"]


def base_app(
    title: str,
    description: str,
    registry: CollectorRegistry,
    version: Callable[[], object],
    guard: GuardLimits | None = None,
) -> FastAPI:
    """``version()``: what changes when the metrics do (see netd.api.exposition)."""
    # Swagger UI and ReDoc load their scripts from a CDN (a blank page without internet): off; the
    # schema stays at /openapi.json for any OpenAPI viewer.
    app = FastAPI(title=title, version=__version__, description=description, docs_url=None, redoc_url=None)
    install_problem_handlers(app)
    guard = guard or GuardLimits()
    app.state.metrics = MetricsCache(registry, version)
    app.add_middleware(MetricsEndpoint, cache=app.state.metrics)  # inside the guard (added last: outermost)
    app.add_middleware(RequestGuard, routes=app, limits=guard)
    # netd.api.server.Server counts into this one when it serves the app
    app.state.connection_stats = ConnectionStats()
    registry.register(HttpCollector(app.state.connection_stats, guard))

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """The process is alive and serving."""
        return {"status": "ok"}

    return app

"""/metrics served from bytes rendered once per tick (or per fabric refresh), not once per scrape.

Rendering every family for every scrape cost ~5 ms of CPU under the interpreter lock: 170–210
scrapes/s saturated a core and slowed the collector beside it. The metrics only change when the loop
publishes a new state, so the rendered text is cached, keyed by the *identity* of what ``version()``
returns (the :class:`~netd.daemon.state.PublishedState` the loop swaps in, or the fabric's
snapshot), in each format a scraper negotiates: Prometheus text or OpenMetrics (``Accept:
application/openmetrics-text``), each plain or gzip (``Accept-Encoding: gzip``). HEAD answers the
same headers without the body.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from starlette.concurrency import run_in_threadpool

__all__ = ["MetricsCache", "add_metrics_route"]


class MetricsCache:
    def __init__(self, registry: CollectorRegistry, version: Callable[[], object]) -> None:
        self.registry, self.version = registry, version
        self._key: object = object()
        self._rendered: dict[tuple[bool, bool], bytes] = {}
        self._lock = threading.Lock()
        self.renders = 0  # how many times the registry was rendered (tests count them)

    def cached(self, openmetrics_: bool, gzipped: bool) -> bytes | None:
        if self._key is not self.version():
            return None
        return self._rendered.get((openmetrics_, gzipped))

    def render(self, openmetrics_: bool, gzipped: bool) -> bytes:
        with self._lock:
            key = self.version()
            if key is not self._key:
                self._key, self._rendered = key, {}
            out = self._rendered.get((openmetrics_, gzipped))
            if out is None:
                plain = self._rendered.get((openmetrics_, False))
                if plain is None:
                    generate = openmetrics.generate_latest if openmetrics_ else generate_latest
                    plain = generate(self.registry)
                    self.renders += 1
                    self._rendered[(openmetrics_, False)] = plain
                out = gzip.compress(plain, compresslevel=5, mtime=0) if gzipped else plain
                self._rendered[(openmetrics_, gzipped)] = out
            return out


def _wants(header: str, token: str) -> bool:
    """``token`` is listed in an Accept-style header with a quality above 0."""
    for part in header.lower().split(","):
        name, *params = (p.strip() for p in part.split(";"))
        if name != token:
            continue
        q = next((p[2:] for p in params if p.startswith("q=")), "1")
        try:
            return float(q) > 0
        except ValueError:
            return False
    return False


def add_metrics_route(app: FastAPI, cache: MetricsCache) -> None:
    @app.api_route("/metrics", methods=["GET", "HEAD"], include_in_schema=False)
    async def metrics(request: Request) -> Response:
        om = _wants(request.headers.get("accept", ""), "application/openmetrics-text")
        gz = _wants(request.headers.get("accept-encoding", ""), "gzip")
        data = cache.cached(om, gz)
        if data is None:  # once per tick: render in a thread, not on the event loop
            data = await run_in_threadpool(cache.render, om, gz)
        headers = {"Vary": "Accept, Accept-Encoding"}
        if gz:
            headers["Content-Encoding"] = "gzip"
        media = openmetrics.CONTENT_TYPE_LATEST if om else CONTENT_TYPE_LATEST
        if request.method == "HEAD":
            headers["Content-Length"] = str(len(data))
            return Response(status_code=200, headers=headers, media_type=media)
        return Response(data, headers=headers, media_type=media)

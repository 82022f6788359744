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
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from starlette.concurrency import run_in_threadpool

__all__ = ["MetricsCache", "MetricsEndpoint"]


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


class MetricsEndpoint:
    """Pure ASGI middleware answering GET/HEAD /metrics itself: a scrape is a dictionary lookup and
    a write, without FastAPI's routing and dependency machinery (which cost more than the lookup)."""

    def __init__(self, app: Any, cache: MetricsCache) -> None:
        self.app, self.cache = app, cache

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/metrics" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        accept = accept_encoding = ""
        for name, value in scope["headers"]:
            if name == b"accept":
                accept = value.decode("latin-1")
            elif name == b"accept-encoding":
                accept_encoding = value.decode("latin-1")
        om = _wants(accept, "application/openmetrics-text")
        gz = _wants(accept_encoding, "gzip")
        data = self.cache.cached(om, gz)
        if data is None:  # once per tick: render in a thread, not on the event loop
            data = await run_in_threadpool(self.cache.render, om, gz)
        media = openmetrics.CONTENT_TYPE_LATEST if om else CONTENT_TYPE_LATEST
        headers = [
            (b"content-type", media.encode()),
            (b"content-length", str(len(data)).encode()),
            (b"vary", b"Accept, Accept-Encoding"),
        ]
        if gz:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else data})

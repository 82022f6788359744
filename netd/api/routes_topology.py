"""GET /v1/topology and GET /v1/congestion: the fabric as this service sees it, and where it hurts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, HTTPException, Query, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from netd.api.documents import congestion_item, page, placement_doc, topology_summary
from netd.api.schemas import CongestionPage, TopologyDoc
from netd.api.service_view import ClusterSnapshot, ServiceView
from netd.congestion.scorer import LEVELS, CongestionReport, ScopeScore
from netd.model.topology import Topology

__all__ = ["topology_router"]

FORMULA = "docs/service.md#congestion-scores"
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="items to skip")]
Name = Annotated[str | None, Query(min_length=1, max_length=253)]
Rail = Annotated[int | None, Query(ge=0, le=1024)]
Scope = Literal["port", "tor", "spine"]
T = TypeVar("T")


def _snapshot(view: ServiceView) -> ClusterSnapshot:
    snap = view.current()
    if snap is None:
        raise HTTPException(503, "no data yet: the first tick (or fabric refresh) has not completed")
    return snap


async def _in_thread_unless_at_hand(snap: ClusterSnapshot, read: Callable[[], T]) -> T:
    """``read()`` of the snapshot's topology or report: in a thread when it must be decoded first
    (a snapshot from netd fabric's view process; ~50-60 ms at 40,000 ports, not for the event loop)."""
    return read() if snap.at_hand() else await run_in_threadpool(read)


def _envelope(snap: ClusterSnapshot) -> dict[str, Any]:
    return {"view": snap.view, "timestamp": snap.timestamp, "emulated": snap.emulated, "note": snap.note}


def _port_matches(p: ScopeScore, filters: dict[str, Any]) -> bool:
    for key, want in filters.items():
        if key in ("tor", "spine"):
            if want not in p.labels.get(key, "").split("+"):
                return False
        elif p.labels.get(key) != str(want):
            return False
    return True


def _select(report: CongestionReport, scope: str, filters: dict[str, Any]) -> list[ScopeScore]:
    """Items of ``scope`` with at least one member port matching every filter: a ToR matches
    ``host=h`` when one of h's ports is under it, a spine when one of its ToRs does."""
    entries = report.scope(scope)
    if not filters:
        return list(entries)
    ports = {p.name: p for p in report.ports}
    tors = {t.name: t for t in report.tors}

    def members(s: ScopeScore) -> list[ScopeScore]:
        if s.scope == "port":
            return [s]
        if s.scope == "tor":
            return [ports[m] for m in s.members if m in ports]
        return [p for t in s.members if t in tors for p in members(tors[t])]

    return [s for s in entries if any(_port_matches(p, filters) for p in members(s))]


class _Prepared:
    """Per snapshot (immutable, replaced each tick): each scope's items in both sort orders, their
    JSON documents and the latest answers' bytes, built once and shared by every request until the
    next snapshot (schedulers and dashboards ask the same questions over and over)."""

    MAX_BODIES = 64

    def __init__(self, snap: ClusterSnapshot, report: CongestionReport) -> None:
        self.snap = snap
        self.report = report
        self._orders: dict[tuple[str, str], list[ScopeScore]] = {}
        self._docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.bodies: dict[tuple[Any, ...], bytes] = {}

    def ordered(self, scope: str, sort: str) -> list[ScopeScore]:
        key = (scope, sort)
        if key not in self._orders:
            items = list(self.report.scope(scope))
            items.sort(key=(lambda s: (-s.smoothed, s.name)) if sort == "score" else (lambda s: s.name))
            self._orders[key] = items
        return self._orders[key]

    def doc(self, s: ScopeScore) -> dict[str, Any]:
        key = (s.scope, s.name)
        if key not in self._docs:
            self._docs[key] = congestion_item(s)
        return self._docs[key]


def topology_router(view: ServiceView) -> APIRouter:
    router = APIRouter(tags=["topology and congestion"])
    prepared: list[_Prepared] = []  # the latest snapshot's, replaced when the snapshot changes
    summaries: list[tuple[Topology, dict[str, Any]]] = []  # the latest topology's summary, likewise

    def summary(t: Topology) -> dict[str, Any]:
        if not summaries or summaries[0][0] is not t:
            summaries[:] = [(t, topology_summary(t))]
        return summaries[0][1]

    def prepare(snap: ClusterSnapshot, report: CongestionReport) -> _Prepared:
        current = prepared[0] if prepared else None
        if current is None or current.snap is not snap:
            current = _Prepared(snap, report)
            prepared[:] = [current]
        return current

    @router.get("/v1/topology", response_model=TopologyDoc)
    async def topology(
        host: Name = None,
        tor: Name = None,
        spine: Name = None,
        rail: Rail = None,
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> JSONResponse:
        """Host RDMA ports placed in the fabric (host port → ToR port → ToR → spine, rail), the ToRs,
        spines and rails they form, and how each topology source fared. Ports are paged and filterable."""
        snap = _snapshot(view)
        t = await _in_thread_unless_at_hand(snap, lambda: snap.topology)
        if t is None:
            raise HTTPException(503, "topology discovery is disabled ([topology] enabled = false)")
        ports = [
            p
            for p in t.ports
            if (host is None or p.host == host)
            and (rail is None or p.rail == rail)
            and (tor is None or tor in (p.tor or "").split("+"))
            and (spine is None or spine in (p.spine or "").split("+"))
        ]
        items, meta = page(ports, offset, limit)
        # answered as built (the documents match the response model; validating them again per
        # request would double the cost of the route)
        doc = {
            **_envelope(snap),
            **summary(t),
            "ports": {**meta, "items": [placement_doc(p) for p in items]},
        }
        return JSONResponse(doc)

    @router.get("/v1/congestion", response_model=CongestionPage)
    async def congestion(
        scope: Scope = "port",
        host: Name = None,
        tor: Name = None,
        spine: Name = None,
        rail: Rail = None,
        min_level: Literal["ok", "busy", "congested", "severe"] = "ok",
        min_score: Annotated[float, Query(ge=0, le=1, description="smoothed score at least this")] = 0.0,
        sort: Literal["score", "name"] = "score",
        limit: Limit = 100,
        offset: Offset = 0,
    ) -> Response:
        """Congestion scores in [0, 1] with levels (hysteresis), contributing signals and labels, per host
        port, ToR or spine; most congested first. Filters select ToRs and spines through their ports
        (``scope=spine&host=h``: the spines above h). The formula is documented in docs/service.md."""
        filters = {
            k: v for k, v in (("host", host), ("tor", tor), ("spine", spine), ("rail", rail)) if v is not None
        }
        snap = _snapshot(view)
        report = await _in_thread_unless_at_hand(snap, lambda: snap.congestion)
        if report is None:
            _, meta = page([], offset, limit)
            return JSONResponse({**_envelope(snap), **meta, "scope": scope, "formula": FORMULA, "items": []})
        ready = prepare(snap, report)
        key = (scope, tuple(filters.items()), min_level, min_score, sort, limit, offset)
        body = ready.bodies.get(key)
        if body is not None:
            return Response(body, media_type="application/json")
        allowed = {s.name for s in _select(report, scope, filters)} if filters else None
        levels = set(LEVELS[LEVELS.index(min_level) :])
        chosen = [
            s
            for s in ready.ordered(scope, sort)
            if s.level in levels and s.smoothed >= min_score and (allowed is None or s.name in allowed)
        ]
        items, meta = page(chosen, offset, limit)
        doc = {
            **_envelope(snap),
            **meta,
            "scope": scope,
            "formula": FORMULA,
            "items": [ready.doc(s) for s in items],
        }
        response = JSONResponse(doc)
        if len(ready.bodies) < ready.MAX_BODIES:
            ready.bodies[key] = bytes(response.body)
        return response

    return router

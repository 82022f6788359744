"""GET /v1/anomalies: active and recently resolved findings, filtered, with their full evidence.

Filters combine (AND): ``kind`` (repeatable), ``severity`` (this or worse), ``device``, ``port``,
``priority``, ``status`` (active, resolved or all), ``since`` (wall-clock seconds: findings seen at
or after it) and ``limit`` (per list, newest first for resolved ones).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from netd.daemon.state import PublishedState
from netd.detect.findings import AnomalyState, Finding, Severity
from netd.exporter.anomalies import KINDS

__all__ = ["anomalies_router"]


class ScopeDoc(BaseModel):
    host: str
    device: str | None
    port: int | None
    netdev: str | None
    priority: int | None
    subject: str | None = Field(description="a counter or source name, when one port has several of a kind")


class AnomalyDoc(BaseModel):
    id: str
    kind: str
    status: Literal["active", "resolved"]
    severity: Literal["info", "warning", "critical"]
    peak_severity: Literal["info", "warning", "critical"]
    scope: ScopeDoc
    explanation: str = Field(description="what it is, the likely cause, and the first thing to check")
    started_at: float = Field(description="wall clock (s since the epoch) of the evaluation that opened it")
    last_seen_at: float
    ended_at: float | None
    duration_s: float = Field(description="measured on the monotonic clock")
    resolution: str | None = Field(description="cleared, port disappeared, superseded by <kind>")
    updates: int
    reopened: int
    evidence: dict[str, Any] = Field(description="the deltas, rates and thresholds of the latest report")
    first_evidence: dict[str, Any] = Field(description="the evidence when it opened")


class TotalDoc(BaseModel):
    kind: str
    severity: str
    count: int


class AnomaliesDoc(BaseModel):
    host: str
    evaluated_at: float | None
    fast_interval_s: float = Field(description="PFC fast-path interval; 0 when off")
    active: list[AnomalyDoc]
    recent: list[AnomalyDoc] = Field(description="resolved findings, newest first")
    totals: list[TotalDoc] = Field(description="findings opened (and escalated) since start")
    kinds: list[str] = Field(description="every kind netd can report")


def _anomalies(state: Callable[[], PublishedState | None]) -> AnomalyState:
    st = state()
    if st is None:
        raise HTTPException(status_code=503, detail="no tick completed yet")
    if st.anomalies is None:
        raise HTTPException(status_code=503, detail="anomaly detection is off ([detect] enabled = false)")
    return st.anomalies


def anomalies_router(state: Callable[[], PublishedState | None]) -> APIRouter:
    router = APIRouter(tags=["anomalies"])

    @router.get("/v1/anomalies", response_model=AnomaliesDoc)
    def anomalies(
        kind: Annotated[
            list[str] | None, Query(description="only these kinds (repeat the parameter)")
        ] = None,
        severity: Annotated[
            Literal["info", "warning", "critical"] | None, Query(description="this or worse")
        ] = None,
        device: str | None = None,
        port: Annotated[int | None, Query(ge=0)] = None,
        priority: Annotated[int | None, Query(ge=0, le=7)] = None,
        status: Literal["active", "resolved", "all"] = "all",
        since: Annotated[float | None, Query(description="wall-clock seconds: seen at or after")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 100,
    ) -> dict[str, Any]:
        """Active findings (worst first) and recently resolved ones (newest first), with evidence."""
        unknown = sorted(set(kind or ()) - set(KINDS))
        if unknown:
            raise HTTPException(
                status_code=422, detail=f"unknown kind {', '.join(unknown)}; kinds: {', '.join(KINDS)}"
            )
        a = _anomalies(state)
        floor = Severity(severity).rank if severity else 0

        def keep(f: Finding) -> bool:
            s = f.scope
            return (
                (not kind or f.kind in kind)
                and f.severity.rank >= floor
                and (device is None or s.device == device)
                and (port is None or s.port == port)
                and (priority is None or s.priority == priority)
                and (since is None or f.last_seen_at >= since or (f.ended_at or 0) >= since)
            )

        active = [f.document() for f in a.active if keep(f)][:limit] if status != "resolved" else []
        recent = [f.document() for f in a.recent if keep(f)][:limit] if status != "active" else []
        return {
            "host": a.host,
            "evaluated_at": a.evaluated_at,
            "fast_interval_s": a.fast_interval_s,
            "active": active,
            "recent": recent,
            "totals": [{"kind": k, "severity": s, "count": n} for (k, s), n in sorted(a.totals.items())],
            "kinds": list(KINDS),
        }

    @router.get("/v1/anomalies/{finding_id}", response_model=AnomalyDoc)
    def one(finding_id: str) -> dict[str, Any]:
        """One finding by id, active or recently resolved."""
        a = _anomalies(state)
        for f in (*a.active, *a.recent):
            if f.id == finding_id:
                return f.document()
        raise HTTPException(
            status_code=404, detail=f"no finding {finding_id} (resolved ones age out of history)"
        )

    return router

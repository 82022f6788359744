"""What netd fabric's cluster view says about itself: how its refreshes fare (:class:`FabricStats`) and
the few figures /metrics exports of each snapshot (:class:`FabricSummary`). Both cross from the view's
process to the listener's as plain values (netd.cluster.remote)."""

from __future__ import annotations

from dataclasses import dataclass

from netd.api.service_view import ClusterSnapshot

__all__ = ["FabricStats", "FabricSummary", "ScopeLevel", "summarize"]

ScopeLevel = tuple[str, float, str]  # a ToR's or spine's name, smoothed score and level


@dataclass
class FabricStats:
    refreshes: int = 0
    errors: int = 0
    last_ok: float | None = None  # time.monotonic(): one clock for every process of the host
    last_duration_s: float = 0.0
    last_error: str | None = None
    prometheus: str = "ok"  # how the last refresh found Prometheus: ok | slow | unreachable | error
    queries: int = 0  # in the last refresh
    silent_hosts: int = 0  # left out of the last view: not scraped for cluster.host_stale_after
    last_score_cpu_s: float = 0.0  # CPU time of the last re-score (CongestionScorer.update)
    restarts: int = 0  # of the view's process (netd.cluster.remote), by the listener


@dataclass(frozen=True, slots=True)
class FabricSummary:
    hosts: int
    tors: tuple[ScopeLevel, ...]
    spines: tuple[ScopeLevel, ...]


def summarize(snap: ClusterSnapshot | None) -> FabricSummary | None:
    """None while there is no snapshot, or it lacks a topology or a report."""
    if snap is None or snap.topology is None or snap.congestion is None:
        return None
    report = snap.congestion
    return FabricSummary(
        len(snap.topology.hosts),
        tuple((s.name, s.smoothed, s.level) for s in report.tors),
        tuple((s.name, s.smoothed, s.level) for s in report.spines),
    )

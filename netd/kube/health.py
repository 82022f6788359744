"""Host RoCE health for schedulers, with hysteresis: a node condition and an optional taint.

A host is *bad* in a snapshot when one of its RDMA ports is not up or is PFC-stormed (the cluster
view's per-port ``up``/``stormed``, the same facts ``/v1/congestion`` serves). It is *marked*
degraded once bad for ``kube.degrade_after`` seconds and unmarked once good for
``kube.recover_after`` seconds, so a flapping link neither flaps the taint (Kueue and Volcano
replace nodes on a NoSchedule taint) nor floods the API server.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from netd.config.kube import KubeConfig
from netd.congestion.scorer import ScopeScore

__all__ = ["HealthTracker", "HostHealth", "condition", "taint"]


@dataclass(frozen=True, slots=True)
class HostHealth:
    host: str
    degraded: bool  # the marked state (after hysteresis)
    since: float  # when the marked state last changed (wall clock)
    down: tuple[str, ...] = ()  # ports (device/port) not up in the latest snapshot
    stormed: tuple[str, ...] = ()  # ports PFC-stormed in the latest snapshot

    @property
    def reason(self) -> str:
        if not self.degraded:
            return "RoCEPortsHealthy"
        return ",".join(r for r, bad in (("RoCEPortDown", self.down), ("PFCStorm", self.stormed)) if bad) or (
            "RoCERecovering"
        )

    @property
    def message(self) -> str:
        parts = []
        if self.down:
            parts.append(f"ports down: {', '.join(self.down)}")
        if self.stormed:
            parts.append(f"PFC storm on: {', '.join(self.stormed)}")
        return "; ".join(parts) or "every RoCE port is up and free of PFC storms"


@dataclass
class _Track:
    marked: bool = False
    since: float = 0.0
    bad_since: float | None = None
    good_since: float | None = None
    last: HostHealth | None = field(default=None)


class HealthTracker:
    def __init__(self, cfg: KubeConfig) -> None:
        self.cfg = cfg
        self._hosts: dict[str, _Track] = {}

    def update(self, ports: Iterable[ScopeScore], now: float) -> dict[str, HostHealth]:
        down: dict[str, list[str]] = {}
        stormed: dict[str, list[str]] = {}
        for p in ports:
            host = p.labels.get("host", "")
            if not host:
                continue
            name = f"{p.labels.get('device', '')}/{p.labels.get('port', '')}"
            down.setdefault(host, [])
            stormed.setdefault(host, [])
            if not p.up:
                down[host].append(name)
            if p.stormed:
                stormed[host].append(name)
        out = {}
        for host in sorted(down):
            t = self._hosts.setdefault(host, _Track(since=now))
            bad = bool(down[host] or stormed[host])
            if bad:
                t.good_since = None
                t.bad_since = now if t.bad_since is None else t.bad_since
                if not t.marked and now - t.bad_since >= self.cfg.degrade_after:
                    t.marked, t.since = True, now
            else:
                t.bad_since = None
                t.good_since = now if t.good_since is None else t.good_since
                if t.marked and now - t.good_since >= self.cfg.recover_after:
                    t.marked, t.since = False, now
            out[host] = HostHealth(host, t.marked, t.since, tuple(down[host]), tuple(stormed[host]))
        return out


def condition(h: HostHealth, cfg: KubeConfig, rfc3339: str) -> dict[str, str]:
    """The node condition (``status.conditions[]``; True means degraded, like MemoryPressure)."""
    return {
        "type": cfg.condition_type,
        "status": "True" if h.degraded else "False",
        "reason": h.reason,
        "message": h.message,
        "lastTransitionTime": rfc3339,
        "lastHeartbeatTime": rfc3339,
    }


def taint(cfg: KubeConfig) -> dict[str, str]:
    return {"key": cfg.taint_key, "value": "true", "effect": "NoSchedule"}

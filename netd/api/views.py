"""JSON documents for /v1/ports and `netd status --json` (one shape for both).

A port document carries the raw counter values (data counters in bytes), the
monotonic totals, the per-second rates, and the derived signals, so a consumer
can check any rate against the raw numbers it came from.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from netd.series.port_signals import port_signals
from netd.series.tracker import NetdevView, Observation, PortView

__all__ = ["port_document", "status_document"]


def _port(view: PortView, netdev: NetdevView | None) -> dict[str, Any]:
    p = view.sample
    counters = {
        raw: {
            "name": c.name,
            "group": c.group.value,
            "value": c.value,
            "total": view.totals.get(raw),
            "rate": view.rates.get(raw),
            "width": c.width,
            "overflow": c.overflow.value,
        }
        for raw, c in p.counters.items()
    }
    ethtool = None
    if netdev is not None:
        ethtool = {
            name: {"value": value, "total": netdev.totals.get(name), "rate": netdev.rates.get(name)}
            for name, value in netdev.sample.stats.items()
        }
    return {
        "device": p.device,
        "port": p.port,
        "netdev": p.netdev,
        "driver": p.driver,
        "link_layer": p.link_layer,
        "state": p.state,
        "phys_state": p.phys_state,
        "rate_gbps": p.rate_gbps,
        "gid_types": list(p.gid_types),
        "signals": asdict(port_signals(view, netdev)),
        "saturated": sorted(view.saturated),
        "resets": sorted(view.resets),
        "read_errors": list(p.read_errors),
        "counters": counters,
        "ethtool": ethtool,
    }


def status_document(obs: Observation) -> dict[str, Any]:
    snap = obs.snapshot
    return {
        "host": snap.host,
        "timestamp": snap.timestamp,
        "emulated": snap.emulated,
        "interval_s": obs.interval_s,
        "sources": [
            {"source": s.source, "ok": s.ok, "duration_s": s.duration_s, "error": s.error, "items": s.items}
            for s in snap.sources
        ],
        "ports": [_port(v, obs.netdev(v.sample.netdev)) for v in obs.ports],
    }


def port_document(obs: Observation, device: str, port: int) -> dict[str, Any] | None:
    for v in obs.ports:
        if v.sample.device == device and v.sample.port == port:
            return _port(v, obs.netdev(v.sample.netdev))
    return None

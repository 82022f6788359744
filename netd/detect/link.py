"""Link health: carrier flaps, links that stay down, and speed changes.

Carrier losses come from two places and are merged, never double counted: netlink link events
(``LinkChange``: event-driven, the kernel tells netd when carrier drops, so a flap between two ticks
is seen even when the link is back up by the next read) and counters that count them
(``link_down_events_phy`` from ethtool, PMA ``link_downed``) — per tick, the larger of the two
counts is taken. The emulated fabric and captured trees have only the counters.

* ``link_flap``: at least one carrier loss in the last ``link_flap_window`` seconds (critical from
  ``link_flap_critical`` losses); resolves once the window holds none.
* ``link_down``: a port that was ACTIVE while netd watched it is not ACTIVE for ``link_down_ticks``
  ticks (a port that was never up is an unused port, not an anomaly).
* ``speed_change``: an up port runs below the highest rate netd saw on it (a lane or cable failing
  and the link renegotiating down); resolves when the rate returns.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.base import judgeable, port_scope, prune
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import DetectInput, InputPath, LinkChange, PortInput

__all__ = ["KIND_LINK_DOWN", "KIND_LINK_FLAP", "KIND_SPEED", "LinkDetector"]

KIND_LINK_FLAP = "link_flap"
KIND_LINK_DOWN = "link_down"
KIND_SPEED = "speed_change"


@dataclass(slots=True)
class _Link:
    downs: deque[float] = field(default_factory=deque)  # monotonic times of carrier losses
    netlink_downs: int = 0  # carrier losses netlink reported since the last tick
    carrier: bool | None = None
    was_up: bool = False
    down_ticks: int = 0
    best_gbps: float | None = None
    gbps: float | None = None
    state: str | None = None


class LinkDetector:
    kinds: tuple[str, ...] = (KIND_LINK_FLAP, KIND_LINK_DOWN, KIND_SPEED)

    def __init__(self, cfg: DetectConfig) -> None:
        self.cfg = cfg
        self._links: dict[tuple[str, int], _Link] = {}
        self._inputs: dict[tuple[str, int], PortInput] = {}
        self._by_netdev: dict[str, tuple[str, int]] = {}

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        for change in inp.link_changes:
            self._on_change(change)
        if inp.path is InputPath.TICK:
            present = [p.key for p in inp.ports]
            prune(self._links, present)
            prune(self._inputs, present)
            self._by_netdev = {p.netdev: p.key for p in inp.ports if p.netdev}
            for p in inp.ports:
                self._inputs[p.key] = p
                self._tick(p, inp.monotonic, judgeable(inp, self.cfg))
        for link in self._links.values():
            while link.downs and inp.monotonic - link.downs[0] >= self.cfg.link_flap_window:
                link.downs.popleft()
        return self._candidates(inp.host)

    def _on_change(self, change: LinkChange) -> None:
        key = self._by_netdev.get(change.netdev)
        if key is None:
            return  # not an RDMA port's netdev
        link = self._links.setdefault(key, _Link())
        if change.carrier is False and link.carrier is not False:
            link.downs.append(change.monotonic)
            link.netlink_downs += 1
        if change.carrier is not None:
            link.carrier = change.carrier
        if change.speed_mbps is not None and change.speed_mbps > 0 and link.carrier is not False:
            self._speed(link, change.speed_mbps / 1000.0)

    def _tick(self, p: PortInput, now: float, judged: bool) -> None:
        link = self._links.setdefault(p.key, _Link())
        link.state = p.state
        if judged:  # counters over a usable interval: carrier losses netlink did not already report
            counted = max(
                p.counter("link_downed") or 0.0, p.netdev_counters.get("link_down_events_phy") or 0.0
            )
            for _ in range(int(counted) - link.netlink_downs):
                link.downs.append(now)
        link.netlink_downs = 0
        if p.state is None:
            return
        if p.up:
            link.was_up, link.down_ticks = True, 0
            if p.rate_gbps:
                self._speed(link, p.rate_gbps)
        elif link.was_up:
            link.down_ticks += 1

    @staticmethod
    def _speed(link: _Link, gbps: float) -> None:
        link.gbps = gbps
        link.best_gbps = gbps if link.best_gbps is None else max(link.best_gbps, gbps)

    def _candidates(self, host: str) -> list[Candidate]:
        out = []
        for key, link in self._links.items():
            p = self._inputs.get(key)
            if p is None:
                continue
            scope = port_scope(host, p)
            if link.down_ticks >= self.cfg.link_down_ticks:
                ev: dict[str, Any] = {"state": link.state, "down_ticks": link.down_ticks}
                text = (
                    f"{p.device}/{p.port} ({p.netdev or 'no netdev'}) is {link.state or 'down'} after being "
                    "up: traffic on it has stopped; first check the cable/transceiver and the switch port "
                    "(`ip link`, `ethtool`, the switch's interface status)"
                )
                out.append(Candidate(KIND_LINK_DOWN, scope, Severity.CRITICAL, text, ev))
            if link.downs:
                n = len(link.downs)
                severity = Severity.CRITICAL if n >= self.cfg.link_flap_critical else Severity.WARNING
                ev = {"carrier_losses": n, "window_s": self.cfg.link_flap_window, "state": link.state}
                text = (
                    f"{p.device}/{p.port} lost carrier {n} time(s) in {self.cfg.link_flap_window:g}s: a "
                    "flapping link drops in-flight RDMA traffic and triggers retransmits; first check "
                    "the optics (`ethtool -m`), cable seating and the switch port's error counters"
                )
                out.append(Candidate(KIND_LINK_FLAP, scope, severity, text, ev))
            if link.gbps and link.best_gbps and link.gbps < link.best_gbps and p.up:
                ev = {"rate_gbps": link.gbps, "highest_rate_gbps": link.best_gbps}
                text = (
                    f"{p.device}/{p.port} runs at {link.gbps:g} Gb/s, below the {link.best_gbps:g} Gb/s it "
                    "had: the link renegotiated down (a failing lane, cable or transceiver); first "
                    "check `ethtool` link modes and the optics"
                )
                out.append(Candidate(KIND_SPEED, scope, Severity.WARNING, text, ev))
        return out

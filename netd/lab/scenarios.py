"""The lab's traffic scenarios as plain values: which flows, when, which ports to watch.

* ``incast``: N senders spread over the other hosts (far ToR first) into one receiver; the
  receiver's ToR port is the bottleneck.
* ``all-to-all``: one flow between every ordered pair of hosts; every host port is a bottleneck.
* ``victim`` (congestion spreading): an incast into h0 from the hosts under another ToR, plus one
  *victim* flow from the same senders' ToR to h1, whose own receiver is idle. With ECN off (the
  default here) the incast queue reaches XOFF, h0's ToR pauses its uplink, and the victim, which
  shares that uplink, is throttled by PFC although nothing on its path is congested by it.
* ``storm``: background flows plus flows into h0; after a while h0 stops draining its receive queue
  and sends PFC XOFF continuously (a stuck NIC), and the pause spreads hop by hop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netd.errors import LabError
from netd.lab.layout import LabLayout

__all__ = ["SCENARIOS", "FlowSpec", "Scenario", "build_scenario"]


@dataclass(frozen=True, slots=True)
class FlowSpec:
    src: int
    dst: int
    label: str = "flow"
    start_s: float = 0.0
    stop_s: float | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    flows: tuple[FlowSpec, ...]
    duration_s: float
    focus: tuple[int, ...]  # switch port ids whose queues the summary reports (bottlenecks)
    warmup_s: float = 1.0  # excluded from goodput/utilisation/queue figures
    stuck: tuple[tuple[int, float, float], ...] = ()  # (host, from_s, until_s)
    switch: dict[str, Any] = field(default_factory=dict)  # congestion-point overrides for the run
    shape: dict[int, float] = field(default_factory=dict)  # switch port id -> egress Mb/s for the run
    description: str = ""


def _senders(layout: LabLayout, receiver: int) -> list[int]:
    """Other hosts, those under other ToRs first (the longer path), then the receiver's ToR."""
    tor = layout.tor_of(receiver)
    others = [h for h in range(layout.hosts) if h != receiver]
    return sorted(others, key=lambda h: (layout.tor_of(h) == tor, h))


def incast(
    layout: LabLayout,
    senders: int = 8,
    duration_s: float = 4.0,
    receiver: int = 0,
    from_hosts: tuple[int, ...] | None = None,
    bottleneck_mbps: float | None = None,
) -> Scenario:
    """``from_hosts`` restricts the senders (e.g. to the receiver's own ToR); ``bottleneck_mbps``
    slows the receiver's ToR port for the run, so that fewer senders than ToR hosts overload it."""
    if senders < 1:
        raise LabError("--senders must be at least 1")
    hosts = _senders(layout, receiver)
    if from_hosts:
        bad = [h for h in from_hosts if h not in hosts]
        if bad:
            raise LabError(f"--from: {bad} are not other hosts of this {layout.hosts}-host lab")
        hosts = [h for h in hosts if h in from_hosts]
    flows = tuple(FlowSpec(hosts[i % len(hosts)], receiver, "incast") for i in range(senders))
    port = layout.host_facing(receiver)
    if bottleneck_mbps is not None and not 1 <= bottleneck_mbps <= port.rate_mbps:
        raise LabError(f"--bottleneck must be 1..{port.rate_mbps:g} Mb/s")
    shape = {port.id: float(bottleneck_mbps)} if bottleneck_mbps else {}
    where = f"{senders} senders on {len(set(f.src for f in flows))} hosts into h{receiver}"
    if shape:
        where += f" (its ToR port slowed to {bottleneck_mbps:g} Mb/s)"
    return Scenario(
        "incast", flows, duration_s, (port.id,), min(1.0, duration_s / 4), shape=shape, description=where
    )


def all_to_all(layout: LabLayout, duration_s: float = 4.0) -> Scenario:
    flows = tuple(
        FlowSpec(s, d, "all-to-all") for s in range(layout.hosts) for d in range(layout.hosts) if s != d
    )
    focus = tuple(layout.host_facing(h).id for h in range(layout.hosts))
    return Scenario(
        "all-to-all",
        flows,
        duration_s,
        focus,
        min(1.0, duration_s / 4),
        description=f"{len(flows)} flows, one per ordered host pair",
    )


def victim(layout: LabLayout, senders: int = 4, duration_s: float = 4.0, ecn: bool = False) -> Scenario:
    if layout.tors < 2:
        raise LabError("the victim scenario needs at least 2 ToRs (--tors 2)")
    if layout.tor_of(1) != layout.tor_of(0):
        raise LabError("the victim scenario needs h0 and h1 under the same ToR (use at least 4 hosts)")
    far = [h for h in range(layout.hosts) if layout.tor_of(h) != layout.tor_of(0)]
    flows = [FlowSpec(far[i % len(far)], 0, "incast") for i in range(senders)]
    flows.append(FlowSpec(far[0], 1, "victim"))
    uplink_in = layout.port(layout.find_port(f"tor{layout.tor_of(0)}", "uplink").peer_id)  # spine -> tor
    focus = (layout.host_facing(0).id, uplink_in.id, layout.host_facing(1).id)
    switch = {} if ecn else {"mark": False}
    return Scenario(
        "victim",
        tuple(flows),
        duration_s,
        focus,
        min(1.0, duration_s / 4),
        switch=switch,
        description=f"{senders} incast flows into h0 from tor{layout.tor_of(far[0])}, victim "
        f"h{far[0]}->h1; ECN {'on' if ecn else 'off'} (PFC only)",
    )


def storm(
    layout: LabLayout, duration_s: float = 4.0, stuck_at_s: float = 1.0, stuck_for_s: float = 2.0
) -> Scenario:
    hosts = _senders(layout, 0)
    flows = [FlowSpec(h, 0, "into-h0") for h in hosts[:2]]
    flows += [FlowSpec(h, (h + 1) % layout.hosts or 1, "background") for h in hosts[::-1][:2]]
    focus = tuple(layout.host_facing(h).id for h in range(min(layout.hosts, 2)))
    return Scenario(
        "storm",
        tuple(f for f in flows if f.src != f.dst),
        duration_s,
        focus,
        0.0,
        stuck=((0, stuck_at_s, stuck_at_s + stuck_for_s),),
        description=f"h0 stops draining at {stuck_at_s:g}s for {stuck_for_s:g}s and sends PFC XOFF",
    )


SCENARIOS = {"incast": incast, "all-to-all": all_to_all, "victim": victim, "storm": storm}


def build_scenario(name: str, layout: LabLayout, **options: Any) -> Scenario:
    try:
        builder = SCENARIOS[name]
    except KeyError:
        raise LabError(f"unknown scenario {name!r}; choose one of {', '.join(SCENARIOS)}") from None
    accepted = builder.__code__.co_varnames[1 : builder.__code__.co_argcount]
    return builder(layout, **{k: v for k, v in options.items() if k in accepted and v is not None})  # type: ignore[operator]

"""Labelled traces for `netd bench detect`: a traffic schedule, faults on top, and the ground truth.

Time is emulation seconds; the fabric model runs ``sim_ms_per_s`` of fabric time per emulated second
(:class:`ScheduledWorkload` maps one to the other), so phases last seconds, as a 1 s tick sees them.

* :func:`healthy_trace` — busy and healthy: line-rate all-reduce rings (across the spine and inside
  each ToR), shifted permutations, all-to-all and idle gaps. Every pattern fits the fabric, so no
  detector may fire: every finding is a false alarm.
* :func:`fault_trace` — 30 s slots per ToR, each one of (in balanced, shuffled blocks): a 7:1 incast
  onto one port (labelled ``congestion`` on the receiver), a stuck receiver fed by three ports
  (``pause_storm`` on it, ``pfc_storm`` on each feeder), or intra-ToR rings with port-local faults
  (loss burst, link flaps, a saturated counter, stalled counters, a CNP baseline shift, a spreading
  victim). Traffic stays inside
  each ToR so that a fault in one ToR cannot spill into another's ground truth through the spine.
* :func:`glitch_trace` — the healthy workload with bad reads (netd.emulated.fault_kinds: a step
  backwards, a 2^40 spike, a 32-bit counter read beyond its width, a driver reset, a `rate` of
  ``inf``/``nan``/negative): nothing to detect but the read error of an unparsable `rate`.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field

from cc.sim.workload import GREEDY, Flow, Phase
from netd.emulated.fault_kinds import (
    CnpShift,
    CounterSaturation,
    CounterStall,
    DriverReset,
    LinkFlap,
    LossBurst,
    RateGlitch,
    ReadGlitch,
    SpreadingVictim,
    StuckReceiver,
)
from netd.emulated.faults import Fault, Label

__all__ = ["GLITCHES", "ScheduledWorkload", "Trace", "fault_trace", "glitch_trace", "healthy_trace"]

HostPort = tuple[int, int]
Flows = tuple[Flow, ...]
SLOT_S = 30.0
PORT_FAULTS = ("loss", "flap", "saturation", "stall", "cnp_shift", "spreading")
_COOLDOWN_S = {"flap": 40.0}  # the flap finding stays open for link_flap_window (30 s) after the last loss
_BASELINE_WARMUP_S = 120.0  # the baseline detector judges after 60 ticks; leave it a margin


class ScheduledWorkload:
    """A cc PhaseSource from segments in emulation seconds: ``(start_s, end_s, name, flows)``."""

    def __init__(self, segments: list[tuple[float, float, str, Flows]], sim_ms_per_s: float) -> None:
        us = sim_ms_per_s * 1000.0
        self._phases = [Phase(name, a * us, b * us, flows) for a, b, name, flows in segments]
        end = self._phases[-1].end_us if self._phases else 0.0
        self._phases.append(Phase("idle", end, math.inf, ()))
        self._starts = [p.start_us for p in self._phases]

    def phase_at(self, t_us: float) -> Phase:
        return self._phases[max(0, bisect.bisect_right(self._starts, t_us) - 1)]


@dataclass
class Trace:
    name: str
    duration_s: float
    workload: ScheduledWorkload
    faults: list[Fault]
    congestion: list[Label] = field(default_factory=list)
    fault_names: list[str] = field(default_factory=list)  # what each fault is, where a trace names them

    def labels(self) -> list[Label]:
        return self.congestion + [label for f in self.faults for label in f.labels()]


class _Plan:
    """Per-ToR flow plans over time, merged into global phases at every boundary."""

    def __init__(self, tors: int, hosts_per_tor: int, ports_per_host: int) -> None:
        self.tors, self.hpt, self.pph = tors, hosts_per_tor, ports_per_host
        self.parts: list[tuple[float, float, str, Flows]] = []

    def tor_ports(self, tor: int) -> list[HostPort]:
        return [(h, p) for h in range(tor * self.hpt, (tor + 1) * self.hpt) for p in range(self.pph)]

    def ring(self, ports: list[HostPort]) -> Flows:
        return (
            tuple(Flow(a, b) for a, b in zip(ports, ports[1:] + ports[:1], strict=True))
            if len(ports) > 1
            else ()
        )

    def tor_rings(self, tor: int) -> Flows:
        return tuple(
            f for p in range(self.pph) for f in self.ring([hp for hp in self.tor_ports(tor) if hp[1] == p])
        )

    def add(self, start: float, end: float, name: str, flows: Flows) -> None:
        if end > start:
            self.parts.append((start, end, name, flows))

    def segments(self) -> list[tuple[float, float, str, Flows]]:
        cuts = sorted({t for a, b, _, _ in self.parts for t in (a, b)})
        out = []
        for a, b in zip(cuts, cuts[1:], strict=False):
            live = [(n, f) for s, e, n, f in self.parts if s <= a and b <= e]
            names = sorted({n for n, _ in live}) or ["idle"]
            out.append((a, b, "+".join(names), tuple(fl for _, f in live for fl in f)))
        return out


def healthy_trace(
    seed: int,
    duration_s: float,
    *,
    sim_ms_per_s: float,
    tors: int = 2,
    hosts_per_tor: int = 4,
    ports_per_host: int = 2,
    link_gbps: float = 200.0,
) -> Trace:
    rng = random.Random(seed)
    plan = _Plan(tors, hosts_per_tor, ports_per_host)
    n = tors * hosts_per_tor
    line = link_gbps * 1000.0
    t = 0.0
    while t < duration_s:
        length = min(rng.uniform(10, 40), duration_s - t)
        kind = rng.choice(("allreduce", "allreduce", "shift", "alltoall", "tor_rings", "idle"))
        if kind == "allreduce":
            flows: Flows = tuple(
                Flow((h, p), ((h + 1) % n, p)) for h in range(n) for p in range(ports_per_host)
            )
        elif kind == "shift":
            k = rng.randrange(1, n)
            flows = tuple(Flow((h, p), ((h + k) % n, p)) for h in range(n) for p in range(ports_per_host))
        elif kind == "alltoall":  # every port to the same port of every other host, at line / (n - 1)
            flows = tuple(
                Flow((h, p), (d, p), line / (n - 1))
                for h in range(n)
                for d in range(n)
                if d != h
                for p in range(ports_per_host)
            )
        elif kind == "tor_rings":
            flows = tuple(f for tor in range(tors) for f in plan.tor_rings(tor))
        else:
            flows, length = (), min(length, rng.uniform(2, 8))
        plan.add(t, t + length, kind, flows)
        t += length
    return Trace("healthy", duration_s, ScheduledWorkload(plan.segments(), sim_ms_per_s), [])


def fault_trace(
    seed: int,
    duration_s: float,
    *,
    sim_ms_per_s: float,
    tors: int = 2,
    hosts_per_tor: int = 4,
    ports_per_host: int = 2,
    mix: tuple[str, ...] = ("incast", "stuck", "ring", "ring"),
) -> Trace:
    """``mix``: the scenarios of consecutive ToR-slots, each block of ``len(mix)`` slots shuffled, so every
    kind gets about the same number of faults for any length: incast, stuck (receiver), ring."""
    rng = random.Random(seed)
    plan = _Plan(tors, hosts_per_tor, ports_per_host)
    faults: list[Fault] = []
    congestion: list[Label] = []
    free_at: dict[HostPort, float] = {}  # a port takes its next fault after this time
    receiver_at: dict[HostPort, float] = {}  # when a port last sent CNPs (incast receiver, CNP shift)
    turn = rng.randrange(len(PORT_FAULTS))
    slots = int(duration_s // SLOT_S)
    scenarios: list[str] = []
    for slot in range(slots):
        t0, t1 = slot * SLOT_S, (slot + 1) * SLOT_S
        for tor in range(tors):
            ports = plan.tor_ports(tor)
            if not scenarios:
                scenarios = rng.sample(mix, len(mix))
            scenario = scenarios.pop()
            if scenario == "incast":
                r = rng.choice(ports)
                a = t0 + rng.uniform(3, 8)
                b = a + rng.uniform(5, 10)
                plan.add(t0, a, "allreduce", plan.tor_rings(tor))
                plan.add(a, b, "incast", tuple(Flow(s, r, GREEDY) for s in ports if s != r))
                plan.add(b, t1, "allreduce", plan.tor_rings(tor))
                congestion.append(Label("congestion", r[0], r[1], a, b))
                receiver_at[r] = b
            elif scenario == "stuck":
                r, *feeders = rng.sample(ports, 4)
                rest = [hp for hp in ports if hp != r and hp not in feeders]
                plan.add(t0, t1, "fanin", tuple(Flow(f, r, 50_000.0) for f in feeders) + plan.ring(rest))
                a = t0 + rng.uniform(3, 8)
                faults.append(StuckReceiver(r[0], r[1], a, a + rng.uniform(4, 10), feeders=tuple(feeders)))
            else:
                plan.add(t0, t1, "allreduce", plan.tor_rings(tor))
                for hp in rng.sample(ports, 5):
                    kind = PORT_FAULTS[turn % len(PORT_FAULTS)]
                    fault = _port_fault(kind, hp, t0, rng, free_at, receiver_at)
                    if fault is not None:
                        faults.append(fault)
                        if isinstance(fault, CnpShift):
                            receiver_at[hp] = fault.end_s
                        free_at[hp] = fault.end_s + _COOLDOWN_S.get(kind, 12.0)
                        turn += 1
    segments = plan.segments()
    return Trace("faults", slots * SLOT_S, ScheduledWorkload(segments, sim_ms_per_s), faults, congestion)


def _port_fault(
    kind: str,
    hp: HostPort,
    t0: float,
    rng: random.Random,
    free_at: dict[HostPort, float],
    receiver_at: dict[HostPort, float],
) -> Fault | None:
    start = t0 + rng.uniform(2, 10)
    end = start + rng.uniform(4, 10)
    if start < free_at.get(hp, 0.0) or end > t0 + SLOT_S - 4:
        return None
    h, p = hp
    if kind == "loss":
        return LossBurst(h, p, start, end, events_per_s=10 ** rng.uniform(1.3, 3.7))
    if kind == "flap":
        downs, t = [], start
        for _ in range(rng.randint(1, 4)):
            up = t + rng.uniform(0.2, 0.8)
            downs.append((t, up))
            t = up + rng.uniform(1.0, 3.0)
        return LinkFlap(h, p, start, downs[-1][1], downs=tuple(downs))
    if kind == "saturation":
        return CounterSaturation(h, p, start, end, counter=rng.choice(("symbol_error", "port_rcv_errors")))
    if kind == "stall":
        return CounterStall(h, p, start, end)
    if kind == "cnp_shift":
        # a change point needs a calm history: no CNPs in the baseline window (300 ticks) before it
        if start < _BASELINE_WARMUP_S or start - receiver_at.get(hp, -1e9) < 330:
            return None
        return CnpShift(h, p, start, end, cnp_per_s=rng.uniform(1500, 4000))
    return SpreadingVictim(h, p, start, end, pause_fraction=rng.uniform(0.3, 0.7))


def _glitch(kind: str, h: int, p: int, at: float) -> Fault:
    """A bad read visible to exactly the read at ``at`` (a tick: RDMA counters are read only there)."""
    a, b = at - 0.01, at + 0.01
    if kind == "ecn_back":
        return ReadGlitch(h, p, a, b, counter="np_ecn_marked_roce_packets", mode="back")
    if kind == "rx_back":
        return ReadGlitch(h, p, a, b, counter="port_rcv_packets", mode="back")
    if kind == "ecn_spike":
        return ReadGlitch(h, p, a, b, counter="np_ecn_marked_roce_packets", mode="spike")
    if kind == "oos_over32":
        return ReadGlitch(h, p, a, b, counter="out_of_sequence", mode="over32")
    if kind == "pause_spike":
        return ReadGlitch(h, p, a, b, counter="rx_prio3_pause", ethtool=True, mode="spike")
    if kind == "pause_back":
        return ReadGlitch(h, p, a, b, counter="tx_prio3_pause_duration", ethtool=True, mode="back")
    if kind == "driver_reset":
        return DriverReset(h, p, a, b)
    text = {"rate_inf": "inf", "rate_nan": "nan", "rate_negative": "-200"}[kind]
    return RateGlitch(h, p, a, b, text=f"{text} Gb/sec (2X NDR)")


GLITCHES = (
    "ecn_back",
    "rx_back",
    "ecn_spike",
    "oos_over32",
    "pause_spike",
    "pause_back",
    "driver_reset",
    "rate_inf",
    "rate_nan",
    "rate_negative",
)


def glitch_trace(
    seed: int,
    duration_s: float,
    *,
    sim_ms_per_s: float,
    tors: int = 2,
    hosts_per_tor: int = 4,
    ports_per_host: int = 2,
    gap_s: tuple[float, float] = (3.0, 8.0),
) -> Trace:
    """The healthy workload of ``seed`` with a bad read every few seconds on a random port, cycling
    through :data:`GLITCHES`; a port gets its next one no sooner than 12 s after its last."""
    rng = random.Random(seed)
    base = healthy_trace(
        seed,
        duration_s,
        sim_ms_per_s=sim_ms_per_s,
        tors=tors,
        hosts_per_tor=hosts_per_tor,
        ports_per_host=ports_per_host,
    )
    ports = [(h, p) for h in range(tors * hosts_per_tor) for p in range(ports_per_host)]
    free_at: dict[HostPort, float] = {}
    faults: list[Fault] = []
    names: list[str] = []
    t = 10.0
    while t < duration_s - 10:
        h, p = rng.choice([hp for hp in ports if free_at.get(hp, 0.0) <= t] or ports)
        names.append(GLITCHES[len(faults) % len(GLITCHES)])
        faults.append(_glitch(names[-1], h, p, float(round(t))))
        free_at[(h, p)] = t + 12.0
        t += rng.uniform(*gap_s)
    return Trace("glitches", duration_s, base.workload, faults, fault_names=names)

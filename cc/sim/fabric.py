"""The emulated fabric behind `netd run`: the simulator, driven by a training-like schedule.

:class:`Fabric` runs :class:`cc.sim.engine.Engine` (the one DCQCN model) over a two-tier leaf-spine built
from :class:`FabricConfig`, with the flows of a :class:`~cc.sim.workload.PhaseSource` (each phase's flows
start at line rate with fresh DCQCN state when it begins and stop sending when it ends; what they
have in flight still drains). :meth:`Fabric.advance` reports, per host port, the counter increments
an mlx5 NIC would show: bytes and packets, ECN marks, CNPs sent and handled, PFC pauses the port
received from its ToR, and the loss counters (which stay zero while PFC is on).

The default step is coarse (10 µs): the emulator's job is realistic counters at a few percent of a
core, and calm stretches (idle gaps, uncontended all-reduce) are jumped over in closed form.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cc.model import DcqcnParams
from cc.sim.engine import Engine
from cc.sim.network import MTU_BYTES, SimConfig
from cc.sim.topology import leaf_spine
from cc.sim.traffic import FlowSpec
from cc.sim.workload import GREEDY, PhaseSource, Workload

__all__ = ["MTU_BYTES", "Fabric", "FabricConfig", "PortDeltas"]

Ints = NDArray[np.int64]
_PORT_COUNTER = {  # PortDeltas field -> engine port counter
    "tx_bytes": "tx_bytes",
    "rx_bytes": "rx_bytes",
    "ecn_marked_rx": "ecn_marked",
    "cnp_sent": "cnp_sent",
    "cnp_handled": "cnp_handled",
    "out_of_sequence": "out_of_sequence",
    "packet_seq_err": "nak",
    "local_ack_timeout_err": "timeouts",
}


@dataclass(frozen=True, slots=True)
class FabricConfig:
    """Topology, time step and switch mode.

    A ToR's uplinks carry ``hosts_per_tor * ports_per_host * link_gbps / oversubscription`` in total,
    spread over ``spines`` (1.0 is non-blocking). ``lossless_priority`` is the PFC priority the
    counters belong to; ``lossy_buffer_bytes`` is the per-queue buffer that overflows into drops when
    ``pfc`` is off. ``link_delay_us`` is every link's propagation (plus switching) delay.
    """

    tors: int = 2
    hosts_per_tor: int = 4
    ports_per_host: int = 2
    link_gbps: float = 200.0
    dt_us: float = 10.0
    seed: int = 0
    lossless_priority: int = 3
    pfc: bool = True
    oversubscription: float = 1.0
    lossy_buffer_bytes: int = 6_000_000
    spines: int = 1
    link_delay_us: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "tors",
            "hosts_per_tor",
            "ports_per_host",
            "link_gbps",
            "dt_us",
            "oversubscription",
            "lossy_buffer_bytes",
            "spines",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0")
        if not 0 <= self.lossless_priority <= 7:
            raise ValueError(f"lossless_priority={self.lossless_priority} outside [0, 7]")
        if not self.link_delay_us >= 0:
            raise ValueError(f"link_delay_us={self.link_delay_us} must be >= 0")

    @property
    def n_hosts(self) -> int:
        return self.tors * self.hosts_per_tor

    @property
    def line_mbps(self) -> float:
        return self.link_gbps * 1000.0


@dataclass(frozen=True, slots=True)
class PortDeltas:
    """Counter increments per host port, shape (n_hosts, ports_per_host), over ``sim_us``.

    ``rx_pause_*``: pause the port received from its ToR (it was paused). ``tx_pause_*`` stay 0: host
    receive buffers are not modelled. ``queue_bytes``: ToR egress queue towards each port at the end;
    ``in_flight_bytes``: everything sent and not yet delivered (queued or on a link), fabric-wide.
    """

    tx_bytes: Ints
    rx_bytes: Ints
    tx_packets: Ints
    rx_packets: Ints
    ecn_marked_rx: Ints  # np_ecn_marked_roce_packets
    cnp_sent: Ints  # np_cnp_sent
    cnp_handled: Ints  # rp_cnp_handled
    rx_pause_frames: Ints
    rx_pause_duration_us: Ints
    rx_pause_transitions: Ints  # pauses that ended (XOFF -> XON), rx_prioN_pause_transition
    tx_pause_frames: Ints
    tx_pause_duration_us: Ints
    out_of_sequence: Ints
    packet_seq_err: Ints
    local_ack_timeout_err: Ints
    sim_us: float
    phases: tuple[str, ...]
    queue_bytes: NDArray[np.float64]
    in_flight_bytes: float = 0.0


def _phase_flows(workload: PhaseSource, config: FabricConfig) -> Iterator[FlowSpec]:
    """Every phase's flows, in time order, as greedy flows that stop when their phase ends."""
    t = 0.0
    ports_per_host, priority = config.ports_per_host, config.lossless_priority
    while True:
        phase = workload.phase_at(t)
        for flow in phase.flows:
            for h, p in (flow.src, flow.dst):
                if not (0 <= h < config.n_hosts and 0 <= p < ports_per_host):
                    raise ValueError(f"host port ({h}, {p}) is not in the fabric")
            demand = math.inf if flow.demand_mbps == GREEDY else float(flow.demand_mbps)
            src = flow.src[0] * ports_per_host + flow.src[1]
            dst = flow.dst[0] * ports_per_host + flow.dst[1]
            yield FlowSpec(
                src,
                dst,
                phase.start_us,
                stop_us=phase.end_us,
                demand_mbps=demand,
                priority=priority,
                key=src * 4096 + dst,  # one ECMP path per port pair: paths compile once and are cached
                tag=phase.name,
            )
        if math.isinf(phase.end_us):
            return
        t = max(phase.end_us, t + 1e-6)


class Fabric:
    """The emulated fabric; :meth:`advance` moves it forward and reports counter deltas.

    ``params`` may be replaced between calls (a tuner trying an operating point); it applies from the
    next step. Host port (h, p) has index h * ports_per_host + p.
    """

    def __init__(
        self,
        config: FabricConfig | None = None,
        params: DcqcnParams | None = None,
        workload: PhaseSource | None = None,
    ) -> None:
        self.config = cfg = config or FabricConfig()
        self.workload = workload or Workload(
            cfg.seed,
            tors=cfg.tors,
            hosts_per_tor=cfg.hosts_per_tor,
            ports_per_host=cfg.ports_per_host,
            incast_degree=min(7, cfg.n_hosts - 1),  # 7:1 where the fabric is big enough
        )
        self.topology = leaf_spine(
            cfg.tors,
            cfg.spines,
            cfg.hosts_per_tor,
            cfg.ports_per_host,
            cfg.link_gbps,
            oversubscription=cfg.oversubscription,
            host_delay_us=cfg.link_delay_us,
            fabric_delay_us=cfg.link_delay_us,
            seed=cfg.seed,
        )
        sim = SimConfig(
            dt_us=cfg.dt_us,
            seed=cfg.seed,
            lossless_priorities=(cfg.lossless_priority,),
            pfc=cfg.pfc,
            lossy_buffer_bytes=cfg.lossy_buffer_bytes,
        )
        flows = _phase_flows(self.workload, cfg)
        self.engine = Engine(
            self.topology,
            flows,
            params or DcqcnParams(),
            sim,
            priorities=(cfg.lossless_priority,),
            measure_queues=False,  # counters only: no queue histograms
        )
        self._params = params or DcqcnParams()
        n = self.topology.n_ports
        self._reported = {
            name: np.zeros(n)
            for name in (*_PORT_COUNTER, "rx_pause_frames", "rx_pause_duration_us", "rx_pause_transitions")
        }
        self._packets = {"tx_packets": np.zeros(n), "rx_packets": np.zeros(n)}
        self._carry_us = 0.0
        net = self.engine.net
        prio = net.prio_index(cfg.lossless_priority)
        self._uplink_keys = np.array([self.topology.uplink(p) * net.P + prio for p in range(n)])
        self._downlink_keys = np.array([self.topology.downlink(p) * net.P + prio for p in range(n)])

    @property
    def params(self) -> DcqcnParams:
        return self._params

    @params.setter
    def params(self, params: DcqcnParams) -> None:
        self._params = params
        self.engine.set_params(params)

    @property
    def now_us(self) -> float:
        return self.engine.now_us

    def advance(self, sim_us: float) -> PortDeltas:
        """Simulate ``sim_us`` more µs in whole steps (a remainder carries to the next call)."""
        if not sim_us >= 0:
            raise ValueError(f"sim_us={sim_us} must be >= 0")
        dt = self.config.dt_us
        start = self.engine.now_us
        steps = math.floor((self._carry_us + sim_us) / dt + 1e-9)
        self._carry_us = max(self._carry_us + sim_us - steps * dt, 0.0)
        self.engine.run(start + steps * dt)
        return self._deltas(start, steps * dt)

    def _phases(self, start: float, span: float) -> tuple[str, ...]:
        names: list[str] = []
        t = start
        while True:
            phase = self.workload.phase_at(t)
            if phase.name not in names:
                names.append(phase.name)
            if phase.end_us >= start + span or span == 0:
                return tuple(names)
            t = max(phase.end_us, t + 1e-6)

    def _deltas(self, start: float, span: float) -> PortDeltas:
        """Whole counts per port since the last report; fractions carry over (cumulative floors)."""
        engine = self.engine
        shape = (self.config.n_hosts, self.config.ports_per_host)
        ports = engine.port_counters()
        totals = {field: ports[counter][0] for field, counter in _PORT_COUNTER.items()}
        rec = engine.recorder
        totals["rx_pause_duration_us"] = rec.pause_us[0, self._uplink_keys]
        totals["rx_pause_frames"] = rec.pause_frames[0, self._uplink_keys]
        totals["rx_pause_transitions"] = rec.pause_transitions[0, self._uplink_keys]
        whole: dict[str, Ints] = {}
        for name, total in totals.items():
            now = np.floor(total + 1e-9)
            whole[name] = (now - self._reported[name]).astype(np.int64).reshape(shape)
            self._reported[name] = now
        for name, source in (("tx_packets", "tx_bytes"), ("rx_packets", "rx_bytes")):
            now = np.floor(totals[source] / MTU_BYTES + 1e-9)
            whole[name] = (now - self._packets[name]).astype(np.int64).reshape(shape)
            self._packets[name] = now
        zeros = np.zeros(shape, dtype=np.int64)
        return PortDeltas(
            **whole,
            tx_pause_frames=zeros,
            tx_pause_duration_us=zeros.copy(),
            sim_us=span,
            phases=self._phases(start, span),
            queue_bytes=engine.standing_queues()[0, self._downlink_keys].reshape(shape),
            in_flight_bytes=float(engine.in_flight()[0]),
        )

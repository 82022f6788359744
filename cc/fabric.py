"""A compact two-tier RoCE fabric whose counters come from the DCQCN model.

Every host port has one link to its ToR; each ToR has one uplink to a single spine. Each switch egress
(ToR -> host port, ToR -> spine, spine -> ToR) is a fluid FIFO queue: it receives the sending rates of
the flows routed through it, drains at link capacity, marks ECN with the RED curve of
:class:`cc.params.DcqcnParams` and, with PFC on, pauses the host ports feeding it above XOFF until it
falls below XON (pausing a host port stops all its flows on the priority: PFC's head-of-line blocking).
CE marks are binomial over the packets each flow dequeues at its receiver's port (a per-flow FIFO
backlog), the receiver's NP paces CNPs, and the sender's RP reacts one step later (the feedback
delay). The fabric exists to give netd honest counters without an RDMA NIC, so
:meth:`Fabric.advance` returns them per host port, in mlx5 counter vocabulary.

Simplifications: every queue sees the sender rates (upstream queueing does not smooth downstream
arrivals); a switch pauses senders directly (no hop-by-hop pause of spine links); flows of a new phase
start at line rate with fresh DCQCN state; lossy drops are not retransmitted. Stretches where every
queue is empty and every flow already runs at its demand are advanced in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cc.dcqcn import NpState, RpState, np_step, red_mark_probability, rp_step
from cc.params import DcqcnParams
from cc.workload import GREEDY, Flow, Phase, PhaseSource, Workload

__all__ = ["MTU_BYTES", "Fabric", "FabricConfig", "PortDeltas"]

MTU_BYTES = 4096
_PAUSE_QUANTA_BITS = 0xFFFF * 512  # the largest PFC pause, 802.1Qbb
_COUNTERS = (
    "tx_bytes",
    "rx_bytes",
    "tx_packets",
    "rx_packets",
    "ecn_marked_rx",
    "cnp_sent",
    "cnp_handled",
    "rx_pause_frames",
    "rx_pause_duration_us",
    "rx_pause_transitions",
    "tx_pause_frames",
    "tx_pause_duration_us",
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
)
# per-flow sums of one phase -> (port counter, True if it belongs to the sender, False the receiver)
_FOLD = {
    "tx": ("tx_bytes", True),
    "handled": ("cnp_handled", True),
    "nak": ("packet_seq_err", True),
    "timeout": ("local_ack_timeout_err", True),
    "ecn": ("ecn_marked_rx", False),
    "cnp": ("cnp_sent", False),
    "lost": ("out_of_sequence", False),
}
Ints = NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class FabricConfig:
    """Topology, time step and switch mode.

    A ToR's uplink carries ``hosts_per_tor * ports_per_host * link_gbps / oversubscription`` (1.0 is
    non-blocking). ``lossless_priority`` is the PFC priority the counters belong to (for renderers);
    ``lossy_buffer_bytes`` is the per-queue buffer that overflows into drops when ``pfc`` is off.
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

    def __post_init__(self) -> None:
        for name in (
            "tors",
            "hosts_per_tor",
            "ports_per_host",
            "link_gbps",
            "dt_us",
            "oversubscription",
            "lossy_buffer_bytes",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} must be > 0")
        if not 0 <= self.lossless_priority <= 7:
            raise ValueError(f"lossless_priority={self.lossless_priority} outside [0, 7]")

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
    receive buffers are not modelled. ``queue_bytes``: ToR egress queue towards each port at the end.
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


@dataclass(slots=True)
class _Routes:
    """A phase's flows compiled to index arrays and flow x queue incidence, built once per phase."""

    src: Ints
    dst: Ints
    demand: NDArray[np.float64]
    through: NDArray[np.float64]  # (queues, flows): 1 where the flow crosses the queue
    through_t: NDArray[np.float64]
    feeds: NDArray[np.float64]  # (host ports, queues): 1 where the host port sends into the queue
    target: NDArray[np.float64]  # rate of each flow when nothing is congested, Mb/s
    shared_nic: bool  # some host port sources several flows
    fits: bool  # the target rates fit every queue


def _nic_share(rate: NDArray[np.float64], src: Ints, n_ports: int, line_mbps: float) -> NDArray[np.float64]:
    """Per-flow factor that fits the flows of each sending port into its line rate (proportionally)."""
    load = np.bincount(src, rate, n_ports)
    return np.minimum(1.0, line_mbps / np.maximum(load, 1e-9))[src]


class Fabric:
    """The emulated fabric; :meth:`advance` moves it forward and reports counter deltas.

    ``params`` may be replaced between calls (a tuner trying an operating point); it applies from the
    next step. Host port (h, p) has index h * ports_per_host + p; queues are ToR -> host port, then
    ToR -> spine per ToR, then spine -> ToR per ToR.
    """

    def __init__(
        self,
        config: FabricConfig | None = None,
        params: DcqcnParams | None = None,
        workload: PhaseSource | None = None,
    ) -> None:
        self.config = cfg = config or FabricConfig()
        self.params = params or DcqcnParams()
        self.workload = workload or Workload(
            cfg.seed,
            tors=cfg.tors,
            hosts_per_tor=cfg.hosts_per_tor,
            ports_per_host=cfg.ports_per_host,
            incast_degree=min(7, cfg.n_hosts - 1),  # 7:1 where the fabric is big enough
        )
        self._rng = np.random.default_rng(cfg.seed)
        self._n_hp = n_hp = cfg.n_hosts * cfg.ports_per_host
        tor_mbps = cfg.hosts_per_tor * cfg.ports_per_host * cfg.line_mbps / cfg.oversubscription
        self._cap = np.concatenate((np.full(n_hp, cfg.line_mbps), np.full(2 * cfg.tors, tor_mbps)))
        self._queue = np.zeros(len(self._cap))
        self._q_paused = np.zeros(len(self._cap), dtype=bool)
        self._hp_paused = np.zeros(n_hp, dtype=bool)  # host ports held by PFC for the next step
        self._was_paused = np.zeros(n_hp, dtype=bool)
        self._pause_clock = np.zeros(n_hp)  # µs since the last pause frame of an ongoing pause
        self._any_paused = self._pfc_engaged = False
        self._refresh_us = _PAUSE_QUANTA_BITS / cfg.line_mbps / 2  # pause refreshed at half the quanta
        self._now_us = self._carry_us = 0.0
        self._carry = {name: np.zeros(n_hp) for name in _COUNTERS}  # fractions not yet reported
        self._ports = {name: np.zeros(n_hp) for name in _COUNTERS}
        self._routes: dict[tuple[Flow, ...], _Routes] = {}
        self._phase: Phase | None = None
        self._seen: list[str] = []

    @property
    def now_us(self) -> float:
        return self._now_us

    def advance(self, sim_us: float) -> PortDeltas:
        """Simulate ``sim_us`` more µs in whole steps (a remainder carries to the next call)."""
        if not sim_us >= 0:
            raise ValueError(f"sim_us={sim_us} must be >= 0")
        dt = self.config.dt_us
        steps = math.floor((self._carry_us + sim_us) / dt + 1e-9)
        self._carry_us = max(self._carry_us + sim_us - steps * dt, 0.0)
        self._ports = {name: np.zeros(self._n_hp) for name in _COUNTERS}
        self._seen = []
        covered = steps * dt
        while steps > 0:
            if self._phase is None or self._now_us >= self._phase.end_us - 1e-6:
                self._enter(self.workload.phase_at(self._now_us))
            phase = self._phase
            assert phase is not None
            if phase.name not in self._seen:
                self._seen.append(phase.name)
            left = (phase.end_us - self._now_us) / dt
            chunk = steps if left >= steps else max(1, math.ceil(left - 1e-6))
            self._run(chunk)
            steps -= chunk
        self._fold()
        return self._deltas(covered)

    def _enter(self, phase: Phase) -> None:
        """Start a phase: its flows are new QPs at line rate with fresh DCQCN state."""
        self._fold()
        self._phase = phase
        if phase.flows not in self._routes:
            if len(self._routes) >= 256:  # a workload of ever-new flow sets must not grow memory
                self._routes.clear()
            self._routes[phase.flows] = self._compile(phase.flows)
        self._route = self._routes[phase.flows]
        n = len(phase.flows)
        self._rp = RpState.new(n, self.config.line_mbps, self.params)
        self._np = NpState.new(n)
        self._flow = {name: np.zeros(n) for name in _FOLD}
        self._rx_carry = np.zeros(n)
        self._backlog = np.zeros(n)  # bytes of each flow queued at its receiver's ToR port
        self._pending: NDArray[np.float64] | None = None  # CNPs on their way back to the senders

    def _compile(self, flows: tuple[Flow, ...]) -> _Routes:
        cfg, n_hp, n = self.config, self._n_hp, len(flows)
        for h, p in (port for f in flows for port in (f.src, f.dst)):
            if not (0 <= h < cfg.n_hosts and 0 <= p < cfg.ports_per_host):
                raise ValueError(f"host port ({h}, {p}) is not in the fabric")
        src = np.array([h * cfg.ports_per_host + p for h, p in (f.src for f in flows)], dtype=np.int64)
        dst = np.array([h * cfg.ports_per_host + p for h, p in (f.dst for f in flows)], dtype=np.int64)
        demand = np.array([np.inf if f.demand_mbps == GREEDY else float(f.demand_mbps) for f in flows])
        tor_of = np.arange(n_hp) // (cfg.hosts_per_tor * cfg.ports_per_host)
        through = np.zeros((len(self._cap), n))
        idx = np.arange(n)
        through[dst, idx] = 1.0
        cross = tor_of[src] != tor_of[dst]
        through[n_hp + tor_of[src[cross]], idx[cross]] = 1.0
        through[n_hp + cfg.tors + tor_of[dst[cross]], idx[cross]] = 1.0
        sources = np.zeros((n_hp, n))
        sources[src, idx] = 1.0
        target = np.minimum(demand, cfg.line_mbps)
        target *= _nic_share(target, src, n_hp, cfg.line_mbps)
        return _Routes(
            src=src,
            dst=dst,
            demand=demand,
            through=through,
            through_t=through.T.copy(),
            feeds=(sources @ through.T > 0).astype(np.float64),
            target=target,
            shared_nic=bool(n and np.bincount(src).max() > 1),
            fits=bool(np.all(through @ target <= self._cap * (1 + 1e-9))),
        )

    def _run(self, chunk: int) -> None:
        """Step ``chunk`` times through the current phase, jumping ahead once nothing is congested."""
        cfg, p, routes, rp, q = self.config, self.params, self._route, self._rp, self._queue
        dt, line, n_hp = cfg.dt_us, cfg.line_mbps, self._n_hp
        to_bytes = dt / 8.0  # Mb/s x µs = bits
        cap_step = self._cap * to_bytes
        kmin = p.kmin_bytes if p.ecn_enabled else math.inf
        xon = p.xon_bytes if cfg.pfc else math.inf
        drop_above = math.inf if cfg.pfc else float(cfg.lossy_buffer_bytes)
        no_cnp = np.zeros(len(routes.src))
        tx, handled, rx = self._flow["tx"], self._flow["handled"], self._ports["rx_bytes"]
        backlog = self._backlog
        qmax = float(q.max())
        for done in range(chunk):
            if (
                qmax == 0.0
                and self._pending is None
                and not self._pfc_engaged
                and routes.fits
                and bool(np.all(rp.rc >= routes.target * (1 - 1e-9)))
            ):
                self._skip(chunk - done)
                return
            rate = np.minimum(rp.rc, routes.demand)
            if self._any_paused:
                rate *= ~self._hp_paused[routes.src]
                self._account_pause(dt)
            if routes.shared_nic:
                rate *= _nic_share(rate, routes.src, n_hp, line)
            sent = rate * to_bytes
            arrivals = routes.through @ sent
            q += arrivals
            departed = np.minimum(q, cap_step)
            share = departed / np.maximum(q, 1e-9)  # FIFO fluid: each flow's backlog leaves alike
            q -= departed
            rx += departed[:n_hp]
            tx += sent
            backlog += sent
            delivered = backlog * share[routes.dst]
            backlog -= delivered
            qmax = float(q.max())
            if qmax > drop_above:
                self._drop(arrivals, sent, drop_above)
                qmax = drop_above
            cnps = self._mark(delivered) if qmax > kmin else None
            if cnps is None:
                self._np.now_us += dt
            pending = self._pending
            rp_step(rp, no_cnp if pending is None else pending, sent, dt, p, line)
            if pending is not None:
                handled += pending
            self._pending = cnps
            if qmax > xon or self._pfc_engaged:
                self._update_pfc()
            self._now_us += dt

    def _skip(self, steps: int) -> None:
        """Closed form for calm stretches: constant rates, no marks, no pause, only RP timers move."""
        span = steps * self.config.dt_us
        sent = self._route.target * (span / 8.0)
        self._flow["tx"] += sent
        self._ports["rx_bytes"] += (self._route.through @ sent)[: self._n_hp]
        rp_step(self._rp, np.zeros(len(sent)), sent, span, self.params, self.config.line_mbps)
        self._np.now_us += span
        self._now_us += span

    def _mark(self, delivered: NDArray[np.float64]) -> NDArray[np.float64]:
        """CP + NP: binomial CE marks (at dequeue) on the packets each flow delivered; the CNPs."""
        p, routes = self.params, self._route
        mark = red_mark_probability(self._queue, p.kmin_bytes, p.kmax_bytes, p.pmax)
        mark_flow = -np.expm1(routes.through_t @ np.log1p(-np.minimum(mark, 1 - 1e-12)))
        packets = self._rx_carry + delivered / MTU_BYTES
        whole = np.floor(packets)
        self._rx_carry = packets - whole
        ce = self._rng.binomial(whole.astype(np.int64), mark_flow).astype(np.float64)
        cnps = np_step(self._np, ce, self.config.dt_us, p)
        self._flow["ecn"] += ce
        self._flow["cnp"] += cnps
        return cnps

    def _drop(self, arrivals: NDArray[np.float64], sent: NDArray[np.float64], limit: float) -> None:
        """Lossy fabric: tail-drop above the buffer; the receiver sees a gap (out of sequence), the
        sender a NAK (packet_seq_err), and a lost tail (probability = loss share) times out."""
        over = np.maximum(self._queue - limit, 0.0)
        self._queue -= over
        ratio = np.divide(over, arrivals, out=np.zeros_like(over), where=arrivals > 0)
        loss = np.minimum(self._route.through_t @ ratio, 1.0)
        hit = loss > 0
        self._flow["lost"] += np.ceil(sent * loss / MTU_BYTES)
        np.maximum(self._backlog - sent * loss, 0.0, out=self._backlog)
        self._flow["nak"] += hit
        self._flow["timeout"] += hit & (self._rng.random(len(loss)) < loss)

    def _update_pfc(self) -> None:
        """Switch side: XOFF/XON hysteresis per egress queue; pause every host port feeding a paused one."""
        q, p, qp = self._queue, self.params, self._q_paused
        qp[:] = (q > p.xoff_bytes) | (qp & (q > p.xon_bytes))
        self._pfc_engaged = bool(qp.any())
        held = self._route.feeds @ qp > 0
        self._ports["rx_pause_transitions"] += self._hp_paused & ~held
        self._hp_paused = held
        self._any_paused = bool(self._hp_paused.any())
        if not self._any_paused:
            self._was_paused[:] = False
            self._pause_clock[:] = 0.0

    def _account_pause(self, dt: float) -> None:
        """Host side: a pause frame when a pause starts, then one per refresh interval while it lasts."""
        held = self._hp_paused
        self._ports["rx_pause_duration_us"] += held * dt
        clock = (self._pause_clock + dt) * held
        refreshes = np.floor(clock / self._refresh_us)
        self._pause_clock = clock - refreshes * self._refresh_us
        self._ports["rx_pause_frames"] += (held & ~self._was_paused) + refreshes
        self._was_paused = held.copy()

    def _fold(self) -> None:
        """Move the current phase's per-flow sums onto the sending and receiving host ports."""
        if self._phase is None:
            return
        for flow_sum, (counter, at_sender) in _FOLD.items():
            side = self._route.src if at_sender else self._route.dst
            self._ports[counter] += np.bincount(side, self._flow[flow_sum], self._n_hp)
            self._flow[flow_sum][:] = 0.0

    def _deltas(self, covered_us: float) -> PortDeltas:
        """Whole counts per port; fractions (bytes, packets, µs) carry over to the next report."""
        ports, shape = self._ports, (self.config.n_hosts, self.config.ports_per_host)
        ports["tx_packets"] = ports["tx_bytes"] / MTU_BYTES
        ports["rx_packets"] = ports["rx_bytes"] / MTU_BYTES
        whole: dict[str, Ints] = {}
        for name in _COUNTERS:
            total = self._carry[name] + ports[name]
            counts = np.floor(total)
            self._carry[name] = total - counts
            whole[name] = counts.astype(np.int64).reshape(shape)
        return PortDeltas(
            **whole,
            sim_us=covered_us,
            phases=tuple(self._seen),
            queue_bytes=self._queue[: self._n_hp].reshape(shape).copy(),
        )

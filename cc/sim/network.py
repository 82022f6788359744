"""A topology compiled for one time step: queue keys, capacities, delays in steps, flow paths.

Every (directed link, priority) pair is a *key*: at the link's upstream end it names an egress queue
(a switch port's queue for that priority, or the NIC's transmit side for a host uplink); at its
downstream end it names the ingress buffer PFC accounts against. The same key therefore carries the
egress backlog, the ingress occupancy that may pause it, and the pause the upstream obeys. Key ``K``
(one past the last) is a trash slot that unused path positions point at.

A flow crossing n links has n - 1 switch egress queues ("hops"). Its bytes are *emitted* n times:
by the NIC into hop 0, by hop h into hop h + 1, and by the last hop to the receiver. Each emission
crosses one link and lands ``max(1, delay / dt)`` steps later (fractional delays are split between
two consecutive steps so the mean is exact); so a hop costs at least one step, which is the model's
time resolution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cc.sim.topology import Topology
from cc.sim.traffic import FlowSpec

__all__ = ["MTU_BYTES", "CompiledFlow", "Network", "SimConfig"]

MTU_BYTES = 4096
_PAUSE_QUANTA_BITS = 0xFFFF * 512  # the longest PFC pause, 802.1Qbb


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the fabric behaves and how finely it is stepped.

    ``dt_us``: the time step (a hop and a feedback loop take at least one). ``lossless_priorities``:
    priorities with PFC when ``pfc`` is on; others tail-drop above ``lossy_buffer_bytes`` per egress
    queue. ``headroom_scale``: 1.0 sizes each ingress buffer's PFC headroom to absorb exactly what is
    in flight after XOFF (2 link delays + a response step + 2 MTU); below 1, a pause can overflow it
    and drop. ``ecn_reference_gbps``: the port speed the params' Kmin/Kmax are given for; other ports
    scale them linearly (thresholds track the bandwidth-delay product, as per-speed switch profiles
    do). ``switch_buffer_bytes``: each switch's shared pool (32 MB: Trident 3 class; current parts
    have 12-64 MB); ``dynamic_threshold``: the share ``alpha`` of the free pool one ingress (lossless)
    or egress queue (lossy) may take (:mod:`cc.sim.buffer`; 1 is SONiC's lossless ``dynamic_th`` 0).
    """

    dt_us: float = 1.0
    seed: int = 0
    lossless_priorities: tuple[int, ...] = (3,)
    pfc: bool = True
    headroom_scale: float = 1.0
    lossy_buffer_bytes: float = 6e6
    ecn_reference_gbps: float = 200.0
    switch_buffer_bytes: float = 32e6
    dynamic_threshold: float = 1.0

    def __post_init__(self) -> None:
        if not (self.dt_us > 0 and self.headroom_scale >= 0 and self.lossy_buffer_bytes > 0):
            raise ValueError("dt_us and lossy_buffer_bytes must be > 0, headroom_scale >= 0")
        if not (self.switch_buffer_bytes > 0 and self.dynamic_threshold > 0):
            raise ValueError("switch_buffer_bytes and dynamic_threshold must be > 0")
        if not self.ecn_reference_gbps > 0:
            raise ValueError("ecn_reference_gbps must be > 0")


@dataclass(frozen=True, slots=True)
class CompiledFlow:
    """One flow's path as index arrays over ``hop_max`` queue positions and ``hop_max + 1`` emissions."""

    queue_keys: NDArray[np.int64]  # (H,) egress key of each hop, trash beyond the path
    ingress_keys: NDArray[np.int64]  # (H,) key of the link each hop's bytes arrived on
    emit_target: NDArray[np.int64]  # (H+1,) where emission j lands: hop index, H = receiver, H+1 = trash
    emit_delay: NDArray[np.float64]  # (H+1,) steps, >= 1
    src_key: int  # the NIC's uplink key (a pause there stops this flow)
    cnp_delay_steps: int  # receiver -> sender (CNPs are tiny and high-priority: no queueing)
    line_mbps: float
    ideal_fct_us: float  # alone on an idle fabric: serialisation at the slowest link + path latency


class Network:
    """Keys, capacities and per-key constants for a topology at one ``dt`` and set of priorities."""

    def __init__(self, topology: Topology, config: SimConfig, priorities: Sequence[int]) -> None:
        self.topology, self.config = topology, config
        self.priorities = tuple(sorted(set(priorities), reverse=True))  # strict priority: served first
        self.P = P = len(self.priorities)
        self._prio_index = {p: i for i, p in enumerate(self.priorities)}
        links = topology.links
        self.n_links = len(links)
        self.K = self.n_links * P
        dt = config.dt_us
        gbps = np.array([link.gbps for link in links])
        delay = np.array([link.delay_us for link in links])
        self.link_cap_bytes = gbps * 1e3 * dt / 8  # bytes one step drains
        self.link_delay_steps = np.maximum(1, np.round(delay / dt)).astype(np.int64)
        self.link_is_switch = np.array([link.src >= topology.n_ports for link in links])
        per_key = np.repeat  # key = link * P + priority index
        self.key_gbps = np.append(per_key(gbps, P), np.inf)
        self.key_is_switch = np.append(per_key(self.link_is_switch, P), False)
        lossless = np.array([config.pfc and p in config.lossless_priorities for p in self.priorities])
        self.key_lossless = np.append(np.tile(lossless, self.n_links), False)
        # the switch (0-based among switches) a key's bytes are buffered in: at the link's downstream
        # end as ingress, at its upstream end as egress; -1 for a host's end and the trash key
        n_ports = topology.n_ports
        downstream = np.array([link.dst - n_ports if link.dst >= n_ports else -1 for link in links])
        upstream = np.array([link.src - n_ports if link.src >= n_ports else -1 for link in links])
        self.key_ingress_switch = np.append(per_key(downstream, P), -1)
        self.key_egress_switch = np.append(per_key(upstream, P), -1)
        self.key_delay_steps = np.append(per_key(self.link_delay_steps, P), 1)
        self.key_ecn_scale = np.append(per_key(gbps / config.ecn_reference_gbps, P), 0.0)  # trash: empty
        in_flight_steps = 2 * self.key_delay_steps + 1  # pause out, last bytes back, one step to react
        cap = np.append(per_key(self.link_cap_bytes, P), 0.0)
        self.key_headroom = config.headroom_scale * (in_flight_steps * cap + 2 * MTU_BYTES)
        self.key_refresh_us = np.append(per_key(_PAUSE_QUANTA_BITS / (gbps * 1e3) / 2, P), 1e30)
        self.hop_max = 1
        self._cache: dict[tuple[int, int, int, int], CompiledFlow] = {}

    def prio_index(self, priority: int) -> int:
        try:
            return self._prio_index[priority]
        except KeyError:
            raise ValueError(f"priority {priority} is not one of {self.priorities}") from None

    def reserve_hops(self, flows: Sequence[FlowSpec]) -> None:
        """Size ``hop_max`` for the longest path among ``flows`` (before any flow is compiled)."""
        if self._cache:
            raise RuntimeError("hop_max cannot change once flows are compiled")
        for f in flows:
            self.hop_max = max(self.hop_max, len(self.topology.path(f.src, f.dst, f.key)) - 1)

    def compile(self, flow: FlowSpec) -> CompiledFlow:
        cache_key = (flow.src, flow.dst, flow.key, flow.priority)
        hit = self._cache.get(cache_key)
        if hit is not None:
            return hit
        topo, P, H, dt = self.topology, self.P, self.hop_max, self.config.dt_us
        path = topo.path(flow.src, flow.dst, flow.key)
        hops = len(path) - 1
        if hops > H:
            raise ValueError(f"flow {flow} crosses {hops} switches, more than hop_max={H}")
        pi = self.prio_index(flow.priority)
        keys = np.array(path) * P + pi
        queue_keys = np.full(H, self.K, dtype=np.int64)
        ingress_keys = np.full(H, self.K, dtype=np.int64)
        queue_keys[:hops], ingress_keys[:hops] = keys[1:], keys[:-1]
        target = np.full(H + 1, H + 1, dtype=np.int64)
        target[:hops] = np.arange(hops)
        target[hops] = H
        delay = np.ones(H + 1)
        link_delays = np.array([topo.links[i].delay_us for i in path])
        delay[: hops + 1] = np.maximum(link_delays / dt, 1.0)
        slowest = min(topo.links[i].gbps for i in path)
        size_us = flow.size_bytes * 8 / (slowest * 1e3) if flow.finite else math.inf
        compiled = CompiledFlow(
            queue_keys=queue_keys,
            ingress_keys=ingress_keys,
            emit_target=target,
            emit_delay=delay,
            src_key=int(keys[0]),
            cnp_delay_steps=max(1, round(float(link_delays.sum()) / dt)),
            line_mbps=topo.links[path[0]].gbps * 1e3,
            ideal_fct_us=size_us + float(np.maximum(link_delays, dt).sum()) + dt,
        )
        self._cache[cache_key] = compiled
        return compiled

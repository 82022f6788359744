"""The default emulated fabric's brief receiver stalls: PFC visible in the first minute, never a storm.

The fabric model (cc/) pauses a host port only when one ingress of its ToR fills past XOFF, which the
default training workload (ring all-reduce, 7:1 gathers under DCQCN) never does, and it does not
model host receive buffers at all, so a NIC never sends pause. Real RoCE hosts do both now and then:
a receive path that stalls for a few milliseconds (PCIe or host-memory back-pressure, an IOMMU miss
burst, a checkpoint's memory traffic) fills the NIC's receive buffer, the NIC pauses its ToR on the
lossless priority (``tx_prio3_pause``), and the ToR, its queue towards that port no longer draining,
pauses the port feeding it (``rx_prio3_pause`` there).

:class:`ReceiverHiccups` is that, every ``period_s``: a ``stall_s`` stall of one host port, fed by the
same port of the previous host (its all-reduce ring neighbour). Receivers go round host by host, so
host 0 (the one `netd run` reads) pauses its ToR at the first hiccup and is paused by it at the
second. 10 ms is far below what netd calls a storm (pause over ``pfc_pause_fraction`` = 80% of a
fast-path sample of 50-75 ms, for ``pfc_detection_time``): a realistic, healthy blip.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from cc.sim.fabric import PortDeltas
from netd.emulated.fault_kinds import StuckReceiver
from netd.emulated.faults import FaultLayer

if TYPE_CHECKING:
    from netd.emulated.fabric_host import EmulatedFabric

__all__ = ["ReceiverHiccups"]


class ReceiverHiccups:
    """An emulator hook (``EmulatedFabric.hook``): periodic brief receiver stalls, round the hosts."""

    def __init__(
        self,
        n_hosts: int,
        ports_per_host: int,
        *,
        period_s: float = 15.0,
        first_s: float = 5.0,
        stall_s: float = 0.01,
        link_gbps: float = 200.0,
    ) -> None:
        if not (period_s > stall_s > 0 and first_s >= 0):
            raise ValueError(
                f"need period_s > stall_s > 0 and first_s >= 0 (got {period_s}, {stall_s}, {first_s})"
            )
        self.n_hosts, self.ports_per_host = n_hosts, ports_per_host
        self.period_s, self.first_s, self.stall_s = period_s, first_s, stall_s
        self.link_gbps = link_gbps

    def stall(self, k: int) -> StuckReceiver:
        """The k-th stall (k >= 0): host k mod n, its ports in turn, fed by the previous host."""
        host = k % self.n_hosts
        port = (k // self.n_hosts) % self.ports_per_host
        start = self.first_s + k * self.period_s
        feeder = ((host - 1) % self.n_hosts, port)
        return StuckReceiver(host, port, start, start + self.stall_s, feeders=(feeder,))

    def within(self, start_s: float, wall_s: float) -> list[StuckReceiver]:
        """The stalls that overlap the slice [start_s, start_s + wall_s)."""
        first = max(0, math.floor((start_s - self.first_s - self.stall_s) / self.period_s))
        last = math.floor((start_s + wall_s - self.first_s) / self.period_s)
        candidates = (self.stall(k) for k in range(first, last + 1))
        return [s for s in candidates if s.overlap(start_s, wall_s) > 0]

    def on_deltas(self, deltas: PortDeltas, start_s: float, wall_s: float) -> PortDeltas:
        stalls = self.within(start_s, wall_s)
        return FaultLayer(stalls, self.link_gbps).on_deltas(deltas, start_s, wall_s) if stalls else deltas

    def on_counters(self, fabric: EmulatedFabric, start_s: float, wall_s: float) -> None:
        """Stalls change the model's deltas only."""

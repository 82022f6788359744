"""Values the eBPF probes produce (one :class:`BpfSample` per tick, in ``Snapshot.bpf``).

Frozen values with no behaviour beyond small derived properties, like netd.model.snapshot (which imports this
module for ``Snapshot.bpf``, so it depends on the standard library only): the sources build them, the
exporter, the API and the CLI read them. Addresses and QP numbers live here (for the API);
they never become Prometheus labels (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "BpfSample",
    "FlowRecord",
    "MapFill",
    "PfcCounts",
    "ProbeState",
    "ProgramStats",
    "RoceClassCount",
    "TcpEndpoint",
]


def _empty() -> Mapping[Any, int]:
    return MappingProxyType({})


# Probe names, in the order netd reports them.
PROBES = ("roce", "pfc", "tcp_retransmits", "rdma_cm")


@dataclass(frozen=True, slots=True)
class ProbeState:
    """What happened to one probe family: attached (how, where), skipped or failed (why)."""

    probe: str  # one of PROBES
    state: str  # "attached", "skipped" (its attach point is absent), "failed", "disabled"
    detail: str  # where it is attached, or the reason it is not
    attach: str | None = None  # "tc", "tracepoint", "fexit"

    @property
    def attached(self) -> bool:
        return self.state == "attached"


@dataclass(frozen=True, slots=True)
class RoceClassCount:
    """RoCEv2 packets and bytes seen on one tc hook with one DSCP and ECN codepoint."""

    direction: str  # "ingress" or "egress"
    dscp: int
    ecn: int  # 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE
    packets: int
    bytes: int


@dataclass(frozen=True, slots=True)
class FlowRecord:
    """One RoCEv2 flow: (source GID, destination GID, destination QP) on one hook."""

    src: str  # GID as text: an IPv6 address, or ::ffff:a.b.c.d for IPv4
    dst: str
    dest_qp: int
    direction: str
    packets: int
    bytes: int
    ce: int
    ect: int
    cnp: int
    acks: int
    naks: int
    nak_seq: int
    psn_gaps: int
    psn_missing: int
    psn_rewinds: int
    dscp: int
    last_opcode: int
    first_seen: float | None  # wall clock; None when the kernel's tick clock is unknown
    last_seen: float | None

    @property
    def ce_fraction(self) -> float:
        return self.ce / self.packets if self.packets else 0.0

    @property
    def congestion_score(self) -> int:
        """CE marks carried plus CNPs addressed to this QP: how much congestion the flow met."""
        return self.ce + self.cnp

    @property
    def victim_score(self) -> int:
        """NAKs, PSN gaps and rewinds: how much loss and recovery the flow suffered."""
        return self.naks + self.psn_gaps + self.psn_rewinds


@dataclass(frozen=True, slots=True)
class PfcCounts:
    """MAC control frames received on one interface (what reached the kernel)."""

    netdev: str
    ifindex: int
    pause_frames: int
    pause_quanta: int
    pause_resumes: int
    pfc_frames: int
    other_opcode: int
    malformed: int
    prio_frames: tuple[int, ...]  # 8 entries, by priority
    prio_quanta: tuple[int, ...]
    prio_resumes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TcpEndpoint:
    """TCP retransmissions towards one remote endpoint."""

    address: str
    port: int
    family: str  # "ipv4" or "ipv6"
    retransmits: int
    state: str  # TCP state at the last retransmission, e.g. "ESTABLISHED"
    first_seen: float | None
    last_seen: float | None


@dataclass(frozen=True, slots=True)
class MapFill:
    """Occupancy of one BPF map; evictions where the map is an LRU whose inserts netd counts."""

    map: str
    entries: int
    capacity: int
    evictions: int | None = None


@dataclass(frozen=True, slots=True)
class ProgramStats:
    """Kernel run statistics of one loaded program (None while statistics are off)."""

    program: str
    run_count: int | None
    run_time_ns: int | None


@dataclass(frozen=True, slots=True)
class BpfSample:
    """Everything the probes report in one tick. Counters are totals since the probes were loaded."""

    probes: tuple[ProbeState, ...]
    roce_classes: tuple[RoceClassCount, ...] = ()
    # (direction, event) -> total; events: cnp, ack, nak_seq, nak_rnr, nak_other, psn_gap, psn_missing,
    # psn_rewind, flow_new, flow_lost, flow_writeback, and rej_<reason> for rejected UDP/4791 packets
    roce_events: Mapping[tuple[str, str], int] = field(default_factory=_empty)
    flows: tuple[FlowRecord, ...] = ()
    flows_scanned_at: float | None = None  # wall clock of the flow-table scan these flows come from
    pfc: tuple[PfcCounts, ...] = ()
    tcp_retransmits: int | None = None  # None when the TCP probe is not attached
    tcp_endpoints: tuple[TcpEndpoint, ...] = ()
    rdma_cm_events: Mapping[str, int] = field(default_factory=_empty)  # event name -> total
    rdma_events: Mapping[str, int] = field(default_factory=_empty)  # cm_errors, qp_create, ...
    maps: tuple[MapFill, ...] = ()
    programs: tuple[ProgramStats, ...] = ()
    run_stats: bool = False  # whether the kernel is accumulating program run statistics

    def probe(self, name: str) -> ProbeState | None:
        for p in self.probes:
            if p.probe == name:
                return p
        return None

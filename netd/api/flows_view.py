"""JSON documents for GET /v1/flows and `netd flows`: per-flow tables and the top-N lists.

"Congested" flows met congestion: their packets carried ECN CE marks, or CNPs were addressed to their
QP. "Victim" flows show loss and recovery: NAKs, PSN gaps (packets missing before the probe saw them)
and PSN rewinds (retransmissions). Both lists hold only flows with a non-zero score, highest first.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from netd.model.bpf import BpfSample, FlowRecord, TcpEndpoint
from netd.model.snapshot import Snapshot

__all__ = ["SORTS", "flow_doc", "flows_document", "sort_flows"]

SORTS: dict[str, Callable[[FlowRecord], tuple[float, ...]]] = {
    "congested": lambda f: (f.congestion_score, f.ce_fraction, f.bytes),
    "victims": lambda f: (f.victim_score, f.psn_missing, f.bytes),
    "bytes": lambda f: (f.bytes, f.packets),
    "packets": lambda f: (f.packets, f.bytes),
    "recent": lambda f: (f.last_seen or 0.0, f.bytes),
}


def _ip(gid: str) -> str:
    """A GID as the IP address it carries (IPv4-mapped GIDs as dotted quads)."""
    addr = ipaddress.IPv6Address(gid)
    return str(addr.ipv4_mapped or addr)


def flow_doc(f: FlowRecord) -> dict[str, Any]:
    doc = asdict(f)
    doc.update(
        src_ip=_ip(f.src),
        dst_ip=_ip(f.dst),
        ce_fraction=round(f.ce_fraction, 6),
        congestion_score=f.congestion_score,
        victim_score=f.victim_score,
    )
    return doc


def sort_flows(flows: Iterable[FlowRecord], sort: str, direction: str | None = None) -> list[FlowRecord]:
    # ties broken by identity, so a listing is stable from one request to the next
    chosen = [f for f in flows if direction is None or f.direction == direction]
    return sorted(chosen, key=lambda f: (*(-x for x in SORTS[sort](f)), f.src, f.dst, f.dest_qp, f.direction))


def _endpoint_doc(e: TcpEndpoint) -> dict[str, Any]:
    return asdict(e)


def flows_document(
    snap: Snapshot, bpf: BpfSample, top: int, sort: str, direction: str | None
) -> dict[str, Any]:
    flows = sort_flows(bpf.flows, sort, direction)
    congested = [f for f in sort_flows(bpf.flows, "congested", direction) if f.congestion_score][:top]
    victims = [f for f in sort_flows(bpf.flows, "victims", direction) if f.victim_score][:top]
    return {
        "host": snap.host,
        "timestamp": snap.timestamp,
        "scanned_at": bpf.flows_scanned_at,
        "probes": [asdict(p) for p in bpf.probes],
        "sort": sort,
        "direction": direction,
        "top": top,
        "total_flows": len(flows),
        "flows": [flow_doc(f) for f in flows[:top]],
        "congested": [flow_doc(f) for f in congested],
        "victims": [flow_doc(f) for f in victims],
        "tcp_retransmits": {
            "total": bpf.tcp_retransmits,
            "endpoints": [_endpoint_doc(e) for e in bpf.tcp_endpoints[:top]],
        },
    }

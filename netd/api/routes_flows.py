"""GET /v1/flows: what the eBPF probes saw, per RoCEv2 flow and per TCP endpoint (docs/ebpf.md).

Flow identities (GIDs, QP numbers) and endpoint addresses are served here and only here; Prometheus
gets aggregates without them (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel, Field

from netd.api.flows_view import flows_document
from netd.daemon.state import PublishedState

__all__ = ["flows_router"]


class ProbeDoc(BaseModel):
    probe: str = Field(description="roce, pfc, tcp_retransmits or rdma_cm")
    state: str = Field(description="attached, skipped, failed or disabled")
    detail: str = Field(description="where it is attached, or why it is not")
    attach: str | None = Field(description="tc, tracepoint or fexit")


class FlowDoc(BaseModel):
    src: str = Field(description="source GID (IPv4 as ::ffff:a.b.c.d)")
    dst: str
    src_ip: str
    dst_ip: str
    dest_qp: int = Field(description="BTH destination QP")
    direction: str = Field(description="the tc hook that saw the flow: ingress or egress")
    packets: int
    bytes: int = Field(description="frame bytes, Ethernet header included")
    ce: int = Field(description="packets marked ECN Congestion Experienced")
    ce_fraction: float
    ect: int
    cnp: int = Field(description="CNPs addressed to dest_qp")
    acks: int
    naks: int
    nak_seq: int
    psn_gaps: int = Field(description="requests whose PSN skipped ahead")
    psn_missing: int = Field(description="PSNs skipped over")
    psn_rewinds: int = Field(description="requests whose PSN went back (retransmission)")
    dscp: int
    last_opcode: int
    first_seen: float | None
    last_seen: float | None
    congestion_score: int = Field(description="ce + cnp")
    victim_score: int = Field(description="naks + psn_gaps + psn_rewinds")


class EndpointDoc(BaseModel):
    address: str
    port: int
    family: str
    retransmits: int
    state: str
    first_seen: float | None
    last_seen: float | None


class TcpDoc(BaseModel):
    total: int | None = Field(description="retransmissions since the probe was loaded")
    endpoints: list[EndpointDoc]


class FlowsDoc(BaseModel):
    host: str
    timestamp: float
    scanned_at: float | None = Field(description="when the flow table was last read (wall clock)")
    probes: list[ProbeDoc]
    sort: str
    direction: str | None
    top: int
    total_flows: int
    flows: list[FlowDoc] = Field(description="flows in `sort` order, at most `top`")
    congested: list[FlowDoc] = Field(description="top flows by CE marks and CNPs")
    victims: list[FlowDoc] = Field(description="top flows by NAKs, PSN gaps and rewinds")
    tcp_retransmits: TcpDoc


Top = Annotated[int, Query(ge=1, le=10_000, description="how many flows and endpoints per list")]
Sort = Annotated[
    Literal["congested", "victims", "bytes", "packets", "recent"], Query(description="order of `flows`")
]
Direction = Annotated[Literal["ingress", "egress"] | None, Query(description="only flows seen on this hook")]


def flows_router(state: Callable[[], PublishedState | None]) -> APIRouter:
    router = APIRouter(tags=["eBPF flows"])

    @router.get("/v1/flows", response_model=FlowsDoc)
    def flows(top: Top = 20, sort: Sort = "congested", direction: Direction = None) -> dict[str, Any]:
        """RoCEv2 flows seen by the eBPF packet probes (top congested and victim flows, and the table in
        the order asked), TCP retransmissions per remote endpoint, and each probe's state. The flow
        table is read every [bpf] flow_scan_interval; `scanned_at` says when."""
        st = state()
        if st is None:
            raise HTTPException(503, "no tick completed yet")
        snap = st.observation.snapshot
        if snap.bpf is None:
            raise HTTPException(404, "the eBPF probes are not enabled ([bpf] enabled = true; docs/ebpf.md)")
        return flows_document(snap, snap.bpf, top, sort, direction)

    return router

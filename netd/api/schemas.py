"""Response models of /v1/topology and /v1/congestion (they are the OpenAPI schema's documentation)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

__all__ = [
    "CongestionItem",
    "CongestionPage",
    "GidOut",
    "InterfaceOut",
    "NeighborOut",
    "PortPlacementOut",
    "RailOut",
    "SourceOut",
    "SpineOut",
    "TopologyDoc",
    "TorOut",
]


class _Envelope(BaseModel):
    view: Literal["host", "fabric"] = Field(
        description="host: this host only; fabric: every host in Prometheus"
    )
    timestamp: float = Field(description="when the data was collected, seconds since the epoch")
    emulated: bool = Field(description="true when the counters come from netd's emulated fabric")
    note: str | None = Field(None, description="a caveat about this view, e.g. no Prometheus configured")


class _Page(BaseModel):
    total: int = Field(description="items matching the filters")
    offset: int
    limit: int
    next_offset: int | None = Field(None, description="offset of the next page; null on the last")


class GidOut(BaseModel):
    index: int
    gid: str
    type: str
    netdev: str | None


class NeighborOut(BaseModel):
    interface: str
    switch: str | None
    switch_port: str | None
    mgmt_address: str | None
    chassis_id: str | None
    port_id: str | None
    port_id_type: str | None
    system_descr: str | None
    ttl_s: int | None
    max_frame_size: int | None  # IEEE 802.3 Maximum Frame Size TLV, when the neighbour sends it
    source: str


class InterfaceOut(BaseModel):
    name: str
    index: int
    kind: str
    mac: str | None
    mtu: int | None
    oper_state: str | None
    master: str | None
    link: str | None
    vlan_id: int | None
    addresses: list[str]


class PortPlacementOut(BaseModel):
    host: str
    device: str
    port: int
    netdev: str | None
    state: str | None
    link_layer: str | None
    rail: int | None
    tor: str | None = Field(description="ToR name; several joined by '+' for a bond across an MLAG pair")
    tor_port: str | None
    spine: str | None = Field(description="the ToR's spine uplinks joined by '+'")
    placed_by: str = Field(description="lldp, static, lldp+static, or none")
    bond: str | None
    members: list[str]
    addresses: list[str]
    vlans: list[InterfaceOut]
    gids: list[GidOut] = Field(description="RoCE v2 GIDs")
    neighbors: list[NeighborOut]


class TorOut(BaseModel):
    name: str
    spines: list[str]
    rail: int | None
    mgmt_address: str | None
    hosts: list[str]
    ports: int


class SpineOut(BaseModel):
    name: str
    tors: list[str]
    mgmt_address: str | None


class RailOut(BaseModel):
    rail: int
    tors: list[str]
    ports: int


class SourceOut(BaseModel):
    source: str
    ok: bool
    detail: str
    items: int


class PortPage(_Page):
    items: list[PortPlacementOut]


class TopologyDoc(_Envelope):
    hosts: list[str]
    tors: list[TorOut]
    spines: list[SpineOut]
    rails: list[RailOut]
    ports: PortPage = Field(description="host ports matching the filters, one page")
    interfaces: list[InterfaceOut] = Field(description="this host's netdevs (host view on the live host)")
    sources: list[SourceOut]
    warnings: list[str]


class CongestionItem(BaseModel):
    scope: Literal["port", "tor", "spine"]
    name: str = Field(description="host:device/port, a ToR or a spine")
    score: float = Field(ge=0, le=1, description="this tick's score")
    smoothed: float = Field(ge=0, le=1, description="EWMA of the scores; levels follow it")
    level: Literal["ok", "busy", "congested", "severe"]
    since: float = Field(description="when the current level was entered, seconds since the epoch")
    up: bool
    stormed: bool = Field(description="port: PFC storm; ToR/spine: some member is stormed")
    labels: dict[str, str]
    signals: dict[str, float | None] = Field(
        description="port: the four ratios; ToR/spine: mean, max, counts"
    )
    contributions: dict[str, float] = Field(description="port: each signal's weighted sub-score")
    members: list[str] = Field(description="ToR: its ports; spine: its ToRs")


class CongestionPage(_Envelope, _Page):
    scope: Literal["port", "tor", "spine"]
    formula: str = Field(description="where the scoring formula is documented")
    items: list[CongestionItem]

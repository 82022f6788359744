"""The ``[bpf]`` configuration section: which eBPF probes netd loads and where (docs/ebpf.md).

Kept beside :mod:`netd.config.settings` (same layer: stdlib and pydantic only) and added to its ``Config``.
Off by default: the probes need root, bcc and kernel headers, cost seconds of compilation at start,
and attach to interfaces only an operator can name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netd.config.types import SetPath

__all__ = ["BpfConfig"]


class BpfConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    # Interfaces for the packet probes (RoCEv2 parser, PFC counter): "IFNAME", or "NETNS/IFNAME" for
    # an interface inside the named network namespace (/run/netns/NETNS).
    interfaces: tuple[str, ...] = ()
    directions: tuple[Literal["ingress", "egress"], ...] = ("ingress", "egress")  # RoCE parser hooks
    roce: bool = True
    pfc: bool = True
    tcp_retransmits: bool = True
    rdma_events: bool = True
    # auto: the tracepoint (needs tracefs), else the raw tracepoint, else fexit (both need BTF);
    # or force one of them
    tcp_attach: Literal["auto", "tracepoint", "raw_tracepoint", "fexit"] = "auto"
    roce_port: int = Field(4791, ge=1, le=65535, description="UDP destination port of RoCEv2")
    flow_table_size: int = Field(16384, ge=0, le=1 << 22, description="LRU flow records; 0: no flows")
    flow_cache_slots: int = Field(1024, ge=64, le=1 << 16, description="per-CPU flow cache slots")
    tcp_table_size: int = Field(4096, ge=64, le=1 << 20)
    flow_scan_interval: float = Field(5.0, ge=0.5, le=3600, description="seconds between flow-table reads")
    # Kernel run statistics (per-program run count and time) while netd runs. They cost every BPF
    # program on the host a clock read per run (tens of ns on a VM), so they are off by default.
    run_stats: bool = False
    state_file: SetPath = Path("/run/netd/bpf-attachments.json")  # crash recovery of tc attachments

    @field_validator("interfaces")
    @classmethod
    def _check_interfaces(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for spec in v:
            netns, sep, name = spec.rpartition("/")
            if not name or (sep and not netns) or len(name) > 15 or any(c in name for c in ": \t"):
                raise ValueError(f"expected IFNAME or NETNS/IFNAME (IFNAME 1..15 characters), got {spec!r}")
        return v

    @field_validator("flow_cache_slots")
    @classmethod
    def _power_of_two(cls, v: int) -> int:
        if v & (v - 1):
            raise ValueError(f"must be a power of two, got {v}")
        return v

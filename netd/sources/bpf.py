"""The eBPF probe source: a narrow interface, its settings, and the implementations that need no kernel.

:class:`BpfSource` is what the collector calls once per tick (``read``) and at exit (``close``).
Implementations:

* ``netd.sources.bpf_bcc.BccBpfSource``: compiles ebpf/*.c with bcc, attaches, reads the maps;
* :class:`UnavailableBpfSource`: the probes could not start (no bcc, no privileges, ...); every tick
  reports each probe as disabled with the reason, so the API and `netd check` can say why;
* :class:`FakeBpfSource`: returns prepared samples, for tests of everything above the source.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from netd.model.bpf import PROBES, BpfSample, ProbeState

__all__ = ["PFC_SLOTS", "BpfSettings", "BpfSource", "FakeBpfSource", "UnavailableBpfSource"]

PFC_SLOTS = 256  # per-interface slots of the PFC counter (ifindex modulo this)


@dataclass(frozen=True)
class BpfSettings:
    """What to load and where (the composition root builds this from the [bpf] configuration)."""

    interfaces: tuple[str, ...] = ()  # "IFNAME" or "NETNS/IFNAME"
    directions: tuple[str, ...] = ("ingress", "egress")  # hooks for the RoCE parser
    roce: bool = True
    pfc: bool = True
    tcp_retransmits: bool = True
    rdma_events: bool = True
    tcp_attach: str = "auto"  # "auto", "tracepoint", "raw_tracepoint", "fexit"
    roce_port: int = 4791
    flow_table_size: int = 16384
    flow_cache_slots: int = 1024  # per CPU, a power of two
    tcp_table_size: int = 4096
    flow_scan_interval_s: float = 5.0
    run_stats: bool = False
    state_file: Path | None = None  # crash-recovery record of tc attachments

    @property
    def psn_slots(self) -> int:
        """Slots of the shared PSN state: a power of two, at least one per flow-table record (a flow
        whose slot another flow takes resynchronises instead of reporting gaps)."""
        return 1 << max(0, self.flow_table_size - 1).bit_length()

    def cflags(self) -> dict[str, tuple[str, ...]]:
        """The -D flags per C file (configuration never edits C source)."""
        return {
            "roce_parser.c": (
                f"-DNETD_ROCE_PORT={self.roce_port}",
                f"-DNETD_FLOW_TABLE_SIZE={self.flow_table_size}",
                f"-DNETD_FLOW_CACHE_SLOTS={self.flow_cache_slots}",
                f"-DNETD_PSN_SLOTS={self.psn_slots}",
                f"-DNETD_FLOWS={1 if self.flow_table_size else 0}",
            ),
            "pfc_counter.c": (f"-DNETD_PFC_SLOTS={PFC_SLOTS}",),
            "tcp_retrans.c": (f"-DNETD_TCP_TABLE_SIZE={self.tcp_table_size}",),
            "rdma_events.c": (),
        }

    def wanted(self) -> dict[str, bool]:
        return {
            "roce": self.roce,
            "pfc": self.pfc,
            "tcp_retransmits": self.tcp_retransmits,
            "rdma_cm": self.rdma_events,
        }


class BpfSource(Protocol):
    """Read once per tick; close once. ``read`` never raises for a probe that merely has no data."""

    def read(self) -> BpfSample: ...

    def close(self) -> None: ...


class UnavailableBpfSource:
    """The probes were configured but cannot run here; says why on every tick."""

    def __init__(self, reason: str, settings: BpfSettings | None = None) -> None:
        wanted = (settings or BpfSettings()).wanted()
        self.reason = reason
        self._sample = BpfSample(
            probes=tuple(
                ProbeState(p, "disabled", reason if wanted[p] else "disabled in configuration")
                for p in PROBES
            )
        )

    def read(self) -> BpfSample:
        return self._sample

    def close(self) -> None:
        pass


class FakeBpfSource:
    """Serves prepared samples in order (the last one repeats); records reads and closes."""

    def __init__(self, samples: Sequence[BpfSample] | BpfSample) -> None:
        self._samples = [samples] if isinstance(samples, BpfSample) else list(samples)
        if not self._samples:
            raise ValueError("FakeBpfSource needs at least one sample")
        self.reads = 0
        self.closed = False

    def read(self) -> BpfSample:
        sample = self._samples[min(self.reads, len(self._samples) - 1)]
        self.reads += 1
        return sample

    def close(self) -> None:
        self.closed = True

    @staticmethod
    def attached(probes: Iterable[str] = PROBES, **values: object) -> BpfSample:
        """A sample whose probes are all attached (tests override the values they need)."""
        sample = BpfSample(probes=tuple(ProbeState(p, "attached", "fake", "fake") for p in probes))
        return replace(sample, **values)  # type: ignore[arg-type]

"""One vocabulary for RDMA counters whose names differ per driver.

``describe(driver, group, raw_name)`` says what a counter file means: its netd
vocabulary name (``cnp_sent``, ``ecn_marked``, ...), the width of the raw
register, whether it wraps or saturates, and the unit scale. The raw tables
live in :mod:`netd.sources.counter_tables`; the named full counter sets
(:data:`COUNTER_SETS`) are what a real driver of each generation exposes, used
to build realistic fake trees.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from netd.model.snapshot import CounterGroup, Overflow
from netd.sources import counter_tables as t
from netd.sources.sysfs_io import list_dir

__all__ = [
    "COUNTER_SETS",
    "DRIVERS",
    "PMA_EXT_ONLY",
    "VOCABULARY",
    "CounterSet",
    "CounterSpec",
    "default_counter_set",
    "describe",
    "detect_driver",
]

DRIVERS = ("mlx5", "bnxt_re", "irdma", "rxe")

# The shared names; PMA error counters keep their PMA name (symbol_error, link_downed, ...).
VOCABULARY = frozenset(
    {
        "rx_bytes",
        "tx_bytes",
        "rx_packets",
        "tx_packets",
        "ecn_marked",
        "cnp_sent",
        "cnp_handled",
        "cnp_ignored",
        "out_of_sequence",
        "seq_err",
        "implied_nak_seq_err",
        "retransmits",
        "timeouts",
        "rnr",
        "out_of_buffer",
        "duplicate_request",
        "icrc_errors",
        "retries_exceeded",
        "req_cqe_error",
        "resp_cqe_error",
    }
)

# Present only in the extended-width PMA group: their presence tells pma_attrs_ext from pma_attrs.
PMA_EXT_ONLY = frozenset(t.PMA_EXT.names) - frozenset(t.PMA_LEGACY.names)

# PortXmitData/PortRcvData count 4-byte words (IBA; ABI doc "divided by 4 (lanes)").
_SCALE = MappingProxyType({"port_xmit_data": 4, "port_rcv_data": 4})

# Driver module (basename of device/driver) -> netd driver family. ib_device.dev.parent is the
# PCI function for mlx5, bnxt_re and irdma, so the link names the Ethernet driver (ice, bnxt_en).
_MODULES = MappingProxyType(
    {
        "mlx5_core": "mlx5",
        "mlx5_ib": "mlx5",
        "bnxt_en": "bnxt_re",
        "bnxt_re": "bnxt_re",
        "ice": "irdma",
        "i40e": "irdma",
        "irdma": "irdma",
        "rdma_rxe": "rxe",
    }
)
_PREFIXES = (("mlx5_", "mlx5"), ("bnxt_re", "bnxt_re"), ("irdma", "irdma"), ("rxe", "rxe"))
# hw_counters names unique to one family: the last resort when neither link nor name tells.
_SIGNATURES = (
    ("mlx5", "rx_write_requests"),
    ("mlx5", "roce_adp_retrans"),
    ("bnxt_re", "active_qps"),
    ("irdma", "RxECNMrkd"),
    ("irdma", "ip4InOctets"),
    ("rxe", "rcvd_pkts"),
)


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """What one raw counter file means."""

    name: str  # netd vocabulary name; the raw name when netd has no shared meaning for it
    width: int = 64  # bits of the raw register
    overflow: Overflow = Overflow.WRAP
    scale: int = 1  # multiply the raw value by this to get base units

    @property
    def raw_max(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True, slots=True)
class CounterSet:
    """The counter files one driver generation creates: ``counters/`` then ``hw_counters/``."""

    driver: str
    pma: tuple[str, ...]
    hw: tuple[str, ...]


COUNTER_SETS: Mapping[str, CounterSet] = MappingProxyType(
    {
        "mlx5": CounterSet("mlx5", t.PMA_EXT.names, t.MLX5.names),
        "mlx5_legacy_pma": CounterSet("mlx5", t.PMA_LEGACY.names, t.MLX5.names),
        "bnxt_re_old": CounterSet("bnxt_re", (), t.BNXT_RE_OLD.names),
        "bnxt_re_new": CounterSet("bnxt_re", (), t.BNXT_RE_NEW.names),
        "irdma_gen2": CounterSet("irdma", (), t.IRDMA_GEN2.names),
        "irdma_gen3": CounterSet("irdma", (), t.IRDMA_GEN3.names),
        "rxe": CounterSet("rxe", (), t.RXE.names),
    }
)
_DEFAULT_SETS = MappingProxyType(
    {"mlx5": "mlx5", "bnxt_re": "bnxt_re_new", "irdma": "irdma_gen3", "rxe": "rxe"}
)


def default_counter_set(driver: str) -> CounterSet:
    """The newest counter set of a driver family (KeyError for an unknown driver)."""
    return COUNTER_SETS[_DEFAULT_SETS[driver]]


def _specs(*tables: t.CounterTable) -> dict[str, CounterSpec]:
    """Merge tables into raw name -> spec; an earlier table wins for a name in several."""
    out: dict[str, CounterSpec] = {}
    for table in reversed(tables):
        for raw in table.names:
            out[raw] = CounterSpec(table.vocab.get(raw, raw), table.width_of(raw))
    return out


def _pma_specs(table: t.CounterTable) -> dict[str, CounterSpec]:
    # IBA PortCounters saturate at all-ones; the 64-bit extended ones wrap (in theory).
    return {
        raw: CounterSpec(
            name=table.vocab.get(raw, raw),
            width=(width := table.width_of(raw)),
            overflow=Overflow.SATURATE if width < 64 else Overflow.WRAP,
            scale=_SCALE.get(raw, 1),
        )
        for raw in table.names
    }


_PMA = {True: _pma_specs(t.PMA_EXT), False: _pma_specs(t.PMA_LEGACY)}
_HW: dict[str | None, dict[str, CounterSpec]] = {
    "mlx5": _specs(t.MLX5),
    "bnxt_re": _specs(t.BNXT_RE_NEW, t.BNXT_RE_OLD),
    "irdma": _specs(t.IRDMA_GEN3, t.IRDMA_GEN2),
    "rxe": _specs(t.RXE),
    # Unknown driver: mlx5's meaning (and 32-bit width) first, the de-facto names others copy.
    None: _specs(t.MLX5, t.BNXT_RE_NEW, t.BNXT_RE_OLD, t.IRDMA_GEN3, t.IRDMA_GEN2, t.RXE),
}


def describe(driver: str | None, group: CounterGroup, raw_name: str, *, pma_ext: bool = True) -> CounterSpec:
    """The meaning of ``raw_name`` in ``group`` on ``driver``.

    ``pma_ext`` says whether the port's ``counters/`` is the extended-width
    group (64-bit data counters); the reader decides it from the files
    present (:data:`PMA_EXT_ONLY`). An unknown name keeps its raw name as
    vocabulary name, 64 bits, wrapping.
    """
    if group is CounterGroup.PMA:
        spec = _PMA[pma_ext].get(raw_name)
    elif group is CounterGroup.HW:
        table = _HW.get(driver, _HW[None])
        spec = table.get(raw_name)
        # mlx5 switchdev representors expose the q-counters with a "vport_" prefix.
        if spec is None and driver == "mlx5" and raw_name.startswith("vport_"):
            spec = table.get(raw_name.removeprefix("vport_"))
    else:
        spec = None
    return spec if spec is not None else CounterSpec(raw_name)


def detect_driver(device_name: str, device_dir: Path, hw_names: Collection[str] | None = None) -> str | None:
    """The driver family of an RDMA device, or None.

    In order: the ``device/driver`` link (survives udev renames such as
    ``rocep65s0f0``), the kernel's default name prefix, then ``hw_counters``
    names unique to one family (listed from the first port when not given).
    """
    try:
        module = os.path.basename(os.readlink(device_dir / "device" / "driver"))
    except OSError:  # rxe has no parent device; a fake tree may lack the link
        module = ""
    if module in _MODULES:
        return _MODULES[module]
    for prefix, driver in _PREFIXES:
        if device_name.startswith(prefix):
            return driver
    if hw_names is None:
        ports = list_dir(device_dir / "ports")
        hw_names = set(list_dir(device_dir / "ports" / ports[0] / "hw_counters")) if ports else set()
    for driver, signature in _SIGNATURES:
        if signature in hw_names:
            return driver
    return None

"""The values that flow through netd's pipeline.

Sources return these; the loop assembles them into one immutable
:class:`Snapshot` per tick; the series layer (netd.series.tracker) turns two snapshots
into rates. Everything here is a frozen value with no behaviour beyond small
derived properties, so any layer may import it.

A counter that a source could not read is *absent* (not present in the
mapping, or ``None``), never zero: zero is a measurement.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from netd.model.bpf import BpfSample  # values too (stdlib only), kept apart for size

__all__ = [
    "PortIdentity",
    "Counter",
    "CounterGroup",
    "EthtoolSample",
    "Overflow",
    "PortSample",
    "Snapshot",
    "SourceStatus",
    "frozen_map",
    "tuple_getter",
]


def frozen_map(items: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only view of a fresh dict, so a frozen dataclass stays immutable in fact."""
    return MappingProxyType(dict(items or {}))


def tuple_getter(keys: Sequence[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A C-level fetch of ``keys`` (names from a mapping, positions from a list), always as a tuple
    (``operator.itemgetter`` of one key returns the item itself): how the hot paths pick the few
    readings they need out of many."""
    if len(keys) <= 1:
        return lambda items: tuple(items[k] for k in keys)
    return operator.itemgetter(*keys)


class Overflow(enum.Enum):
    """What a counter does when it reaches the top of its width."""

    WRAP = "wrap"  # continues from 0 (32-bit hw q-counters; 64-bit ones in theory)
    SATURATE = "saturate"  # sticks at all-ones (IB PMA error counters, 4..16 bit and legacy 32-bit data)


class CounterGroup(enum.Enum):
    """Where a counter was read from."""

    PMA = "counters"  # /sys/class/infiniband/<dev>/ports/<p>/counters
    HW = "hw_counters"  # /sys/class/infiniband/<dev>/ports/<p>/hw_counters
    ETHTOOL = "ethtool"  # ETHTOOL_GSTATS of the port's netdev


class Counter(NamedTuple):
    """One counter reading.

    ``value`` is in base units (bytes for the PMA data counters, which the
    hardware counts in 4-byte words: ``scale`` is 4 for those). ``width`` and
    ``overflow`` describe the *raw* register, so the series layer can tell a
    wrap from a reset and a saturated counter from an idle one: the raw maximum
    is ``(2**width - 1)``, and a saturated counter reads ``max * scale``.

    A NamedTuple rather than a frozen dataclass: a busy host builds ~1000 of
    these per tick, and tuple construction is several times cheaper.
    """

    raw_name: str  # the file or ethtool string as the driver names it
    name: str  # netd vocabulary name (e.g. "cnp_sent"); equals raw_name when unmapped
    group: CounterGroup
    value: int
    width: int = 64
    overflow: Overflow = Overflow.WRAP
    scale: int = 1

    @property
    def raw_max(self) -> int:
        return (1 << self.width) - 1

    @property
    def saturated(self) -> bool:
        return self.overflow is Overflow.SATURATE and self.value >= self.raw_max * self.scale


class PortIdentity:
    """What every per-port value shares: its key ``(device, port)`` and whether the link is up.

    A mixin for the frozen dataclasses that describe one RDMA port (a raw sample here, the detectors'
    per-interval deltas in :mod:`netd.detect.inputs`), so "up" means one thing everywhere.
    """

    __slots__ = ()
    device: str
    port: int
    state: str | None

    @property
    def key(self) -> tuple[str, int]:
        return (self.device, self.port)

    @property
    def up(self) -> bool:
        return self.state == "ACTIVE"


@dataclass(frozen=True, slots=True)
class PortSample(PortIdentity):
    """One RDMA port as read in one tick.

    ``counters`` maps the raw file name to its reading, for both groups
    (a name is unique across ``counters/`` and ``hw_counters/`` on every
    driver we know; if a driver ever duplicates one, the PMA reading wins and
    the other stays reachable under ``"hw_counters/<name>"``).
    """

    device: str
    port: int
    netdev: str | None
    link_layer: str | None  # "Ethernet" (RoCE) or "InfiniBand"
    state: str | None  # "ACTIVE", "DOWN", ...
    phys_state: str | None  # "LinkUp", "Disabled", ...
    rate_gbps: float | None  # from `rate`, e.g. 200.0
    gid_types: tuple[str, ...] = ()  # distinct GID types present, e.g. ("IB/RoCE v1", "RoCE v2")
    driver: str | None = None  # "mlx5", "bnxt_re", "irdma", "rxe", or None when unknown
    counters: Mapping[str, Counter] = field(default_factory=frozen_map)
    read_errors: tuple[str, ...] = ()  # counter files that failed to parse this tick (name: reason)
    # Keys of ``counters`` read at the slow cadence (``[rdma] slow_interval``: no per-tick signal or
    # detector reads them), and whether this sample read them: when not, their readings (and their
    # read errors) are those of the last sample that did, carried over (docs/metrics.md, Read cadence).
    slow_counters: frozenset[str] = frozenset()
    slow_read: bool = True

    def by_name(self) -> Mapping[str, Counter]:
        """Counters keyed by netd vocabulary name (first reading wins, PMA before HW)."""
        out: dict[str, Counter] = {}
        for c in self.counters.values():
            out.setdefault(c.name, c)
        return out


@dataclass(frozen=True, slots=True)
class EthtoolSample:
    """ETHTOOL_GSTATS of one netdev: names (stripped) to 64-bit values, in driver order."""

    netdev: str
    stats: Mapping[str, int] = field(default_factory=frozen_map)


@dataclass(frozen=True, slots=True)
class SourceStatus:
    """How one source fared in one tick; the exporter turns it into self-metrics."""

    source: str
    ok: bool
    duration_s: float
    error: str | None = None
    items: int = 0  # devices, netdevs, ... found


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything netd read in one tick. Immutable; the loop builds exactly one per tick."""

    timestamp: float  # wall clock, seconds since the epoch (for humans and the API)
    monotonic: float  # time.monotonic() at collection (for rates: immune to clock steps)
    host: str
    ports: tuple[PortSample, ...] = ()
    ethtool: Mapping[str, EthtoolSample] = field(default_factory=frozen_map)
    sources: tuple[SourceStatus, ...] = ()
    emulated: bool = False
    tick_duration_s: float = 0.0
    bpf: BpfSample | None = None  # the eBPF probes' tick (None when [bpf] is not enabled)

    def port(self, device: str, port: int) -> PortSample | None:
        for p in self.ports:
            if p.device == device and p.port == port:
                return p
        return None

"""What detectors read: per-port counter *deltas* over one sample interval, never raw readings.

The composition root builds these from observations (``netd.detect.feed``); tests build them by
hand. Two paths produce them:

* ``TICK``: every daemon tick, all counters of every port, deltas since the previous tick.
* ``PFC``: the fast path (and every tick), only the netdevs' per-priority pause counters, deltas since
  the previous PFC sample, so PFC storms are judged at a sub-second cadence.

A delta that is unknown — the first reading, a counter that reset or vanished — is *absent* (``None``
or missing from the mapping), never zero: zero means "did not move", which is itself evidence.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from netd.model.config_finding import ConfigFinding
from netd.model.snapshot import PortIdentity, frozen_map

__all__ = [
    "DetectInput",
    "InputPath",
    "LinkChange",
    "PortCongestion",
    "PortInput",
    "PriorityCounters",
    "port_key",
]


class InputPath(enum.Enum):
    TICK = "tick"
    PFC = "pfc"


@dataclass(frozen=True, slots=True)
class PriorityCounters:
    """One PFC-enabled priority of a netdev, deltas over the sample interval (µs for durations)."""

    priority: int
    rx_pause_frames: float | None = None  # pause frames this port received (it was told to stop)
    rx_pause_us: float | None = None
    tx_pause_frames: float | None = None  # pause frames this port's NIC sent (it told its peer to stop)
    tx_pause_us: float | None = None
    rx_pause_transitions: float | None = None
    tx_packets: float | None = None  # data packets sent on this priority: "progress"
    rx_packets: float | None = None
    rx_discards: float | None = None


@dataclass(frozen=True, slots=True)
class LinkChange:
    """A carrier or speed change the kernel announced (netlink), converted by the feed."""

    netdev: str
    monotonic: float
    carrier: bool | None  # None: the message did not say
    operstate: str | None = None
    speed_mbps: int | None = None
    removed: bool = False  # RTM_DELLINK


@dataclass(frozen=True, slots=True)
class PortInput(PortIdentity):
    """One RDMA port (and its netdev) over one interval.

    ``counters``: netd vocabulary name (``cnp_sent``, ``out_of_sequence``, PMA error names such as
    ``link_downed``) -> delta in base units. ``netdev_counters``: ethtool scalar name
    (``link_down_events_phy``, ``rx_vport_rdma_unicast_bytes``, ...) -> delta. ``saturated`` holds
    raw counter names stuck at their register maximum.
    """

    device: str
    port: int
    netdev: str | None = None
    state: str | None = None  # "ACTIVE", "DOWN", ... (None on the PFC path)
    phys_state: str | None = None
    rate_gbps: float | None = None
    counters: Mapping[str, float] = field(default_factory=frozen_map)
    netdev_counters: Mapping[str, float] = field(default_factory=frozen_map)
    priorities: tuple[PriorityCounters, ...] = ()
    storm_warning_events: float | None = None  # tx_pause_storm_warning_events delta
    storm_error_events: float | None = None
    saturated: frozenset[str] = frozenset()
    read_errors: tuple[str, ...] = ()

    def counter(self, name: str) -> float | None:
        return self.counters.get(name)

    def priority(self, priority: int) -> PriorityCounters | None:
        for p in self.priorities:
            if p.priority == priority:
                return p
        return None


@dataclass(frozen=True, slots=True)
class PortCongestion:
    """The congestion scorer's judgement of one port this tick (netd.congestion): the one meaning of
    "congested" that `/v1/congestion`, `netd_port_congestion_level` and the detector share."""

    level: str  # ok, busy, congested, severe (after the scorer's smoothing and hysteresis)
    score: float  # the smoothed score the level was judged on
    contributions: Mapping[str, float] = field(default_factory=frozen_map)  # weighted sub-scores
    signals: Mapping[str, float | None] = field(default_factory=frozen_map)  # the four ratios


@dataclass(frozen=True, slots=True)
class DetectInput:
    """One evaluation's worth of input. ``monotonic`` drives every duration; ``timestamp`` (wall
    clock) is only for display, so a stepped clock never shortens or lengthens a finding."""

    path: InputPath
    host: str
    monotonic: float
    timestamp: float
    interval_s: float | None  # since the previous input of the same path; None on the first
    ports: tuple[PortInput, ...] = ()
    link_changes: tuple[LinkChange, ...] = ()
    source_errors: Mapping[str, str] = field(default_factory=frozen_map)  # failed sources, this tick
    # (device, port) -> the congestion scorer's level this tick; empty on the PFC path
    congestion: Mapping[tuple[str, int], PortCongestion] = field(default_factory=lambda: MappingProxyType({}))
    # the host's configuration contradictions (netd.detect.config); None: not known on this input
    config: tuple[ConfigFinding, ...] | None = None

    def port(self, device: str, port: int) -> PortInput | None:
        for p in self.ports:
            if p.device == device and p.port == port:
                return p
        return None


def port_key(p: PortInput) -> tuple[str, int]:
    return (p.device, p.port)

"""ethtool stat names -> netd's vocabulary (PFC, global pause, pause storms, PHY health).

Pure: takes the ``stats`` of an :class:`~netd.model.snapshot.EthtoolSample` (or the per-second rates the
series layer derives from them: same keys, float values), returns an :class:`EthtoolSignals`.
A name the driver did not emit stays *absent* (missing from the mapping, or ``None``), never zero: mlx5
emits the PFC pause counters only for priorities with PFC enabled (en_stats.c, per_prio group), so a
missing ``rx_prio3_pause`` means "PFC off on 3", which is a different fact from "no pause frames".

Each vendor is one :class:`_Dialect`: a single precompiled regex whose named groups say what a name
means, so a name is classified by one ``fullmatch`` instead of string surgery. Only mlx5 exists so far
(reference §3); bnxt_en or ice dialects go beside it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["NETDEV_SCALARS", "PFC_DIRECTIONS", "PRIORITIES", "EthtoolSignals", "parse_signals", "used"]

PFC_DIRECTIONS = ("rx", "tx")
PRIORITIES = tuple(range(8))

PrioKey = tuple[str, int]  # (direction, priority)

# ethtool scalars that detectors read besides the names :func:`parse_signals` understands
# (netd.detect.feed: link flaps, discards, and the RDMA vport bytes a counter stall is judged against)
NETDEV_SCALARS = (
    "link_down_events_phy",
    "rx_discards_phy",
    "rx_vport_rdma_unicast_bytes",
    "tx_vport_rdma_unicast_bytes",
)
_SCALAR_SET = frozenset(NETDEV_SCALARS)


def _empty() -> Mapping[Any, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class EthtoolSignals:
    """What netd needs from one netdev's ethtool stats; units in the field names.

    Per-priority fields are keyed by ``(direction, priority)``, direction in :data:`PFC_DIRECTIONS`;
    global (802.3x) pause fields by direction alone. On mlx5 only ``rx`` has pause transitions and
    per-priority discards.
    """

    pause_frames: Mapping[PrioKey, float] = field(default_factory=_empty)
    pause_duration_us: Mapping[PrioKey, float] = field(default_factory=_empty)
    pause_transitions: Mapping[PrioKey, float] = field(default_factory=_empty)  # Xoff -> Xon
    bytes: Mapping[PrioKey, float] = field(default_factory=_empty)
    packets: Mapping[PrioKey, float] = field(default_factory=_empty)
    discards: Mapping[PrioKey, float] = field(default_factory=_empty)
    global_pause_frames: Mapping[str, float] = field(default_factory=_empty)
    global_pause_duration_us: Mapping[str, float] = field(default_factory=_empty)
    global_pause_transitions: Mapping[str, float] = field(default_factory=_empty)
    pause_storm_warning_events: float | None = None  # NIC sent pause past the minor stall watermark
    pause_storm_error_events: float | None = None  # ... past the critical one, then stopped pausing
    rx_discards_phy: float | None = None  # dropped for lack of NIC receive buffer
    tx_discards_phy: float | None = None
    link_down_events_phy: float | None = None
    rx_crc_errors_phy: float | None = None
    rx_symbol_err_phy: float | None = None
    active_priorities: tuple[int, ...] = ()  # priorities with PFC pause counters = PFC enabled

    def pfc_enabled(self, priority: int) -> bool:
        return priority in self.active_priorities


@dataclass(frozen=True, slots=True)
class _Dialect:
    """One vendor's naming. The pattern's groups: ``dir`` and ``prio`` + ``kind`` (per-priority),
    ``gdir`` + ``gkind`` (global pause), or ``scalar`` (a name mapped through ``scalars``)."""

    pattern: re.Pattern[str]
    kinds: Mapping[str, str]  # name suffix -> EthtoolSignals field
    scalars: Mapping[str, str]  # whole name -> EthtoolSignals field


_PAUSE_KINDS = {
    "pause": "pause_frames",
    "pause_duration": "pause_duration_us",
    "pause_transition": "pause_transitions",
}
_GLOBAL_FIELDS = {
    "pause_frames": "global_pause_frames",
    "pause_duration_us": "global_pause_duration_us",
    "pause_transitions": "global_pause_transitions",
}
_PAUSE_FIELDS = frozenset(_PAUSE_KINDS.values())

_MLX5 = _Dialect(
    pattern=re.compile(
        r"""(?:
              (?P<dir>rx|tx)_prio(?P<prio>[0-7])_(?P<kind>pause(?:_duration|_transition)?|bytes|packets|discards)
            | (?P<gdir>rx|tx)_global_(?P<gkind>pause(?:_duration|_transition)?)
            | (?P<scalar>tx_pause_storm_(?:warning|error)_events|rx_discards_phy|tx_discards_phy
                        |link_down_events_phy|rx_crc_errors_phy|rx_symbol_err_phy)
            )\s*  # older mlx5: "tx_pause_storm_warning_events " with a trailing space
        """,
        re.VERBOSE,
    ),
    kinds={**_PAUSE_KINDS, "bytes": "bytes", "packets": "packets", "discards": "discards"},
    scalars={
        "tx_pause_storm_warning_events": "pause_storm_warning_events",
        "tx_pause_storm_error_events": "pause_storm_error_events",
    },
)

_DIALECTS = (_MLX5,)


# What one statistic name means: ("prio", field, (direction, priority)), ("global", field, direction),
# ("scalar", field, None), or None for a name netd does not read. Names are few and fixed per driver
# (mlx5: ~160), while every tick and fast-path sample parses every netdev's statistics: classify each
# name once per process instead of running the pattern over it every time.
_Meaning = tuple[str, str, Any] | None


@functools.lru_cache(maxsize=8192)
def _classify(name: str) -> _Meaning:
    for dialect in _DIALECTS:
        m = dialect.pattern.fullmatch(name)
        if m is None:
            continue
        if m["kind"]:
            return ("prio", dialect.kinds[m["kind"]], (m["dir"], int(m["prio"])))
        if m["gkind"]:
            return ("global", _GLOBAL_FIELDS[dialect.kinds[m["gkind"]]], m["gdir"])
        return ("scalar", dialect.scalars.get(m["scalar"], m["scalar"]), None)
    return None


def parse_signals(stats: Mapping[str, float]) -> EthtoolSignals:
    """Classify every name (once per process: :func:`_classify`); unrecognised names are ignored here
    (they stay in the sample).

    When two names map to one signal (the trailing-space and the stripped storm name), the first wins,
    as in driver order.
    """
    prio: dict[str, dict[PrioKey, float]] = {f: {} for f in _MLX5.kinds.values()}
    glob: dict[str, dict[str, float]] = {f: {} for f in _GLOBAL_FIELDS.values()}
    scalars: dict[str, float] = {}
    active: set[int] = set()
    for name, value in stats.items():
        meaning = _classify(name)
        if meaning is None:
            continue
        kind, target, key = meaning
        if kind == "prio":
            prio[target].setdefault(key, value)
            if target in _PAUSE_FIELDS:
                active.add(key[1])
        elif kind == "global":
            glob[target].setdefault(key, value)
        else:
            scalars.setdefault(target, value)
    # Field names come from the dialect tables, so the keyword arguments are assembled as data.
    fields: dict[str, Any] = {f: MappingProxyType(v) for f, v in (prio | glob).items()}
    fields.update(scalars, active_priorities=tuple(sorted(active)))
    return EthtoolSignals(**fields)


def used(name: str) -> bool:
    """Whether netd reads this statistic at all: what :func:`parse_signals` understands, and
    :data:`NETDEV_SCALARS`. The sources keep only these: an mlx5 netdev with 64 channels has ~4000
    statistics, nearly all of them per ring, and tracking them all cost more than the rest of a tick."""
    return _classify(name) is not None or name in _SCALAR_SET

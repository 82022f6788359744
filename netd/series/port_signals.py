"""Per-port congestion signals: the handful of rates an engineer reads first.

Pure: a :class:`PortView` (and its netdev's :class:`NetdevView`) in, a frozen
:class:`PortSignals` out. `netd status`, the JSON API and later the detectors
read these instead of re-deriving them from raw counter names.

Definitions (all per second over the last tick):

* ``rx_gbps``/``tx_gbps``: RDMA payload, from PMA ``port_rcv_data``/``port_xmit_data`` x 4 x 8.
* ``ce_fraction``: CE-marked RoCE packets / RDMA packets received.
* ``retransmits_per_s``: transport retransmissions plus ACK timeouts (each timeout retransmits).
* ``errors_per_s``: loss and error events that should be zero in a lossless fabric: out-of-sequence,
  NAK sequence errors, RNR NAKs, out-of-buffer drops, ICRC errors, exhausted retries, PMA port errors,
  and the netdev's PHY receive discards.
* per PFC-enabled priority: pause frames received/sent per second, and the fraction of the second the
  port was paused (receive direction: this port was told to stop) or pausing its peer (transmit).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from netd.model.snapshot import Counter
from netd.series.tracker import NetdevView, PortView
from netd.vocabulary.ethtool_names import EthtoolSignals, parse_signals
from netd.vocabulary.metric_names import ERROR_VOCABULARY

__all__ = [
    "ERROR_VOCABULARY",
    "PORT_FIELDS",
    "PortSignals",
    "PriorityPause",
    "first_keys",
    "netdev_signals",
    "port_signals",
]


@dataclass(frozen=True, slots=True)
class PriorityPause:
    priority: int
    rx_pauses_per_s: float | None
    tx_pauses_per_s: float | None
    rx_pause_fraction: float | None  # 0..1 of the interval
    tx_pause_fraction: float | None


@dataclass(frozen=True, slots=True)
class PortSignals:
    rx_gbps: float | None = None
    tx_gbps: float | None = None
    ecn_marked_per_s: float | None = None
    ce_fraction: float | None = None
    cnp_sent_per_s: float | None = None
    cnp_handled_per_s: float | None = None
    cnp_ignored_per_s: float | None = None
    retransmits_per_s: float | None = None
    errors_per_s: float | None = None
    pfc: tuple[PriorityPause, ...] = ()


def _sum(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _fraction(duration_us_per_s: float | None) -> float | None:
    # Durations are µs per second; clamp because counter caching (hw_counters lifespan,
    # firmware sampling) can make one interval look slightly longer than wall time.
    return None if duration_us_per_s is None else min(max(duration_us_per_s / 1e6, 0.0), 1.0)


# What the port signals and the congestion scorer read of a netdev's signals (netd.congestion.host: the
# storm events): pause per priority, and the PHY discards. Pause transitions stay, because their names
# also say which priorities have PFC (EthtoolSignals.active_priorities).
PORT_FIELDS = (
    "pause_frames",
    "pause_duration_us",
    "pause_transitions",
    "rx_discards_phy",
    "pause_storm_warning_events",
    "pause_storm_error_events",
    "active_priorities",
)


@functools.lru_cache(maxsize=64)
def _signal_names(names: tuple[str, ...]) -> tuple[str, ...]:
    """The names :func:`parse_signals` takes a :data:`PORT_FIELDS` value from, of this name set (in
    order): learnt once per name set with a probe whose values are the names' positions."""
    probe = parse_signals({n: float(i) for i, n in enumerate(names)})
    used: set[float] = set()
    for name in PORT_FIELDS:
        value = getattr(probe, name)
        if isinstance(value, Mapping):
            used.update(value.values())
        elif isinstance(value, float):
            used.add(value)
    return tuple(names[int(i)] for i in sorted(used))


def netdev_signals(netdev: NetdevView) -> EthtoolSignals:
    """The :data:`PORT_FIELDS` of :func:`parse_signals` of the netdev's per-second rates, fed only the
    few of mlx5's ~160 statistics they come from (the same values: it ignores the others, and the first
    of two names for one signal stays first); every other field is empty. Called for every port on
    every tick by the scorer and the signals."""
    rates = netdev.rates
    return parse_signals({n: rates[n] for n in _signal_names(tuple(rates))})


_NAME = operator.itemgetter(1)  # Counter.name

_NOTHING: frozenset[str] = frozenset()


def first_keys(counters: Mapping[str, Counter], skip: frozenset[str] = _NOTHING) -> Mapping[str, str]:
    """Vocabulary name -> the key of the first of a port's counters with that name (PMA before
    hw_counters, as :meth:`PortView.rate` answers), leaving out the keys in ``skip``; learnt once per
    counter set, not walked for every port on every tick."""
    return _first_keys(tuple(counters), tuple(map(_NAME, counters.values())), skip)


@functools.lru_cache(maxsize=256)
def _first_keys(keys: tuple[str, ...], names: tuple[str, ...], skip: frozenset[str]) -> Mapping[str, str]:
    first: dict[str, str] = {}
    for key, name in zip(keys, names, strict=True):
        if key not in skip:
            first.setdefault(name, key)
    return MappingProxyType(first)


@functools.lru_cache(maxsize=256)
def _error_keys(keys: tuple[str, ...], names: tuple[str, ...]) -> tuple[str, ...]:
    """The keys of the last of a port's counters of each error name, in ERROR_VOCABULARY's order."""
    last = dict(zip(names, keys, strict=True))
    return tuple(last[name] for name in ERROR_VOCABULARY if name in last)


def port_signals(
    view: PortView, netdev: NetdevView | None = None, ethtool: EthtoolSignals | None = None
) -> PortSignals:
    """``ethtool``: :func:`netdev_signals` of ``netdev`` when the caller has it already."""
    if not view.rates:
        return PortSignals()
    rates = view.rates
    counters = view.sample.counters
    keys, names = tuple(counters), tuple(map(_NAME, counters.values()))
    first, error_keys = _first_keys(keys, names, _NOTHING), _error_keys(keys, names)
    get = rates.get

    def rate(vocab: str) -> float | None:  # the first counter of the name, as PortView.rate() answers
        key = first.get(vocab)
        return None if key is None else get(key)

    rx_bytes, tx_bytes = rate("rx_bytes"), rate("tx_bytes")
    ecn, rx_pkts = rate("ecn_marked"), rate("rx_packets")
    errors = [get(key) for key in error_keys]
    pfc: tuple[PriorityPause, ...] = ()
    if netdev is not None and netdev.rates:
        sig = netdev_signals(netdev) if ethtool is None else ethtool  # per-second, as the raw stats
        errors.append(sig.rx_discards_phy)
        pfc = tuple(
            PriorityPause(
                priority=p,
                rx_pauses_per_s=sig.pause_frames.get(("rx", p)),
                tx_pauses_per_s=sig.pause_frames.get(("tx", p)),
                rx_pause_fraction=_fraction(sig.pause_duration_us.get(("rx", p))),
                tx_pause_fraction=_fraction(sig.pause_duration_us.get(("tx", p))),
            )
            for p in sig.active_priorities
        )
    return PortSignals(
        rx_gbps=None if rx_bytes is None else rx_bytes * 8 / 1e9,
        tx_gbps=None if tx_bytes is None else tx_bytes * 8 / 1e9,
        ecn_marked_per_s=ecn,
        ce_fraction=None if ecn is None or not rx_pkts else min(ecn / rx_pkts, 1.0),
        cnp_sent_per_s=rate("cnp_sent"),
        cnp_handled_per_s=rate("cnp_handled"),
        cnp_ignored_per_s=rate("cnp_ignored"),
        retransmits_per_s=_sum([rate("retransmits"), rate("timeouts")]),
        errors_per_s=_sum(errors),
        pfc=pfc,
    )

"""A port's counter deltas for the detectors: vocabulary name -> delta over the tick, from the series
layer's confirmed rates (part of the detection feed, netd.detect.feed)."""

from __future__ import annotations

from netd.series.port_signals import first_keys
from netd.series.tracker import PortView

__all__ = ["counter_deltas"]


def counter_deltas(view: PortView, dt: float | None) -> dict[str, float]:
    """Vocabulary name -> delta; first reading per name wins (PMA before hw_counters). Counters
    without a known rate (saturated, held back by the counter model) are left out, and so is every
    wrap on a port where another counter went backwards in the same tick."""
    out: dict[str, float] = {}
    if dt is None:
        return out
    # A 32-bit q-counter that restarted from high up is indistinguishable from a wrap on its own;
    # when other counters of the port are held (a device or driver reset shows as every counter
    # going backwards), the wrap is not believed.
    unknown = view.saturated | view.wrapped if view.held else view.saturated
    # Counters on the slow cadence give no delta: no detector reads them, and their rates span their
    # own longer read interval (docs/metrics.md, Read cadence).
    first = first_keys(view.sample.counters, view.sample.slow_counters)
    rates = map(view.rates.get, first.values())
    if not unknown:
        return {name: rate * dt for name, rate in zip(first, rates, strict=True) if rate is not None}
    for (name, key), rate in zip(first.items(), rates, strict=True):
        if rate is not None and key not in unknown:
            out[name] = rate * dt
    return out

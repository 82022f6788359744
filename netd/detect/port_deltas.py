"""A port's counter deltas for the detectors: vocabulary name -> delta over the tick, from the series
layer's confirmed rates (part of the detection feed, netd.detect.feed)."""

from __future__ import annotations

import functools
import operator

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
    counters = view.sample.counters
    names, keys = _delta_plan(
        tuple(counters), tuple(map(_NAME, counters.values())), view.sample.slow_counters
    )
    rates = map(view.rates.get, keys)
    if not unknown:
        return {name: rate * dt for name, rate in zip(names, rates, strict=True) if rate is not None}
    for name, key, rate in zip(names, keys, rates, strict=True):
        if rate is not None and key not in unknown:
            out[name] = rate * dt
    return out


_NAME = operator.itemgetter(1)  # Counter.name


@functools.lru_cache(maxsize=256)
def _delta_plan(
    keys: tuple[str, ...], names: tuple[str, ...], slow: frozenset[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(vocabulary names, keys) of the first counter of each name among a port's counters (keys and
    names in order), learnt once per counter set. Counters on the slow cadence give no delta: no
    detector reads them, and their rates span their own longer read interval (docs/metrics.md, Read
    cadence)."""
    seen: set[str] = set()
    plan: list[tuple[str, str]] = []
    for key, name in zip(keys, names, strict=True):
        if name in seen or key in slow:
            continue
        seen.add(name)
        plan.append((name, key))
    return tuple(n for n, _ in plan), tuple(k for _, k in plan)

"""Counter-based random numbers: a draw is a pure function of (seed, flow, step).

The engine rounds expected CE marks to whole packets stochastically. Drawing those numbers from a
sequential generator made a row's trajectory depend on its batch: blocks were drawn from the first
step where *any* row had marks, and flows took whatever column was free, so a parameter set scored
alone and in a tuner's batch saw different numbers. Hashing (seed, flow id, step) instead gives every
flow its own stream that no other row, flow or column can shift; rows still share the numbers of a
flow (common random numbers, so candidates are compared on the same luck).

The hash is SplitMix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014), which passes BigCrush when fed a counter; the top 53 bits make the double.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["uniform"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_FLOW = np.uint64(0xD1B54A32D192ED03)  # odd constants keep (seed, flow, step) -> counter one-to-one per field
_STEP = np.uint64(0xAEF17502108EF2D9)


def _mix(z: Any) -> Any:
    """SplitMix64's finaliser, on a uint64 scalar or array."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def uniform(seed: int, flow_ids: NDArray[np.int64], step: int) -> NDArray[np.float64]:
    """One number in [0, 1) per entry of ``flow_ids`` for ``step``, the same whatever else is drawn."""
    with np.errstate(over="ignore"):  # uint64 arithmetic wraps, as the hash intends
        base = _mix(
            np.uint64(seed & 0xFFFFFFFFFFFFFFFF) * _GOLDEN + np.uint64(step & 0xFFFFFFFFFFFFFFFF) * _STEP
        )
        z = _mix(flow_ids.astype(np.uint64) * _FLOW + base)
    return np.asarray((z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0))

"""The tuner's search space: which knobs it may move, on which ladder of values, within which bounds.

Every knob moves on a ladder of values that contains the vendor default, roughly doubling per rung,
and a recommendation moves a knob by at most one rung (a bounded step). ``ecn_thresholds`` moves
Kmin and Kmax together, keeping their ratio (a switch's ECN profile for the lossless class);
``pmax`` is the switch's marking probability at Kmax. NIC knobs are the mlx5 ``cc_params`` names,
in the device's units.

:class:`SafetyBounds` are the operator's limits: no candidate outside them is ever evaluated, so no
recommendation can leave them. The defaults stay within what the firmware documents and what is
sane at 25-400 Gb/s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cc.model import RANGES, DcqcnParams

__all__ = ["KNOBS", "Knob", "Move", "SafetyBounds", "apply_moves", "moves", "step"]


@dataclass(frozen=True, slots=True)
class Knob:
    name: str  # a DcqcnParams field; ecn_thresholds stands for kmin_bytes (kmax_bytes follows)
    field: str
    ladder: tuple[float, ...]
    scope: str  # "nic": written to the device; "switch": recommended to the switch operator
    unit: str
    raising: str  # what a higher value does, for explanations
    lowering: str


KNOBS: tuple[Knob, ...] = (
    Knob(
        "rp_time_reset",
        "rp_time_reset",
        (20, 40, 75, 150, 300, 600, 1200),
        "nic",
        "µs",
        "slower timer-driven rate recovery",
        "faster timer-driven recovery after a cut",
    ),
    Knob(
        "rp_ai_rate",
        "rp_ai_rate",
        (1, 2, 5, 10, 20, 40, 80, 160, 320),
        "nic",
        "Mb/s",
        "larger additive-increase steps (faster recovery, more overshoot)",
        "gentler additive increase",
    ),
    Knob(
        "rp_hai_rate",
        "rp_hai_rate",
        (10, 25, 50, 100, 200, 400, 800),
        "nic",
        "Mb/s",
        "larger hyper-increase steps",
        "gentler hyper increase",
    ),
    Knob(
        "rp_dce_tcp_g",
        "rp_dce_tcp_g",
        (960, 992, 1008, 1014, 1019, 1021, 1023),
        "nic",
        "1/1024",
        "a smaller alpha gain g = (1024 - G)/1024: alpha reacts slower, milder cuts",
        "a larger alpha gain g: alpha reacts faster, stronger cuts under sustained marking",
    ),
    Knob(
        "np_min_time_between_cnps",
        "np_min_time_between_cnps",
        (1, 2, 4, 8, 16, 32, 50),
        "nic",
        "µs",
        "fewer CNPs per flow (slower reaction)",
        "more CNPs per flow (faster reaction)",
    ),
    Knob(
        "rp_min_rate",
        "rp_min_rate",
        (1, 10, 100, 1000),
        "nic",
        "Mb/s",
        "a higher floor for cut flows",
        "a lower floor for cut flows",
    ),
    Knob(
        "ecn_thresholds",
        "kmin_bytes",
        (50e3, 100e3, 200e3, 400e3, 800e3, 1.6e6, 3.2e6),
        "switch",
        "bytes",
        "marking later (longer queues, more throughput headroom)",
        "marking earlier (shorter queues, less queueing delay)",
    ),
    Knob(
        "pmax",
        "pmax",
        (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
        "switch",
        "probability",
        "steeper marking between Kmin and Kmax",
        "gentler marking between Kmin and Kmax",
    ),
)
_BY_NAME = {k.name: k for k in KNOBS}


@dataclass(frozen=True, slots=True)
class Move:
    knob: str
    direction: int  # +1 up the ladder, -1 down

    def __str__(self) -> str:
        return f"{self.knob}{'+' if self.direction > 0 else '-'}"


class SafetyBounds:
    """Closed [lo, hi] per knob, in device units; defaults to the firmware ranges and the ladders."""

    DEFAULTS: Mapping[str, tuple[float, float]] = MappingProxyType(
        {
            "rp_time_reset": (20, 1200),
            "rp_ai_rate": (1, 320),
            "rp_hai_rate": (10, 800),
            "rp_dce_tcp_g": (960, 1023),
            "np_min_time_between_cnps": (1, 50),
            "rp_min_rate": (1, 1000),
            "ecn_thresholds": (50e3, 3.2e6),
            "pmax": (0.01, 1.0),
        }
    )

    def __init__(
        self, overrides: Mapping[str, tuple[float, float]] | None = None, frozen: tuple[str, ...] = ()
    ) -> None:
        bounds = dict(self.DEFAULTS)
        for name, (lo, hi) in (overrides or {}).items():
            if name not in _BY_NAME:
                raise ValueError(f"unknown knob {name!r}; knobs: {', '.join(_BY_NAME)}")
            field_lo, field_hi = RANGES[_BY_NAME[name].field]
            if not field_lo <= lo <= hi <= field_hi:
                raise ValueError(f"bounds for {name} must satisfy {field_lo} <= lo <= hi <= {field_hi}")
            bounds[name] = (float(lo), float(hi))
        unknown = set(frozen) - set(_BY_NAME)
        if unknown:
            raise ValueError(f"unknown knobs to freeze: {sorted(unknown)}")
        self.bounds = MappingProxyType(bounds)
        self.frozen = frozenset(frozen)

    def allows(self, params: DcqcnParams) -> bool:
        return all(lo <= _value(params, k) <= hi for k in KNOBS for lo, hi in (self.bounds[k.name],))

    def clamp(self, params: DcqcnParams) -> DcqcnParams:
        """``params`` pulled inside the bounds (the tuner's starting point when the device is outside)."""
        for knob in KNOBS:
            lo, hi = self.bounds[knob.name]
            value = _value(params, knob)
            if not lo <= value <= hi:
                params = _with(params, knob, min(max(value, lo), hi))
        return params


def _value(params: DcqcnParams, knob: Knob) -> float:
    return float(getattr(params, knob.field))


def _with(params: DcqcnParams, knob: Knob, value: float) -> DcqcnParams:
    if knob.name == "ecn_thresholds":  # Kmax keeps its ratio to Kmin
        ratio = params.kmax_bytes / max(params.kmin_bytes, 1)
        return dataclasses.replace(params, kmin_bytes=int(value), kmax_bytes=int(value * ratio))
    if knob.field == "pmax":
        return dataclasses.replace(params, pmax=float(value))
    return dataclasses.replace(params, **{knob.field: int(value)})


def step(params: DcqcnParams, move: Move, bounds: SafetyBounds) -> DcqcnParams | None:
    """``params`` with one knob moved one rung, or None when that leaves the bounds or the ladder.
    A value between rungs moves to the next rung in that direction."""
    knob = _BY_NAME[move.knob]
    if knob.name in bounds.frozen:
        return None
    value, (lo, hi) = _value(params, knob), bounds.bounds[knob.name]
    rungs = [v for v in knob.ladder if lo <= v <= hi]
    options = [v for v in rungs if (v > value if move.direction > 0 else v < value)]
    if not options:
        return None
    target = min(options, key=lambda v: abs(v - value))
    try:
        moved = _with(params, knob, target)
    except ValueError:  # e.g. Kmax would leave its field's range
        return None
    return moved if bounds.allows(moved) or not bounds.allows(params) else None


def apply_moves(params: DcqcnParams, chosen: tuple[Move, ...], bounds: SafetyBounds) -> DcqcnParams | None:
    """``params`` after every move of ``chosen`` (each one rung), or None if any is impossible."""
    moved: DcqcnParams | None = params
    for move in chosen:
        moved = step(moved, move, bounds) if moved is not None else None
    return moved


def moves(
    params: DcqcnParams, bounds: SafetyBounds, pairs: tuple[tuple[Move, Move], ...] = ()
) -> Iterator[tuple[tuple[Move, ...], DcqcnParams]]:
    """Every one-rung move of one knob, then the given pairs of moves, that stays within bounds."""
    for knob in KNOBS:
        for direction in (-1, 1):
            move = Move(knob.name, direction)
            moved = step(params, move, bounds)
            if moved is not None:
                yield (move,), moved
    for first, second in pairs:
        once = step(params, first, bounds)
        twice = step(once, second, bounds) if once is not None else None
        if twice is not None:
            yield (first, second), twice


def knob(name: str) -> Knob:
    return _BY_NAME[name]

"""What the tuner returns: a value saying what to have in force next, and why. It touches nothing.

``action`` is ``hold`` (keep what is in force), ``change`` (move to ``params``: at most a few knobs,
one rung each) or ``rollback`` (return to ``params``, the operating point before a change that made
things worse). Each :class:`Change` says which knob moves, from what to what, in the device's units,
and whether it is a NIC knob the daemon can write or a switch setting for the operator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cc.model import DcqcnParams, HostSignals

__all__ = ["Action", "Change", "Recommendation"]

Action = Literal["hold", "change", "rollback"]


@dataclass(frozen=True, slots=True)
class Change:
    name: str  # DcqcnParams field
    current: float
    proposed: float
    unit: str
    scope: str  # "nic" (written by netd's applier) or "switch" (for the switch operator)
    effect: str  # what the move does, in words

    def describe(self) -> str:
        return f"{self.name}: {_fmt(self.current)} -> {_fmt(self.proposed)} {self.unit} ({self.effect})"


@dataclass(frozen=True)
class Recommendation:
    action: Action
    params: DcqcnParams  # what should be in force after this recommendation
    previous: DcqcnParams  # what was in force when it was made
    changes: tuple[Change, ...]
    reasons: tuple[str, ...]  # the signals that motivated it and what the model expects
    signals: HostSignals | None
    predicted: dict[str, dict[str, float]] = field(default_factory=dict)  # twin -> figure -> value

    @property
    def nic_changes(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.scope == "nic")

    @property
    def switch_changes(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.scope == "switch")

    def explain(self) -> str:
        head = {"hold": "HOLD: keep the parameters in force", "change": "CHANGE", "rollback": "ROLLBACK"}
        lines = [head[self.action]]
        lines += [f"  {'NIC   ' if c.scope == 'nic' else 'SWITCH'} {c.describe()}" for c in self.changes]
        lines += [f"  why: {reason}" for reason in self.reasons]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "changes": [
                {
                    "name": c.name,
                    "current": c.current,
                    "proposed": c.proposed,
                    "unit": c.unit,
                    "scope": c.scope,
                    "effect": c.effect,
                }
                for c in self.changes
            ],
            "reasons": list(self.reasons),
            "signals": None if self.signals is None else self.signals.to_dict(),
            "predicted": self.predicted,
        }


def _fmt(value: float) -> str:
    if value >= 1e6 and value % 1e3 == 0:
        return f"{value / 1e6:g}M"
    if value >= 1e4 and value % 1e3 == 0:
        return f"{value / 1e3:g}K"
    return f"{value:g}"

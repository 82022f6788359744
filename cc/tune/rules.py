"""Which moves are worth simulating, given what the host sees: DCQCN's textbook cause and effect.

The tuner does not search every direction of every knob: a simulated situation is a noisy oracle, and
a move without a physical reason to help would sooner or later look good by chance. Each rule reads
the signals, names the problem, and proposes the one-rung moves (or pairs) that address it, with the
reason in words; the model then decides among them and can always say "none is good enough".

* **PFC pauses**: DCQCN reacts too late for the burst. React faster — more CNPs per flow
  (``np_min_time_between_cnps`` down), a larger alpha gain (``rp_dce_tcp_g`` down), earlier marking.
  While the fabric pauses, only these are proposed: stopping PFC (and the head-of-line blocking it
  spreads) comes before shaving queueing delay.
* **Marks or CNPs**: queues stand above Kmin. Mark earlier (shorter standing queues, less queueing
  delay for short flows), and recover faster after cuts so throughput does not pay for it
  (``rp_time_reset`` down).
* **Low utilisation while heavily marked**: DCQCN throttles harder than the congestion needs.
  Recover faster (timer, additive and hyper increase up) or mark later.
"""

from __future__ import annotations

from dataclasses import dataclass

from cc.model import HostSignals
from cc.tune.space import Move

__all__ = ["Proposal", "proposals"]


@dataclass(frozen=True, slots=True)
class Proposal:
    moves: tuple[Move, ...]
    why: str


def _m(knob: str, direction: int) -> Move:
    return Move(knob, direction)


def proposals(s: HostSignals) -> list[Proposal]:
    out: list[Proposal] = []
    if s.pause_fraction > 0.001:
        why = f"PFC-paused {s.pause_fraction:.2%} of the time: DCQCN reacts too late for the bursts; "
        out += [
            Proposal((_m("np_min_time_between_cnps", -1),), why + "more CNPs per flow react sooner"),
            Proposal(
                (_m("rp_dce_tcp_g", -1),), why + "a larger alpha gain cuts harder under sustained marking"
            ),
            Proposal((_m("ecn_thresholds", -1),), why + "earlier marking starts the reaction sooner"),
            Proposal(
                (_m("ecn_thresholds", -1), _m("np_min_time_between_cnps", -1)),
                why + "earlier marking and more CNPs per flow",
            ),
        ]
    if out:
        return out  # PFC first: while the fabric pauses, only moves that make DCQCN react sooner
    if s.ce_fraction > 0 or s.cnp_handled_per_s > 0 or s.cnp_sent_per_s > 0:
        why = f"{s.ce_fraction:.2%} of received packets CE-marked: queues stand above Kmin; "
        out += [
            Proposal((_m("ecn_thresholds", -1),), why + "marking earlier keeps them shorter"),
            Proposal(
                (_m("ecn_thresholds", -1), _m("rp_time_reset", -1)),
                why + "marking earlier keeps them shorter, faster recovery after cuts keeps throughput",
            ),
            Proposal(
                (_m("rp_time_reset", -1),), why + "faster recovery after cuts drains bursts at full rate"
            ),
        ]
    if s.utilization < 0.5 and s.ce_fraction > 0.02:
        why = (
            f"utilisation {s.utilization:.0%} with {s.ce_fraction:.1%} marked: DCQCN may throttle too hard; "
        )
        out += [
            Proposal((_m("rp_ai_rate", 1),), why + "larger additive steps recover faster"),
            Proposal((_m("rp_hai_rate", 1),), why + "larger hyper-increase steps recover faster"),
            Proposal((_m("ecn_thresholds", 1),), why + "marking later leaves throughput headroom"),
        ]
    unique: dict[tuple[Move, ...], Proposal] = {}
    for p in out:
        unique.setdefault(p.moves, p)
    return list(unique.values())

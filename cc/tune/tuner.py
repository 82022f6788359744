"""The online DCQCN tuner: host signals in, an explained :class:`Recommendation` out.

Each :meth:`Tuner.observe` takes one interval's :class:`~cc.model.observed.HostSignals` and the parameters
actually in force, and decides:

1. **Watching a change.** After a change the tuner proposed is seen in force, it compares the next
   ``watch`` intervals with the ``watch`` before it. More PFC pause, new retransmissions, or a drop in
   utilisation while marking rose is a regression: it recommends a rollback to the previous point and
   bans that move for ``ban`` decisions.
2. **Quiet.** Without marks, CNPs, pauses or retransmissions there is nothing to tune: hold.
3. **Search.** Every one-rung move of one knob (and a few two-knob pairs) within the safety bounds
   is simulated, in one batch with the current point, on the model situations of :mod:`cc.tune.twins`.
   The signals weight the situations (CNPs per packet sent tell throughput-bound collectives from
   bursty traffic); the score is the weighted tail FCT slowdown relative to the current point. A
   candidate is admissible only if no guarding situation gets worse by more than ``tolerance`` in
   slowdown or utilisation, nor pauses more; the collective situation gives way only while the
   signals positively show no collective (:mod:`cc.tune.guard`), and a point admitted that way is left
   for the last one that passed it at the first interval that shows one. The best admissible candidate
   is recommended if it improves the score by at least ``margin`` (``reverse_margin`` if it undoes the
   last change: hysteresis).

Search results are cached per (parameters in force, link speed, load bucket), and the twins are drawn
at the bucket's load, so a tuner that holds pays for a simulation once and a search's result does not
depend on which interval first fell in its bucket. The ``incast`` twin's utilisation guards only
while the signals do not rule out the permanent elephants it measures (:func:`guard.utilization_waived`).
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cc.model import DcqcnParams, HostSignals
from cc.tune import explain, guard
from cc.tune.recommendation import Recommendation
from cc.tune.rules import proposals
from cc.tune.space import Move, SafetyBounds, apply_moves
from cc.tune.twins import TwinResult, evaluate_replicated

__all__ = ["LOAD_BUCKETS", "Evaluator", "Tuner", "TunerPolicy"]

LOAD_BUCKETS = 20
"""Buckets per unit of utilisation: searches are cached, and the twins drawn, per 5 % of load."""


@dataclass(frozen=True, slots=True)
class TunerPolicy:
    margin: float = 0.15  # predicted improvement needed for a change
    reverse_margin: float = 0.25  # ... for a change that undoes the previous one
    tolerance: float = 0.03  # how much worse any situation may get (slowdown, utilisation)
    watch: int = 2  # intervals compared before and after a change
    ban: int = 10  # decisions a rolled-back move stays banned
    regression_pause: float = 0.0002  # added pause fraction (with +30 %) that counts as a regression
    regression_utilization: float = 0.15  # relative utilisation drop (with more marking) that does
    seed: int = 7
    replications: int = 2  # independent draws of each model situation, averaged: less noise to chase

    def __post_init__(self) -> None:
        if not (0 < self.margin < 1 and self.margin <= self.reverse_margin < 1 and 0 <= self.tolerance < 1):
            raise ValueError("need 0 < margin <= reverse_margin < 1 and 0 <= tolerance < 1")
        if self.watch < 1 or self.ban < 0 or self.replications < 1:
            raise ValueError("watch and replications must be >= 1, ban >= 0")


@dataclass
class _Pending:
    old: DcqcnParams
    new: DcqcnParams
    moves: tuple[Move, ...]
    before: list[HostSignals]
    after: list[HostSignals]


Evaluator = Callable[[HostSignals, list[DcqcnParams]], dict[str, list[TwinResult]]]
"""(signals, [current, *candidates]) -> twin name -> one result per parameter set."""

Simulate = Callable[[float, float, Sequence[DcqcnParams], Iterable[int]], dict[str, list[TwinResult]]]
"""Runs the twins: :func:`~cc.tune.twins.evaluate_replicated`'s signature (the daemon runs it in a
child process so the compiled simulator's memory never stays in ``netd run``)."""


class Tuner:
    """``evaluator`` replaces the twins' simulation (tests use a synthetic one); ``simulate`` keeps the
    twins but runs them elsewhere (the daemon: :class:`netd.tuning.worker.SimulationWorker`)."""

    def __init__(
        self,
        bounds: SafetyBounds | None = None,
        policy: TunerPolicy | None = None,
        evaluator: Evaluator | None = None,
        simulate: Simulate | None = None,
    ) -> None:
        self.bounds = bounds or SafetyBounds()
        self.policy = policy or TunerPolicy()
        self._evaluator = evaluator
        self._simulate: Simulate = simulate or evaluate_replicated
        self._recent: deque[HostSignals] = deque(maxlen=self.policy.watch)
        self._pending: _Pending | None = None
        self._last_moves: tuple[Move, ...] = ()
        self._banned: dict[Move, int] = {}
        self._decisions = 0
        self._readings: deque[guard.Reading] = deque(maxlen=self.policy.watch)
        # points admitted while the collective guard had given way -> the point that passed it, to
        # return to; kept until a guarded decision moves to the same point, so a recommendation
        # applied late (dry run, apply interval) is still covered
        self._relaxed: dict[DcqcnParams, DcqcnParams] = {}
        # after a way back, the guard stays on for ``ban`` decisions: marking earlier raises the CNPs
        # per packet the classification reads, so relaxing again at once would flap
        self._guarded_until = 0
        self._cache: dict[tuple[object, ...], dict[str, list[TwinResult]]] = {}
        self.simulations = 0  # twin evaluations run (the expensive part), for benchmarks
        self.simulation_cpu_s = 0.0

    def observe(self, signals: HostSignals, in_force: DcqcnParams) -> Recommendation:
        self._decisions += 1
        reading = guard.read(signals)
        self._readings.append(reading)
        back = self._guard_return(signals, in_force, reading)
        if back is not None:
            return back
        pending = self._pending
        if pending is not None and in_force == pending.new:
            pending.after.append(signals)
            if len(pending.after) < self.policy.watch:
                return self._hold(
                    in_force,
                    signals,
                    f"watching the last change ({len(pending.after)}/"
                    f"{self.policy.watch} intervals) before tuning further",
                )
            self._pending = None
            verdict = self._regression(pending.before, pending.after)
            if verdict:
                for move in pending.moves:
                    self._banned[move] = self._decisions + self.policy.ban
                self._recent.clear()
                return self._rollback(pending, in_force, signals, verdict)
            self._last_moves = pending.moves
        elif pending is not None and in_force != pending.old:
            self._pending = None  # something else changed the parameters: start over from them
        self._recent.append(signals)
        if not signals.congested:
            return self._hold(
                in_force,
                signals,
                "no ECN marks, CNPs, pauses or retransmissions: nothing for DCQCN to do better",
            )
        return self._search(signals, in_force)

    # -- search ---------------------------------------------------------------------------------
    def _search(self, signals: HostSignals, current: DcqcnParams) -> Recommendation:
        inside = self.bounds.clamp(current)
        if inside != current:  # never tune from outside the operator's bounds: first go back inside
            reasons = (
                "parameters in force are outside the configured safety bounds; moving them to the "
                "nearest allowed values before any tuning",
            )
            return Recommendation(
                "change", inside, current, explain.changes(current, inside), reasons, signals
            )
        options: list[tuple[tuple[Move, ...], DcqcnParams]] = []
        why: list[str] = []
        for proposal in proposals(signals):
            if any(self._banned.get(x, 0) >= self._decisions for x in proposal.moves):
                continue
            moved = apply_moves(current, proposal.moves, self.bounds)
            if moved is not None and moved not in (p for _, p in options):
                options.append((proposal.moves, moved))
                why.append(proposal.why)
        if not options:
            return self._hold(
                current, signals, "no move addresses these signals within the safety bounds and bans"
            )
        results = self._evaluate(signals, current, [p for _, p in options])
        weights = self._readings[-1].weights()
        may_relax = self._decisions > self._guarded_until and guard.relaxable(
            self._readings, self.policy.watch
        )
        relaxed = frozenset({"collective"}) if may_relax else frozenset()
        waived = guard.utilization_waived(self._readings[-1])
        base = {name: r[0] for name, r in results.items()}
        best: tuple[float, int] | None = None
        for i, _ in enumerate(options):
            cand = {name: r[i + 1] for name, r in results.items()}
            if not guard.admissible(base, cand, self.policy.tolerance, relaxed, waived):
                continue
            score = sum(w * explain.ratio(cand[n].objective, base[n].objective) for n, w in weights.items())
            if best is None or score < best[0]:
                best = (score, i)
        if best is None:
            return self._hold(
                current,
                signals,
                "no candidate keeps every model situation within "
                f"{self.policy.tolerance:.0%} of the current point",
                results,
                weights,
            )
        score, i = best
        chosen_moves, params = options[i]
        undoing = bool(self._last_moves) and all(
            Move(m.knob, -m.direction) in chosen_moves for m in self._last_moves
        )
        needed = self.policy.reverse_margin if undoing else self.policy.margin
        if score > 1 - needed:
            return self._hold(
                current,
                signals,
                f"best candidate ({explain.move_names(chosen_moves)}) is predicted to "
                f"improve the tail FCT slowdown by {1 - score:.0%}, below the {needed:.0%} "
                "margin for a change",
                results,
                weights,
                i,
            )
        self._pending = _Pending(current, params, chosen_moves, list(self._recent), [])
        rec = self._change(current, params, signals, results, weights, i, score, why[i])
        chosen = {n: r[i + 1] for n, r in results.items()}
        unheld = set(guard.failing(base, chosen, self.policy.tolerance)) - set(
            guard.failing(base, chosen, self.policy.tolerance, waived)
        )
        if unheld:  # admitted only because an elephant twin's utilisation did not guard
            text = explain.utilization_waived(self._readings[-1], results, i, sorted(unheld))
            rec = dataclasses.replace(rec, reasons=(*rec.reasons, text))
        given_way = guard.failing(base, chosen, self.policy.tolerance, waived)
        anchor = self._relaxed.get(current)
        if not given_way:  # passes every guard from here: covered as well as ``current`` is
            if anchor is None:
                self._relaxed.pop(params, None)
            else:
                self._relaxed[params] = anchor
            return rec
        self._relaxed[params] = anchor = current if anchor is None else anchor
        text = explain.guard_relaxed(list(self._readings), results, i, given_way, anchor, params)
        return dataclasses.replace(rec, reasons=(*rec.reasons, text))

    # -- the collective guard -------------------------------------------------------------------
    def _guard_return(
        self, signals: HostSignals, in_force: DcqcnParams, reading: guard.Reading
    ) -> Recommendation | None:
        """Back to the last point that passed the collective guard, the first interval a collective
        shows (or the signals cannot tell) while a point admitted without that guard is in force."""
        anchor = self._relaxed.get(in_force)
        if anchor is None or reading.no_collective:
            return None
        self._pending, self._last_moves = None, ()
        self._guarded_until = self._decisions + self.policy.ban
        reasons = (explain.trigger(signals), explain.guard_return(reading, self.policy.ban))
        return Recommendation("change", anchor, in_force, explain.changes(in_force, anchor), reasons, signals)

    def _evaluate(
        self, signals: HostSignals, current: DcqcnParams, candidates: list[DcqcnParams]
    ) -> dict[str, list[TwinResult]]:
        # the twins are drawn at the load bucket's own value, not at the utilisation of the first
        # interval that fell in it: the cached result is then a function of its key alone, and a
        # decision does not depend on which interval happened to come first
        bucket = int(round(float(np.clip(signals.utilization, 0.05, 0.4)) * LOAD_BUCKETS))
        load = bucket / LOAD_BUCKETS
        key = (current, tuple(candidates), round(signals.link_gbps), bucket)
        cached = self._cache.get(key)
        if cached is None:
            self.simulations += 1
            started = time.process_time()
            if self._evaluator is not None:
                cached = self._evaluator(signals, [current, *candidates])
            else:
                seeds = range(self.policy.seed, self.policy.seed + self.policy.replications)
                cached = self._simulate(signals.link_gbps, load, [current, *candidates], seeds)
            self.simulation_cpu_s += time.process_time() - started
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    # -- regression -----------------------------------------------------------------------------
    def _regression(self, before: list[HostSignals], after: list[HostSignals]) -> str | None:
        if not before:
            return None
        p = self.policy

        def mean(samples: list[HostSignals], attr: str) -> float:
            return float(np.mean([getattr(s, attr) for s in samples]))

        pause0, pause1 = mean(before, "pause_fraction"), mean(after, "pause_fraction")
        if pause1 > pause0 + p.regression_pause and pause1 > 1.3 * pause0:
            return f"PFC pause rose from {pause0:.2%} to {pause1:.2%} of the time after the change"
        retx0, retx1 = mean(before, "retransmits_per_s"), mean(after, "retransmits_per_s")
        if retx1 > retx0 + 1.0 and retx1 > 1.5 * retx0:
            return f"retransmissions rose from {retx0:.0f}/s to {retx1:.0f}/s after the change"
        util0, util1 = mean(before, "utilization"), mean(after, "utilization")
        ce0, ce1 = mean(before, "ce_fraction"), mean(after, "ce_fraction")
        if util1 < util0 * (1 - p.regression_utilization) and ce1 > ce0:
            return (
                f"utilisation fell from {util0:.0%} to {util1:.0%} while the CE-marked fraction rose "
                f"({ce0:.2%} -> {ce1:.2%}): marking now throttles more than it should"
            )
        return None

    # -- results --------------------------------------------------------------------------------
    def _change(
        self,
        current: DcqcnParams,
        params: DcqcnParams,
        signals: HostSignals,
        results: dict[str, list[TwinResult]],
        weights: dict[str, float],
        i: int,
        score: float,
        rule: str,
    ) -> Recommendation:
        reasons = [explain.trigger(signals), "rule: " + rule, explain.situation(weights)]
        for name, rows in results.items():
            b, c = rows[0], rows[i + 1]
            reasons.append(
                f"model '{name}': tail FCT slowdown {b.objective:.1f} -> {c.objective:.1f}, "
                f"utilisation {b.utilization:.0%} -> {c.utilization:.0%}, "
                f"p99 queue {b.queue_p99_kb:.0f} -> {c.queue_p99_kb:.0f} KB"
            )
        reasons.append(f"expected: weighted tail FCT slowdown {score - 1:+.0%}")
        return Recommendation(
            "change",
            params,
            current,
            explain.changes(current, params),
            tuple(reasons),
            signals,
            explain.predicted(results, i),
        )

    def _rollback(
        self, pending: _Pending, current: DcqcnParams, signals: HostSignals, why: str
    ) -> Recommendation:
        reasons = (
            f"regression after {explain.move_names(pending.moves)}: {why}",
            f"banned for the next {self.policy.ban} decisions",
        )
        return Recommendation(
            "rollback", pending.old, current, explain.changes(current, pending.old), reasons, signals
        )

    def _hold(
        self,
        current: DcqcnParams,
        signals: HostSignals,
        why: str,
        results: dict[str, list[TwinResult]] | None = None,
        weights: dict[str, float] | None = None,
        i: int | None = None,
    ) -> Recommendation:
        reasons = [why]
        if signals.congested:
            reasons.insert(0, explain.trigger(signals))
        if weights is not None:
            reasons.append(explain.situation(weights))
        predicted = explain.predicted(results, i) if results is not None and i is not None else {}
        return Recommendation("hold", current, current, (), tuple(reasons), signals, predicted)

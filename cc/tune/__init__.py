"""The online DCQCN tuner, host signals in and an explained recommendation out: the search space
and the operator's safety bounds (:mod:`~cc.tune.space`), the rules saying which moves are worth
simulating (:mod:`~cc.tune.rules`), the model situations candidates are simulated on
(:mod:`~cc.tune.twins`) and which of them guard a decision (:mod:`~cc.tune.guard`), the tuner
itself (:mod:`~cc.tune.tuner`), what it returns and how it explains it
(:mod:`~cc.tune.recommendation`, :mod:`~cc.tune.explain`), and a scenario run with the tuner in
the loop (:mod:`~cc.tune.online`). It builds on :mod:`cc.model` and :mod:`cc.sim`; nothing here knows
about the benchmark."""

from __future__ import annotations

from cc.tune.online import run_online
from cc.tune.recommendation import Recommendation
from cc.tune.space import KNOBS, SafetyBounds, moves
from cc.tune.tuner import Tuner, TunerPolicy
from cc.tune.twins import TWIN_DT_US, TwinResult

__all__ = [
    "KNOBS",
    "TWIN_DT_US",
    "Recommendation",
    "SafetyBounds",
    "Tuner",
    "TunerPolicy",
    "TwinResult",
    "moves",
    "run_online",
]

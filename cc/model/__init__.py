"""The DCQCN model, with no simulator in sight: the paper's CP/NP/RP rules over numpy arrays
(:mod:`~cc.model.dcqcn`), the parameters named, scaled and bounded like the mlx5 knobs
(:mod:`~cc.model.params`) and several sets of them as arrays the rules broadcast over
(:mod:`~cc.model.batch`), and what a host can observe of DCQCN (:mod:`~cc.model.observed`). It imports
nothing from the rest of ``cc``; the simulator, the tuner and netd build on it."""

from __future__ import annotations

from cc.model.batch import ParamBatch
from cc.model.dcqcn import NpState, RpState, np_step, red_mark_probability, rp_step
from cc.model.observed import HostSignals, combine
from cc.model.params import MAX_RATE_MBPS, RANGES, DcqcnParams

__all__ = [
    "MAX_RATE_MBPS",
    "RANGES",
    "DcqcnParams",
    "HostSignals",
    "NpState",
    "ParamBatch",
    "RpState",
    "combine",
    "np_step",
    "red_mark_probability",
    "rp_step",
]

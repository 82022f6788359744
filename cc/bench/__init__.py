"""The benchmark, vendor defaults vs. the tuner in the loop and the simulator's speed: its scenario
suite (:mod:`~cc.bench.scenarios`), the reports and command line built on it
(:mod:`~cc.bench.benchmark`) and the ``python -m cc.bench`` entry point (``__main__``). It is the top
of ``cc``: it may use :mod:`cc.model`, :mod:`cc.sim` and :mod:`cc.tune`, and nothing imports it."""

from __future__ import annotations

from cc.bench.benchmark import main, scenario_report, seeded_report, sim_speed
from cc.bench.scenarios import SUITE, suite

__all__ = ["SUITE", "main", "scenario_report", "seeded_report", "sim_speed", "suite"]

"""``python -m cc.bench --json``: the scenario suite with vendor defaults vs. the tuner in the loop,
and the simulator's speed.

For every scenario of :func:`cc.bench.scenarios.suite` and every seed of ``--seeds`` (fixed: 1, 2, 3): one
run with mlx5 defaults throughout, one with :class:`cc.tune.tuner.Tuner` deciding every 2 ms of simulated
time from the fabric's host counters (warm-up included, so the tuner starts from the defaults exactly
like the default run). Both runs are measured on the same window. A scenario's ``default`` and
``tuned`` figures are means over its seeds, and its checks are made on those means: one draw of a
fabric is a chaotic trajectory, and a figure as small as a 0.1 % pause fraction moves by more between
draws (or with the millisecond at which a change lands) than a parameter change moves it. Every
seed's own figures and checks are kept under ``seeds``. By default the tuner may also move the switch's ECN
profile of the lossless class (as an operator following its recommendations would); ``--nic-only``
restricts it to the NIC knobs netd writes itself. ``p99_fct_slowdown`` is the p99 FCT slowdown of the
scenario's latency-sensitive flows — the background web-search flows, or for all-to-all the
collective's own flows (incast flows' slowdown is bounded below by their fan-in, whatever the
parameters; it is reported under ``p99_fct_slowdown_all``).

Simulator speed is simulated flow·µs per CPU second (process time): flows in the run x simulated µs,
summed over the rows of a batch, for a 64-flow leaf-spine scenario under persistent congestion
(no calm stretch to jump over): once for a single parameter set at the suite's 1 µs step, once for
a batch of 16 parameter sets at the tuner's step — the way the tuner uses the simulator.
``kernel_startup`` is what the compiled step costs a starting process (:mod:`cc.bench.startup`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cc.bench.scenarios import SUITE, check_names, suite
from cc.bench.startup import kernel_startup
from cc.model import DcqcnParams
from cc.sim import (
    Engine,
    FlowSpec,
    RunMetrics,
    Scenario,
    SimConfig,
    leaf_spine,
    long_flows,
    run,
    single_bottleneck,
)
from cc.tune import TWIN_DT_US, SafetyBounds, Tuner, moves, run_online

__all__ = ["main", "scenario_report", "seeded_report", "sim_speed"]


def _figures(m: RunMetrics) -> dict[str, Any]:
    tags = m.fct_by_tag
    sensitive = tags.get("short") or tags.get("alltoall") or {"p99": m.fct_slowdown_p99}
    return {
        "p99_fct_slowdown": round(sensitive["p99"], 3),
        "utilization": round(m.utilization, 4),
        "pause_fraction": round(m.pause_fraction, 5),
        "nic_pause_fraction": round(m.nic_pause_fraction, 5),
        "p99_queue_kb": round(m.queue_p99_kb, 1),
        "p99_fct_slowdown_all": round(m.fct_slowdown_p99, 3),
        "goodput_gbps": round(m.goodput_gbps, 1),
        "fct_by_class": m.fct_by_class,
        "flows_finished": m.flows_finished,
        "flows_unfinished": m.flows_unfinished,
    }


_MEANS = (
    "p99_fct_slowdown",
    "utilization",
    "pause_fraction",
    "nic_pause_fraction",
    "p99_queue_kb",
    "p99_fct_slowdown_all",
    "goodput_gbps",
)


def _mean(reports: Sequence[dict[str, Any]], run: str) -> dict[str, float]:
    return {k: round(float(np.mean([r[run][k] for r in reports])), 6) for k in _MEANS}


def _checks(default: dict[str, Any], tuned: dict[str, Any], name: str) -> dict[str, bool]:
    d, t = default, tuned
    worse = [
        t["p99_fct_slowdown"] > 1.05 * d["p99_fct_slowdown"],
        t["utilization"] < d["utilization"] / 1.05,
        t["pause_fraction"] > 1.05 * d["pause_fraction"] + 1e-6,
        t["p99_queue_kb"] > 1.05 * d["p99_queue_kb"] + 1e-6,
    ]
    out = {
        "utilization_at_least_95pct": t["utilization"] >= 0.95 * d["utilization"],
        "pause_not_higher": t["pause_fraction"] <= d["pause_fraction"] + 1e-6,
        "no_metric_worse_than_5pct": not any(worse),
    }
    if name.startswith(("incast", "mixed")):
        out["p99_at_least_20pct_lower"] = t["p99_fct_slowdown"] <= 0.8 * d["p99_fct_slowdown"]
    if name in TARGET_30:  # issue 20's target: -30 % at >= 0.98x the default's utilisation
        out["p99_at_least_30pct_lower"] = t["p99_fct_slowdown"] <= 0.7 * d["p99_fct_slowdown"]
        out["utilization_at_least_98pct"] = t["utilization"] >= 0.98 * d["utilization"]
    return out


TARGET_30 = frozenset({"incast-16", "incast-64", "allreduce+short", "mixed-speed", "fabric-256"})
"""Scenarios held to a 30 % lower p99 slowdown (the others, alltoall, only to not regressing)."""


def scenario_report(scenario: Scenario, epoch_us: float = 2_000.0, nic_only: bool = False) -> dict[str, Any]:
    t0 = time.process_time()
    default = _figures(run(scenario, [DcqcnParams()])[0])
    t1 = time.process_time()
    tuner = Tuner(SafetyBounds(frozen=("ecn_thresholds", "pmax")) if nic_only else SafetyBounds())
    online = run_online(scenario, tuner, DcqcnParams(), epoch_us)
    t2 = time.process_time()
    tuned = _figures(online.metrics)
    return {
        "name": scenario.name,
        "description": scenario.description,
        "default": default,
        "tuned": tuned,
        "checks": _checks(default, tuned, scenario.name),
        "tuner": {
            "decisions": online.decisions,
            "actions": [
                {
                    "at_us": at,
                    "action": rec.action,
                    "changes": [c.describe() for c in rec.changes],
                    "why": list(rec.reasons),
                }
                for at, rec in online.actions
            ],
            "searches": tuner.simulations,
            "cpu_s_per_search": round(tuner.simulation_cpu_s / max(tuner.simulations, 1), 3),
        },
        "cpu_s": {"default": round(t1 - t0, 2), "tuned": round(t2 - t1, 2)},
    }


def seeded_report(
    name: str, seeds: Sequence[int], nic_only: bool = False, measure_us: float = 30_000.0
) -> dict[str, Any]:
    """:func:`scenario_report` for every seed of scenario ``name``; figures and checks on the means."""
    reports = [scenario_report(suite(seed, [name], measure_us)[0], nic_only=nic_only) for seed in seeds]
    default, tuned = _mean(reports, "default"), _mean(reports, "tuned")
    return {
        "name": name,
        "description": reports[0]["description"],
        "default": default,
        "tuned": tuned,
        "checks": {
            **_checks(default, tuned, name),
            "no_seed_worse": all(
                r["tuned"]["p99_fct_slowdown"] <= r["default"]["p99_fct_slowdown"] for r in reports
            ),
        },
        "seeds": [{"seed": seed, **r} for seed, r in zip(seeds, reports, strict=True)],
    }


def _speed_flows() -> tuple[Any, list[FlowSpec]]:
    """16 hosts on 4 leaves x 2 spines; each sends 4 long flows to hosts on other leaves (64 flows):
    every receiver takes 4 flows, so DCQCN works all the time."""
    topo = leaf_spine(leaves=4, spines=2, hosts_per_leaf=4)
    flows = [
        FlowSpec(h, (h + 4 * k) % 16 if k < 4 else (h + 5) % 16, 0.0, stop_us=1e12, key=4 * h + k, tag="long")
        for h in range(16)
        for k in range(1, 5)
    ]
    return topo, flows


def sim_speed(sim_us: float = 4_000.0, batch: int = 16, repeats: int = 3) -> dict[str, Any]:
    topo, flows = _speed_flows()
    base = DcqcnParams()
    pool = [p for _, p in moves(base, SafetyBounds())]
    candidates = ([base] + pool * (1 + batch // max(len(pool), 1)))[:batch]
    runs = {}
    incast_16 = single_bottleneck(16), long_flows([(i, 0) for i in range(1, 17)], stop_us=1e12)
    configs = (
        ("single", [base], 1.0, (topo, flows)),  # the suite's step, one parameter set
        ("single_tuner_step", [base], TWIN_DT_US, (topo, flows)),
        ("batched", candidates, TWIN_DT_US, (topo, flows)),  # how the tuner uses it: the headline figure
        ("batched_at_1us", candidates, 1.0, (topo, flows)),
        ("single_16", [base], 1.0, incast_16),  # one parameter set, a 16:1 incast of long flows
    )
    for label, params, dt, (topo, flows) in configs:
        best = float("inf")
        samples = []
        for _ in range(repeats):
            engine = Engine(topo, flows, params, SimConfig(dt_us=dt))
            engine.run(200.0)  # past the start-up transient and first allocations
            t0 = time.process_time()
            engine.run(200.0 + sim_us)
            cpu = time.process_time() - t0
            samples.append(cpu)
            best = min(best, cpu)
        flow_us = len(flows) * len(params) * sim_us
        runs[label] = {
            "rows": len(params),
            "dt_us": dt,
            "flows": len(flows),
            "simulated_us": sim_us,
            "cpu_s_best": round(best, 6),  # a compiled 400 µs run takes under a millisecond
            "cpu_s_all": [round(s, 6) for s in samples],
            "flow_us_per_s": round(flow_us / best),
            "flow_us_per_s_worst": round(flow_us / max(samples)),
        }
    return {
        "flow_us_per_s": runs["batched"]["flow_us_per_s"],
        "single_16": runs["single_16"]["flow_us_per_s"],
        "counted_as": "flows x simulated µs, summed over batch rows, per CPU second (best of repeats)",
        "scenario": "64 long flows, leaf-spine 4 leaves x 2 spines x 4 hosts at 200G, persistent congestion; "
        "single_16: 16 long flows into one 200G port, one parameter set, 1 µs step",
        "runs": runs,
    }


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--seeds takes integers, got {text.strip()!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cc.bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", action="store_true", help="JSON output (the only format; kept for scripts)")
    parser.add_argument(
        "--scenarios", default=",".join(SUITE), help=f"comma-separated subset of: {', '.join(SUITE)}"
    )
    parser.add_argument(
        "--seeds", default="1,2,3", help="comma-separated scenario seeds; figures are their means (1,2,3)"
    )
    parser.add_argument("--no-speed", action="store_true", help="skip the simulator-speed measurement")
    parser.add_argument("--no-suite", action="store_true", help="only measure simulator speed")
    parser.add_argument(
        "--nic-only",
        action="store_true",
        help="the tuner may not move the switch's ECN profile (Kmin/Kmax/Pmax)",
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    try:
        seeds = [_seed(x) for x in args.seeds.split(",") if x.strip()]
        check_names(names)
        if not seeds:
            raise ValueError("--seeds needs at least one seed")
    except ValueError as exc:
        parser.error(str(exc))
    doc: dict[str, Any] = {
        "tuner_knobs": "NIC only" if args.nic_only else "NIC and switch ECN profile",
        "seeds": seeds,
        "scenarios": [] if args.no_suite else [seeded_report(n, seeds, args.nic_only) for n in names],
    }
    if not args.no_speed:
        doc["sim_speed"] = {**sim_speed(), "kernel_startup": kernel_startup()}
    json.dump(doc, sys.stdout, indent=2)
    print()
    return 0

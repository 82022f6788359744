"""`python -m cc.bench`: its JSON shape, its pass/fail checks, and the suite's scenarios."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cc.bench import SUITE, suite
from cc.bench import benchmark as bench
from cc.sim import WEB_SEARCH, Scenario, SimConfig, incast, poisson_flows, single_bottleneck


def tiny() -> Scenario:
    rng = np.random.default_rng(1)
    topo = single_bottleneck(6)
    flows = incast(0, [1, 2, 3, 4], 250e3, 300.0) + incast(0, [2, 3, 4, 5], 250e3, 1_300.0)
    flows += poisson_flows(rng, list(range(7)), list(range(7)), 0.1, 200.0, WEB_SEARCH, 2_500.0)
    flows.sort(key=lambda f: f.start_us)
    return Scenario("incast-tiny", "test", topo, tuple(flows), 500.0, 2_000.0, 2_000.0, SimConfig(dt_us=2.0))


def test_scenario_report_compares_default_and_tuned_on_the_same_window() -> None:
    report = bench.scenario_report(tiny())
    for run in ("default", "tuned"):
        assert set(report[run]) >= {"p99_fct_slowdown", "utilization", "pause_fraction", "p99_queue_kb"}
        assert report[run]["flows_finished"] > 0
    assert set(report["checks"]) == {
        "utilization_at_least_95pct",
        "pause_not_higher",
        "no_metric_worse_than_5pct",
        "p99_at_least_20pct_lower",
    }
    assert report["tuner"]["decisions"] == 2  # one per 2 ms of simulated time (the last one shorter)
    json.dumps(report)


def test_checks_flag_each_guard_rail() -> None:
    base = {"p99_fct_slowdown": 10.0, "utilization": 0.8, "pause_fraction": 0.01, "p99_queue_kb": 500.0}
    good = {**base, "p99_fct_slowdown": 7.0}
    assert all(bench._checks(base, good, "incast-16").values())
    assert not bench._checks(base, {**good, "utilization": 0.7}, "incast-16")["utilization_at_least_95pct"]
    assert not bench._checks(base, {**good, "pause_fraction": 0.02}, "mixed-speed")["pause_not_higher"]
    assert not bench._checks(base, {**good, "p99_queue_kb": 600.0}, "alltoall")["no_metric_worse_than_5pct"]
    assert not bench._checks(base, {**base, "p99_fct_slowdown": 9.0}, "incast-64")["p99_at_least_20pct_lower"]
    assert "p99_at_least_20pct_lower" not in bench._checks(base, base, "alltoall")
    assert bench._checks(base, good, "fabric-256")["p99_at_least_30pct_lower"]  # 10 -> 7
    assert not bench._checks(base, {**base, "p99_fct_slowdown": 7.5}, "fabric-256")[
        "p99_at_least_30pct_lower"
    ]
    assert not bench._checks(base, {**good, "utilization": 0.78}, "mixed-speed")["utilization_at_least_98pct"]
    assert "p99_at_least_30pct_lower" not in bench._checks(base, base, "alltoall")


def test_sim_speed_counts_flow_microseconds_over_batch_rows() -> None:
    speed = bench.sim_speed(sim_us=400.0, batch=4, repeats=1)
    single, batched = speed["runs"]["single"], speed["runs"]["batched"]
    assert speed["runs"]["batched_at_1us"]["rows"] == 4 and speed["runs"]["single_tuner_step"]["dt_us"] == 4.0
    single_16 = speed["runs"]["single_16"]
    assert (single_16["rows"], single_16["flows"], single_16["dt_us"]) == (1, 16, 1.0)
    assert speed["single_16"] == single_16["flow_us_per_s"]
    assert single_16["flow_us_per_s"] == pytest.approx(16 * 400.0 / single_16["cpu_s_best"], rel=0.01)
    assert (single["rows"], batched["rows"], single["flows"]) == (1, 4, 64)
    assert batched["flow_us_per_s"] == pytest.approx(64 * 4 * 400.0 / batched["cpu_s_best"], rel=0.1)
    assert speed["flow_us_per_s"] == batched["flow_us_per_s"]


def test_the_suite_is_deterministic_and_covers_the_issue() -> None:
    assert set(SUITE) == {
        "incast-16",
        "incast-64",
        "alltoall",
        "allreduce+short",
        "mixed-speed",
        "fabric-256",
    }
    fabric = suite(1, ["fabric-256"], 2_000.0)[0]
    assert fabric.topology.n_ports == 256 and {f.dst for f in fabric.flows} <= set(range(256))
    a, b = suite(3, ["mixed-speed"], 2_000.0)[0], suite(3, ["mixed-speed"], 2_000.0)[0]
    assert a.flows == b.flows and {a.topology.port_gbps(p) for p in range(a.topology.n_ports)} == {
        25.0,
        100.0,
        400.0,
    }
    with pytest.raises(ValueError, match="unknown scenarios"):
        suite(1, ["nope"])


def test_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--scenarios", "nope", "--no-speed"])
    assert "unknown scenarios" in capsys.readouterr().err
    assert bench.main(["--no-suite", "--no-speed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "tuner_knobs": "NIC and switch ECN profile",
        "seeds": [1, 2, 3],
        "scenarios": [],
    }
    with pytest.raises(SystemExit):
        bench.main(["--seeds", "1,x", "--no-speed"])
    assert "--seeds takes integers, got 'x'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_scenario_is_judged_on_the_means_over_its_seeds() -> None:
    report = bench.seeded_report("alltoall", [1, 2], measure_us=1_000.0)
    runs = report["seeds"]
    assert [r["seed"] for r in runs] == [1, 2] and report["name"] == "alltoall"
    for run in ("default", "tuned"):
        for figure in ("p99_fct_slowdown", "utilization", "pause_fraction", "p99_queue_kb"):
            mean = (runs[0][run][figure] + runs[1][run][figure]) / 2
            assert report[run][figure] == pytest.approx(mean, abs=1e-6)
    no_seed_worse = all(r["tuned"]["p99_fct_slowdown"] <= r["default"]["p99_fct_slowdown"] for r in runs)
    checks = bench._checks(report["default"], report["tuned"], "alltoall")
    assert report["checks"] == {**checks, "no_seed_worse": no_seed_worse}
    assert runs[0]["default"] != runs[1]["default"]  # two draws of the fabric, not one twice
    json.dumps(report)

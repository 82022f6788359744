"""The compiled parts of the step (cc.sim.kernel) against the numpy reference (cc.model.dcqcn's
rules, tests/cc/reference.py's mechanics): the same bits, part by part and over whole runs; and
where the compiled code is kept."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cc.bench.scenarios import suite
from cc.model import DcqcnParams, NpState, ParamBatch, RpState
from cc.model.dcqcn import int_power
from cc.sim import (
    Engine,
    FlowSpec,
    RunMetrics,
    Scenario,
    SimConfig,
    Topology,
    incast,
    long_flows,
    run_metrics,
    single_bottleneck,
)
from cc.sim.jit import cache_dir
from cc.sim.kernel import StepKernel
from cc.sim.network import MTU_BYTES
from tests.cc.reference import NumpyStep

RP_FIELDS = [f.name for f in dataclasses.fields(RpState) if f.name != "now_us"]

# parameter sets that take every branch of the rules: clamp flags, first-CNP rate, byte counter off,
# alpha periods that do and do not divide the step, ungated CNPs, F = 5 (fast recovery)
VARIANTS = [
    DcqcnParams(),
    DcqcnParams.paper(),
    DcqcnParams(rp_byte_reset=0, rp_clamp_tgt_rate=1, np_min_time_between_cnps=0),
    DcqcnParams(rp_clamp_tgt_rate_ati=0, rp_rate_to_set_on_first_cnp=50_000, rp_dce_tcp_rtt=3),
    DcqcnParams(rp_threshold=5, rp_time_reset=2, rp_byte_reset=4096, rp_dce_tcp_rtt=7, rp_min_dec_fac=10),
]


def test_whole_powers_are_exact_where_the_true_value_is_a_double() -> None:
    n = np.arange(0.0, 60.0)
    assert np.array_equal(int_power(0.5, n), 2.0**-n)
    small = np.arange(0.0, 34.0)  # 3**33 < 2**53: every product along the way is exact
    assert np.array_equal(int_power(3.0, small), np.array([3.0**k for k in range(34)]))


def _random_states(batch: ParamBatch, flows: int, seed: int) -> tuple[RpState, NpState]:
    rng = np.random.default_rng(seed)
    rows = len(batch)
    rp = RpState.new((rows, flows), 200_000.0, batch)
    rp.rc[:] = rng.uniform(1_000.0, 200_000.0, (rows, flows))
    rp.rt[:] = np.maximum(rp.rc, rng.uniform(1_000.0, 200_000.0, (rows, flows)))
    rp.alpha[:] = rng.uniform(0.0, 1.0, (rows, flows))
    rp.timer_stage[:] = rng.integers(0, 8, (rows, flows))
    rp.byte_stage[:] = rng.integers(0, 8, (rows, flows))
    rp.seen_cnp[:] = rng.random((rows, flows)) < 0.5
    return rp, NpState.new((rows, flows))


@pytest.mark.parametrize("dt", [1.0, 4.0, 2.5])
def test_the_kernel_applies_the_reference_rules_to_the_bit(dt: float) -> None:
    """Random states, random CNP counts (0-3 per step, several CNPs in one step included), random
    bytes sent, 300 steps and then one long calm jump: every RP and NP field equal to the bit."""
    batch = ParamBatch(VARIANTS)
    rows, flows = len(VARIANTS), 9
    line = np.full(flows, 200_000.0)
    line[::3] = 100_000.0
    ref_rp, ref_np = _random_states(batch, flows, 1)
    ker_rp, ker_np = _random_states(batch, flows, 1)
    reference, kernel = NumpyStep(batch), StepKernel(batch)
    rng = np.random.default_rng(2)
    cnps_total = 0.0
    flow_ids = np.arange(flows) * 7919
    flow_ids[4] = -1  # a free column
    delay = rng.integers(1, 4, flows)  # steps a CNP takes back to its sender
    # per side: CE and CNP counters, and the ring CNPs travel back in
    books = [(np.zeros((rows, flows)), np.zeros((rows, flows)), np.zeros((4, rows, flows))) for _ in range(2)]
    for step in range(300):
        marked = rng.uniform(0, 3 * MTU_BYTES, (rows, flows)) * (rng.random((rows, flows)) < 0.3)
        sent = rng.uniform(0, 25_000.0 * dt / 1.0, (rows, flows))
        any_ref = reference.np_step(ref_np, marked, 2**63 + 5, flow_ids, step, dt, *books[0], delay)
        any_ker = kernel.np_step(ker_np, marked, 2**63 + 5, flow_ids, step, dt, *books[1], delay)
        assert any_ref == any_ker, step
        for ker, ref in zip(books[1], books[0], strict=True):
            np.testing.assert_array_equal(ker, ref)
        arriving = books[0][2][step % 4].copy()
        for _, _, ring in books:
            ring[step % 4] = 0.0
        cnps_total += arriving.sum()
        reference.rp_step(ref_rp, arriving, sent, dt, line)
        kernel.rp_step(ker_rp, arriving, sent, dt, line)
    span = 977 * dt  # a calm stretch jumped in one call: many timer periods at once
    reference.rp_step(ref_rp, np.zeros((rows, flows)), np.full((rows, flows), 1e7), span, line)
    kernel.rp_step(ker_rp, np.zeros((rows, flows)), np.full((rows, flows), 1e7), span, line)
    assert cnps_total > 100  # the CNP branches ran
    assert ref_rp.now_us == ker_rp.now_us and ref_np.now_us == ker_np.now_us
    for name in RP_FIELDS:
        np.testing.assert_array_equal(getattr(ker_rp, name), getattr(ref_rp, name), err_msg=name)
    np.testing.assert_array_equal(ker_np.next_cnp_us, ref_np.next_cnp_us)


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("paused", [False, True])
def test_the_kernel_sends_what_the_reference_nic_sends(shared: bool, paused: bool) -> None:
    """Rates capped by demand, idle and paused flows silent, shared ports split in proportion, and
    no flow sending more than it owes."""
    batch = ParamBatch(VARIANTS[:3])
    rng = np.random.default_rng(4)
    rows, flows, ports = 3, 11, 4
    rc = rng.uniform(1e3, 2e5, (rows, flows))
    demand = rng.uniform(1e3, 2e5, flows)
    active = rng.random((rows, flows)) < 0.8
    pause = rng.random((rows, flows)) < 0.3 if paused else None
    port_of = rng.integers(0, ports, (rows, flows)) + np.arange(rows)[:, None] * ports if shared else None
    port_line = rng.uniform(1e4, 1e5, rows * ports)
    owed = rng.uniform(0, 2e4, (rows, flows))
    owed[0, 0] = np.inf
    books = [[owed.copy(), rng.uniform(0, 1e6, (rows, flows)), np.zeros((rows, flows))] for _ in range(2)]
    books[1][1] = books[0][1].copy()
    sent = [
        parts(batch).send(rc, demand, active, pause, port_of, port_line, 4.0, *book)
        for parts, book in zip((NumpyStep, StepKernel), books, strict=True)
    ]
    assert np.count_nonzero(sent[0]) > flows
    np.testing.assert_array_equal(sent[1], sent[0])
    for ker, ref in zip(books[1], books[0], strict=True):
        np.testing.assert_array_equal(ker, ref)


def _figures(m: RunMetrics) -> dict[str, object]:
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


def _short(scenario: Scenario, measure_us: float) -> Scenario:
    return dataclasses.replace(scenario, warmup_us=500.0, measure_us=measure_us, drain_us=500.0)


@pytest.mark.slow
@pytest.mark.parametrize(("index", "seed", "measure_us"), [(0, 1, 3_000.0), (3, 2, 2_000.0), (4, 3, 2_000.0)])
def test_whole_runs_on_the_kernel_equal_the_reference_in_every_figure(
    index: int, seed: int, measure_us: float
) -> None:
    """incast-16, allreduce+short and mixed-speed (PFC pauses there), three parameter sets in one
    batch: every figure of every row's RunMetrics, and every port counter, equal to the bit. The
    kernel's run takes the compiled loop (cc.sim.kernel_loop) wherever no pause is live, and
    leaves it for every reason it has (the run's horizon, a calm stretch, a flow finishing, PFC)."""
    scenario = _short(suite(seed)[index], measure_us)
    params = [DcqcnParams(), DcqcnParams.paper(), VARIANTS[3]]
    results = []
    exits: dict[str, int] = {}
    for parts in (NumpyStep, StepKernel):
        engine = Engine(
            scenario.topology,
            scenario.flows,
            params,
            scenario.config,
            measure_from_us=scenario.warmup_us,
            parts=parts,
        )
        engine.run(scenario.end_us)
        engine.recorder.stop_us = engine.now_us
        engine.drain(scenario.end_us + scenario.drain_us)
        results.append(
            ([_figures(run_metrics(engine, row)) for row in range(len(params))], engine.port_counters())
        )
        exits = engine.loop_exits
    (ref_metrics, ref_ports), (ker_metrics, ker_ports) = results
    assert ref_ports["cnp_handled"].sum() > 100  # DCQCN cut rates in this run
    assert exits["done"] > 0 and exits["calm"] > 0 and exits["finish"] > 0
    if index == 4:  # mixed-speed: PFC pauses, decided in Python after the loop's step
        assert exits["tail"] > 0
    assert ker_metrics == ref_metrics
    for name, values in ref_ports.items():
        np.testing.assert_array_equal(ker_ports[name], values, err_msg=name)


def test_the_cache_goes_to_the_first_writable_directory(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    env = {"NETD_CACHE_DIR": str(blocked), "STATE_DIRECTORY": str(tmp_path / "state"), "HOME": str(tmp_path)}
    assert cache_dir(env) == tmp_path / "state" / "numba"  # NETD_CACHE_DIR/numba cannot be created
    assert (tmp_path / "state" / "numba").is_dir()
    assert cache_dir({"HOME": str(tmp_path)}) == tmp_path / ".cache" / "netd" / "numba"
    assert cache_dir({"NUMBA_CACHE_DIR": str(tmp_path / "mine")}) == tmp_path / "mine"
    assert cache_dir({"NUMBA_CACHE_DIR": str(blocked / "x")}) is None  # preset but unusable: no cache


_RUN_A_STEP = "from cc.bench.startup import warm_cache; warm_cache()"  # every kernel, every variant
# what else runs on a host: the emulated fabric (10 µs step, no queue histograms, phases that stop)
# and the benchmark's single_16 (one row, 1 µs, the compiled loop for thousands of steps per call)
_RUN_MORE = (
    "from cc.sim.fabric import Fabric; Fabric().advance(3_000)\n"
    "from cc.model import DcqcnParams\n"
    "from cc.sim import Engine, SimConfig, long_flows, single_bottleneck\n"
    "flows = long_flows([(i, 0) for i in range(1, 17)], stop_us=1e12)\n"
    "Engine(single_bottleneck(16), flows, DcqcnParams(), SimConfig(dt_us=1.0), measure_from_us=100).run(500)"
)


@pytest.mark.slow
def test_a_second_process_loads_the_compiled_kernels_instead_of_compiling(tmp_path: Path) -> None:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_DEBUG_CACHE": "1"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        for code in (_RUN_A_STEP, _RUN_A_STEP + "\n" + _RUN_MORE)
    ]
    assert "data saved" in runs[0].stdout and "data loaded" not in runs[0].stdout
    assert "data loaded" in runs[1].stdout and "data saved" not in runs[1].stdout
    assert list(tmp_path.rglob("kernel_rules.rp_kernel-*.nbi"))
    assert list(tmp_path.rglob("kernel_loop.steps_kernel-*.nbi"))


@pytest.mark.slow
def test_numba_is_loaded_only_by_a_process_that_simulates() -> None:
    """The daemon imports the tuner (and so cc.sim) at start; numba's ~50 MB come with the first
    engine, not with the import."""
    code = (
        "import sys, cc.sim, cc.tune\n"
        "before = 'numba' in sys.modules\n"
        "from cc.model import DcqcnParams\n"
        "from cc.sim import Engine, FlowSpec, single_bottleneck\n"
        "Engine(single_bottleneck(2), [FlowSpec(1, 0, 0.0, size_bytes=1e4)], DcqcnParams())\n"
        "print(before, 'numba' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def _both(
    topo: Topology, flows: list[FlowSpec], params: list[DcqcnParams], config: SimConfig, until: float
) -> tuple[dict[str, np.ndarray], float, dict[str, int]]:
    """Run on the numpy reference, on the compiled parts step by step and on the compiled loop;
    assert every figure and counter equal. Returns the last run's port counters, its µs of pause
    summed over keys and why its loop returned to Python (Engine.loop_exits)."""
    results = []
    for parts in (NumpyStep, PerStep, StepKernel):
        engine = Engine(topo, flows, params, config, parts=parts)
        engine.drain(until)
        counters = engine.port_counters()
        results.append(([_figures(run_metrics(engine, row)) for row in range(len(params))], counters))
    for metrics, counters in results[1:]:
        assert metrics == results[0][0]
        for name, values in results[0][1].items():
            np.testing.assert_array_equal(counters[name], values, err_msg=name)
    return results[-1][1], float(engine.recorder.pause_us_always.sum()), engine.loop_exits


class PerStep(StepKernel):
    """The compiled parts, called one by one from the engine's Python step (no compiled loop)."""

    fused = False


@pytest.mark.slow
def test_drops_lossy_queues_and_strict_priority_run_the_same_on_the_kernel() -> None:
    """The paths the suite's runs do not take: headroom overflowing (lossless drops, NAKs), lossy
    tail drops and timeouts, and two priorities on one link, the lower one paused."""
    no_ecn = dataclasses.replace(DcqcnParams(), pmax=0.0)
    rows = [no_ecn, DcqcnParams()]
    long = long_flows([(i, 0) for i in range(1, 9)], stop_us=1_500.0)
    tight = SimConfig(dt_us=1.0, headroom_scale=0.2)
    counters, _, exits = _both(single_bottleneck(8, delay_us=5.0), long, rows, tight, 3_000.0)
    assert counters["out_of_sequence"][0].sum() > 0 and counters["nak"][0].sum() > 0
    assert exits["tail"] > 0  # the loop handed the pauses and drops to Python
    lossy = SimConfig(dt_us=1.0, pfc=False, lossy_buffer_bytes=5e5)
    counters, _, exits = _both(single_bottleneck(8), incast(0, list(range(1, 9)), 1e6), rows, lossy, 8_000.0)
    assert counters["timeouts"][0].sum() > 0
    assert sum(exits.values()) == 0  # lossy queues: step by step only
    two = [
        FlowSpec(1, 0, 0.0, stop_us=1_500.0, priority=3, key=1),
        FlowSpec(2, 0, 0.0, stop_us=1_500.0, priority=5, key=2),
    ]
    _, paused_us, _ = _both(
        single_bottleneck(2), two, rows, SimConfig(dt_us=1.0, lossless_priorities=(3, 5)), 2_000.0
    )
    assert paused_us > 0


@pytest.mark.slow
def test_the_startup_benchmark_compiles_once_then_loads() -> None:
    from cc.bench.startup import kernel_startup

    doc = kernel_startup()
    assert doc["pfc_paths_compiled"]
    # one run: loading from the cache is a small fraction of compiling (5-25 s against 0.2-0.8 here)
    assert doc["first_run_s_cached"] < doc["first_run_s_compiling"] / 3
    baseline, cached = doc["rss_mb_numpy_rules_only"][0], doc["rss_mb_after_cached_run"][0]
    assert 0 < baseline < cached  # numba's share is what docs/benchmarks.md weighs

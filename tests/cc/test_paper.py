"""The simulator against the DCQCN paper and its fluid model (Zhu et al., SIGCOMM 2015; CoNEXT 2016).

The paper's experiments run at 40 Gb/s with its own parameter profile (Kmin 5 KB, Kmax 200 KB,
Pmax 1 %, g = 1/256, ...; :meth:`DcqcnParams.paper`), so these do too: ``ecn_reference_gbps=40``
makes the profile's thresholds apply unscaled to the 40G ports. Steady-state figures are measured
from 60 ms on: the fluid model's slowest mode (alpha, time constant tau'/g = 14 ms) needs ~4 of
them to settle.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cc.model import DcqcnParams
from cc.sim import (
    MTU_BYTES,
    Engine,
    FlowSpec,
    RunMetrics,
    SimConfig,
    long_flows,
    run_metrics,
    single_bottleneck,
)
from tests.cc.fluid import Fluid

PAPER = DcqcnParams.paper()
AT_40G = SimConfig(dt_us=1.0, ecn_reference_gbps=40.0)
SETTLED_US, UNTIL_US = 60_000.0, 80_000.0


def incast_of_long_flows(n: int, params: list[DcqcnParams], config: SimConfig, until: float, warmup: float):
    engine = Engine(
        single_bottleneck(n, 40.0),
        long_flows([(i, 0) for i in range(1, n + 1)], stop_us=1e9),
        params,
        config,
        measure_from_us=warmup,
    )
    engine.run(until)
    return [run_metrics(engine, row) for row in range(len(params))]


@pytest.fixture(scope="module")
def pair() -> tuple[RunMetrics, RunMetrics]:
    """A flow at line rate, a second joining at 2 ms; paper profile (R_AI 40 Mb/s) and R_AI 5 Mb/s,
    measured from 12 ms to the settled state at 80 ms."""
    flows = [FlowSpec(1, 0, 0.0, stop_us=1e9, key=1), FlowSpec(2, 0, 2_000.0, stop_us=1e9, key=2)]
    slow = dataclasses.replace(PAPER, rp_ai_rate=5)
    engine = Engine(
        single_bottleneck(2, 40.0), flows, [PAPER, slow], AT_40G, measure_from_us=12_000.0, trace_us=250.0
    )
    engine.run(UNTIL_US)
    return run_metrics(engine, 0), run_metrics(engine, 1)


@pytest.mark.slow
def test_two_flows_converge_to_a_fair_share(pair: tuple[RunMetrics, RunMetrics]) -> None:
    m = pair[0]
    assert m.jain_fairness is not None and m.jain_fairness > 0.98  # equal shares once converged
    assert m.convergence_us is not None and m.convergence_us <= 14_000.0
    assert m.utilization > 0.99 and m.pause_fraction == 0.0


@pytest.mark.slow
def test_lower_ai_rate_converges_slower_but_steadier(pair: tuple[RunMetrics, RunMetrics]) -> None:
    quick, steady = pair
    assert quick.convergence_us is not None
    assert steady.convergence_us is None or steady.convergence_us > 2 * quick.convergence_us
    assert steady.rate_cv is not None and quick.rate_cv is not None
    assert steady.rate_cv < 0.6 * quick.rate_cv  # each flow's rate oscillates less


@pytest.mark.slow
def test_a_joining_flow_ends_where_the_fluid_model_does() -> None:
    """Flow 2 joins flow 1 at 2 ms (40G, paper parameters). The fluid model integrated per flow
    (CoNEXT'16 Eq. 1-5, :meth:`Fluid.rates_after_a_join`) and the simulator both end at equal shares:
    over 60-80 ms each flow's mean rate is within 3 % of C/2 in both.

    Known difference, the transient: the fluid model cuts both flows alike at the join and is within
    10 % of equal shares 8 ms later; the simulator's first cuts fall on random marks (about 57:43)
    and it is within 10 % only after ~55 ms (docs/tuning.md)."""
    fluid = Fluid.of(PAPER, 40.0, MTU_BYTES)
    rates = fluid.rates_after_a_join(2_000.0, UNTIL_US, delay_us=6.0)
    fluid_share = rates[int(SETTLED_US) :].mean(axis=0) / (fluid.capacity / 2)
    assert fluid_share == pytest.approx([1.0, 1.0], abs=0.03)
    flows = [FlowSpec(1, 0, 0.0, stop_us=1e9, key=1), FlowSpec(2, 0, 2_000.0, stop_us=1e9, key=2)]
    engine = Engine(single_bottleneck(2, 40.0), flows, PAPER, AT_40G)
    engine.run(SETTLED_US)
    before = engine.delivered[0, :2].copy()
    engine.run(UNTIL_US)
    sim_gbps = (engine.delivered[0, :2] - before) * 8 / (UNTIL_US - SETTLED_US) / 1e3
    assert sim_gbps / 20.0 == pytest.approx([1.0, 1.0], abs=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_steady_queue_matches_the_fluid_models_fixed_point(n: int) -> None:
    """Mean queue from 60 to 80 ms against the fixed point of the fluid model (CoNEXT'16 Eq. 1-5 with
    every derivative 0; :mod:`tests.cc.fluid`). From N = 8 the fixed point's marking probability
    would exceed Pmax, so the queue sits at Kmax, where RED jumps to 1.

    Known difference, N = 2: 84 KB simulated against 67 KB. Two flows see one mark per ~0.5 ms each,
    a few discrete cuts per alpha time constant, where the fluid model spreads each cut over time;
    the simulator's queue sits higher. Held to 30 % and documented in docs/tuning.md."""
    engine = Engine(
        single_bottleneck(n, 40.0),
        long_flows([(i, 0) for i in range(1, n + 1)], stop_us=1e9),
        PAPER,
        AT_40G,
        measure_from_us=SETTLED_US,
    )
    engine.run(SETTLED_US)
    samples = []
    while engine.now_us < UNTIL_US:
        engine.run(engine.now_us + 20.0)
        samples.append(engine.standing_queues()[0].max())
    expected = Fluid.of(PAPER, 40.0, MTU_BYTES).equilibrium_queue(n)
    assert float(np.mean(samples)) == pytest.approx(expected, rel=0.30 if n == 2 else 0.10)
    m = run_metrics(engine, 0)
    assert m.jain_fairness is not None and m.jain_fairness > 0.99
    assert m.utilization > 0.99 and m.pause_fraction == 0.0 and m.drops_bytes == 0


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 8, 32])
def test_pfc_alone_pauses_each_sender_n_minus_1_of_n(n: int) -> None:
    """No ECN: N senders at line rate into one port of the same speed can only send 1/N of the time,
    so PFC pauses each NIC (N - 1)/N of the time; the shared buffer holds the rest without a drop."""
    no_ecn = dataclasses.replace(PAPER, pmax=0.0)
    m = incast_of_long_flows(n, [no_ecn], SimConfig(dt_us=1.0), until=8_000.0, warmup=4_000.0)[0]
    assert m.nic_pause_fraction == pytest.approx((n - 1) / n, abs=0.01)
    assert m.utilization > 0.999 and m.drops_bytes == 0
    assert m.queue_max_kb * 1e3 <= SimConfig().switch_buffer_bytes * 1.05  # the pool (+ headroom)


@pytest.mark.slow
def test_higher_fan_in_without_ecn_leads_to_pfc_pauses() -> None:
    no_ecn = dataclasses.replace(DcqcnParams(), pmax=0.0)
    config = SimConfig(dt_us=2.0)
    pauses = []
    for fan_in in (2, 8, 32):
        off, on = incast_of_long_flows(fan_in, [no_ecn, DcqcnParams()], config, until=6_000.0, warmup=3_000.0)
        assert off.drops_bytes == 0  # headroom absorbs what is in flight: PFC stays lossless
        pauses.append(off.pause_fraction)
        assert on.pause_fraction < off.pause_fraction / 2
    assert 0 < pauses[0] < pauses[1] < pauses[2]

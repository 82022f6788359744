"""The simulator against the DCQCN paper's qualitative results (Zhu et al., SIGCOMM 2015).

The paper's experiments run at 40 Gb/s with its own parameter profile (Kmin 5 KB, Kmax 200 KB,
Pmax 1 %, g = 1/256, ...; :meth:`DcqcnParams.paper`), so these do too: ``ecn_reference_gbps=40``
makes the profile's thresholds apply unscaled to the 40G ports.
"""

from __future__ import annotations

import dataclasses

import pytest

from cc.model import DcqcnParams
from cc.sim import Engine, FlowSpec, RunMetrics, SimConfig, long_flows, run_metrics, single_bottleneck

PAPER = DcqcnParams.paper()
AT_40G = SimConfig(dt_us=1.0, ecn_reference_gbps=40.0)


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
    """A flow at line rate, a second joining at 2 ms; paper profile (R_AI 40 Mb/s) and R_AI 5 Mb/s.

    When the second flow joins, both flows are cut below their fair share (alpha starts near 1, and
    the queue keeps marking while it drains), then climb back by additive increase: R_AI per 55 µs
    timer event, 0.73 Gb/s per ms. Recovering from half the fair share (10 of 20 Gb/s) takes ~14 ms,
    so the window measured is 12-24 ms.
    """
    flows = [FlowSpec(1, 0, 0.0, stop_us=1e9, key=1), FlowSpec(2, 0, 2_000.0, stop_us=1e9, key=2)]
    slow = dataclasses.replace(PAPER, rp_ai_rate=5)
    engine = Engine(
        single_bottleneck(2, 40.0), flows, [PAPER, slow], AT_40G, measure_from_us=12_000.0, trace_us=250.0
    )
    engine.run(24_000.0)
    return run_metrics(engine, 0), run_metrics(engine, 1)


def test_two_flows_converge_to_a_fair_share(pair: tuple[RunMetrics, RunMetrics]) -> None:
    m = pair[0]
    assert m.jain_fairness is not None and m.jain_fairness > 0.99  # equal shares once converged
    assert m.convergence_us is not None and m.convergence_us <= 14_000.0  # see the fixture
    assert m.utilization > 0.95 and m.pause_fraction == 0.0


@pytest.mark.parametrize("fan_in", [2, 8, 16])
def test_queue_stays_bounded_near_the_marking_thresholds(fan_in: int) -> None:
    m = incast_of_long_flows(fan_in, [PAPER], AT_40G, until=12_000.0, warmup=6_000.0)[0]
    kmax_kb = PAPER.kmax_bytes / 1e3
    assert m.queue_p99_kb <= 1.1 * kmax_kb  # the RED ramp holds the queue: p -> 1 at Kmax
    assert m.queue_max_kb <= 1.5 * kmax_kb
    assert m.utilization > 0.9 and m.pause_fraction == 0.0  # ... without losing throughput or pausing


def test_higher_fan_in_without_ecn_leads_to_pfc_pauses() -> None:
    no_ecn = dataclasses.replace(DcqcnParams(), pmax=0.0)
    config = SimConfig(dt_us=2.0)
    pauses = []
    for fan_in in (2, 8, 32):
        off, on = incast_of_long_flows(fan_in, [no_ecn, DcqcnParams()], config, until=3_000.0, warmup=500.0)
        assert off.drops_bytes == 0  # headroom absorbs what is in flight: PFC stays lossless
        pauses.append(off.pause_fraction)
        assert on.pause_fraction < off.pause_fraction / 2
    assert 0 < pauses[0] < pauses[1] < pauses[2]


def test_lower_ai_rate_converges_slower_but_steadier(pair: tuple[RunMetrics, RunMetrics]) -> None:
    quick, steady = pair
    assert quick.convergence_us is not None
    assert steady.convergence_us is None or steady.convergence_us > 2 * quick.convergence_us
    assert steady.rate_cv is not None and quick.rate_cv is not None
    assert steady.rate_cv < 0.6 * quick.rate_cv  # each flow's rate oscillates less

"""The twins step no longer than their shortest link delay, so a hop and the round trip keep their
real length (a 4 µs step made a 1 µs hop take 4 µs: the round trip 16 µs, the bandwidth-delay product
at 200G 400 KB, above Kmin's lower rungs; issue 20)."""

from __future__ import annotations

import dataclasses

import pytest

from cc.model import DcqcnParams
from cc.tune.twins import evaluate, twins


@pytest.mark.parametrize("gbps", [100.0, 200.0, 400.0])
def test_the_twins_step_is_no_longer_than_their_shortest_link(gbps: float) -> None:
    for twin in twins(gbps, 0.2):
        shortest = min(link.delay_us for link in twin.scenario.topology.links)
        assert twin.scenario.config.dt_us <= shortest


@pytest.mark.slow
def test_marking_above_the_bdp_costs_the_incast_twin_no_utilisation() -> None:
    """At 200G with a 4 µs round trip the BDP is 100 KB: a Kmin of 200 KB still keeps a queue through
    DCQCN's cuts, so the hot port stays as busy as at 400 KB (within the tuner's 3 % tolerance)."""
    rung1 = dataclasses.replace(DcqcnParams(), rp_time_reset=150, kmin_bytes=400_000, kmax_bytes=1_600_000)
    rung2 = dataclasses.replace(rung1, kmin_bytes=200_000, kmax_bytes=800_000)
    for seed in (7, 8):
        incast = [t for t in twins(200.0, 0.2, seed) if t.name == "incast"]
        base, lower = evaluate(incast, [rung1, rung2])["incast"]
        assert lower.utilization >= 0.97 * base.utilization

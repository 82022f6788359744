"""The recorder's queue histogram: bins found by logarithm, counted in blocks."""

from __future__ import annotations

import numpy as np
import pytest

from cc.sim import SimConfig, single_bottleneck
from cc.sim.network import Network
from cc.sim.recorder import PENDING_STEPS, QUEUE_EDGES, Recorder, queue_bins


def reference_bins(q: np.ndarray) -> np.ndarray:
    """The definition: edges[i] <= q < edges[i + 1], negative lengths in the first bin."""
    return np.maximum(np.searchsorted(QUEUE_EDGES, q, side="right") - 1, 0)


@pytest.mark.parametrize(
    ("label", "values"),
    [
        ("every edge", QUEUE_EDGES),
        ("just below every edge", np.nextafter(QUEUE_EDGES, -np.inf)),
        ("just above every edge", np.nextafter(QUEUE_EDGES, np.inf)),
        ("empty and tiny", np.array([0.0, 1e-300, 0.5, 0.999999, -0.0, -3.0])),
        ("below the first log edge", np.array([1.0, 2.0, 999.0, 999.9999999])),
        ("beyond the last edge", np.array([1e9, 1e12, np.inf])),
        ("queues of any size", np.random.default_rng(5).lognormal(10.0, 4.0, 50_000)),
    ],
)
def test_bins_by_logarithm_match_the_edges(label: str, values: np.ndarray) -> None:
    np.testing.assert_array_equal(queue_bins(values), reference_bins(values), err_msg=label)


def test_buffered_counting_equals_one_count_per_step() -> None:
    net = Network(single_bottleneck(3), SimConfig(), (3,))
    recorder = Recorder(net, 2, 3)
    rng = np.random.default_rng(9)
    steps = 2 * PENDING_STEPS + 7  # two full blocks and a partial one, read before it fills
    samples = rng.lognormal(9.0, 3.0, (steps, 2, net.K + 1)) * (rng.random((steps, 2, net.K + 1)) < 0.7)
    for q in samples:
        recorder.on_queues(0.0, 1.0, q, np.zeros_like(q))
    switch = samples[:, :, recorder.switch_keys]
    expected = np.zeros_like(recorder.queue_hist)
    for q in switch:
        for row in range(2):
            for i, b in enumerate(reference_bins(q[row])):
                expected[row, i, b] += 1
    np.testing.assert_array_equal(recorder.queue_hist, expected)
    np.testing.assert_array_equal(recorder.queue_max, switch.max(axis=0))
    assert recorder.measured_us == steps

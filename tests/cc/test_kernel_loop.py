"""The compiled time loop (cc.sim.kernel_loop): many steps per call, the same bits as the numpy
reference stepped one by one, a row's run the same alone and in a batch, and the recorder's bins
the same as numpy's search over the edges."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cc.model import DcqcnParams
from cc.sim import Engine, SimConfig, long_flows, run_metrics, single_bottleneck
from cc.sim.kernel_loop import queue_bin
from cc.sim.recorder import QUEUE_EDGES, queue_bins
from tests.cc.reference import NumpyStep


def test_the_loop_bins_queue_lengths_as_the_recorder_does() -> None:
    rng = np.random.default_rng(5)
    edges = QUEUE_EDGES
    q = np.concatenate(
        (
            edges,
            np.nextafter(edges, -np.inf),  # a hair below every edge: the logarithm's worst case
            np.nextafter(edges, np.inf),
            10 ** rng.uniform(-1, 10, 5_000),
            [0.0, -0.0, -5.0, 0.5, 1.0, 999.999, 1e3, 2e9, np.inf],
        )
    )
    expected = np.maximum(np.searchsorted(edges, q, side="right") - 1, 0)  # negative lengths: bin 0
    assert np.array_equal([queue_bin(x, edges) for x in q], expected)
    assert np.array_equal(queue_bins(q), expected)  # the recorder's, for the samples it bins itself


def _run(params: list[DcqcnParams], parts: type = Engine, until: float = 1_500.0) -> Engine:
    flows = long_flows([(i, 0) for i in range(1, 17)], stop_us=1_200.0)
    kwargs = {} if parts is Engine else {"parts": parts}
    engine = Engine(
        single_bottleneck(16), flows, params, SimConfig(dt_us=1.0), measure_from_us=200.0, **kwargs
    )
    engine.run(1_000.0)
    engine.recorder.stop_us = engine.now_us
    engine.drain(until)
    return engine


def _figures(engine: Engine, row: int) -> dict[str, object]:
    m = run_metrics(engine, row)
    return {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}


@pytest.mark.slow
def test_single_16_on_the_loop_equals_the_reference_alone_and_in_a_batch() -> None:
    """The benchmark's single_16 (16:1 incast at 200G, 1 µs step), with a measurement window and
    flows that stop: every figure and counter equal to the numpy reference's, in few loop calls;
    the same parameter set beside another in a batch gives the same row."""
    base = DcqcnParams()
    ref, loop = _run([base], NumpyStep), _run([base])
    assert _figures(loop, 0) == _figures(ref, 0)
    ref_ports, loop_ports = ref.port_counters(), loop.port_counters()
    assert ref_ports["cnp_handled"].sum() > 100  # DCQCN at work
    for name, values in ref_ports.items():
        np.testing.assert_array_equal(loop_ports[name], values, err_msg=name)
    calls = sum(loop.loop_exits.values())
    assert 0 < calls < loop.t / 20  # thousands of steps in a few dozen calls
    other = dataclasses.replace(base, kmin_bytes=50_000, kmax_bytes=200_000)
    batch = _run([other, base])
    assert _figures(batch, 1) == _figures(loop, 0)
    assert _figures(batch, 0) != _figures(batch, 1)  # the other row did differ

"""Random numbers drawn per (seed, flow, step): a parameter set's run does not depend on its batch."""

from __future__ import annotations

import dataclasses

import numpy as np

from cc.model import DcqcnParams
from cc.sim import Engine, FlowSpec, SimConfig, incast, single_bottleneck
from cc.sim.draws import uniform


def test_a_flows_draws_do_not_depend_on_which_other_flows_are_drawn() -> None:
    ids = np.array([7, 3, 12, 0], dtype=np.int64)
    together = uniform(5, ids, 40)
    for i, flow in enumerate(ids):
        assert uniform(5, np.array([flow]), 40)[0] == together[i]
    assert uniform(6, ids, 40)[0] != together[0] and uniform(5, ids, 41)[0] != together[0]


def test_draws_are_uniform() -> None:
    u = uniform(1, np.arange(200_000, dtype=np.int64), 3)
    assert 0.0 <= u.min() and u.max() < 1.0
    counts = np.histogram(u, bins=20, range=(0.0, 1.0))[0]
    expected = len(u) / 20
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 43.8  # chi-square, 19 degrees of freedom, p = 0.001
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.01  # consecutive flows uncorrelated


def _waves() -> list[FlowSpec]:
    """Three incast waves of unequal sizes: rows finish flows at different times, so the columns
    freed and reused differ between parameter sets."""
    flows = []
    for wave in range(3):
        for f in incast(0, list(range(1, 9)), 1.0, start_us=wave * 300.0):
            size = 200e3 * (1 + (f.src + wave) % 4)
            flows.append(dataclasses.replace(f, size_bytes=size, key=wave * 100 + f.key))
    return flows


def test_a_parameter_sets_run_is_the_same_alone_and_in_any_batch() -> None:
    """Defect: blocks of draws started at the first step where *any* row had marks, so the 32:1
    mlx5-default Jain index was 0.739 in one batch and 0.916 in another."""
    target = DcqcnParams()
    others = [
        dataclasses.replace(target, kmin_bytes=20_000, kmax_bytes=80_000),
        dataclasses.replace(target, rp_ai_rate=50, pmax=0.5),
        dataclasses.replace(target, pmax=0.0),  # no marks at all in this row
    ]
    topo, config = single_bottleneck(8, 100.0), SimConfig(dt_us=1.0, ecn_reference_gbps=100.0)
    runs = []
    for batch in ([target], [others[0], target, others[1]], [others[2], others[1], others[0], target]):
        engine = Engine(topo, _waves(), batch, config)
        assert engine.drain(20_000.0)
        row = batch.index(target)
        assert engine.records is not None
        runs.append((engine.records.finish_us[row], engine.port_counters(), row))
    alone_finish, alone_ports, _ = runs[0]
    assert alone_ports["ecn_marked"].sum() > 100  # the draws mattered: marks were rounded
    for finish, ports, row in runs[1:]:
        np.testing.assert_allclose(finish, alone_finish, rtol=1e-9)
        for name, values in alone_ports.items():
            np.testing.assert_allclose(ports[name][row], values[0], rtol=1e-9, atol=1e-9)

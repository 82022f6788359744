"""The simulator's mechanics: links and delays, queues per port and priority, PFC, routing, batches."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cc.model import DcqcnParams, ParamBatch, RpState, rp_step
from cc.sim import (
    Engine,
    FlowSpec,
    SimConfig,
    incast,
    leaf_spine,
    long_flows,
    rail_optimised,
    run_metrics,
    single_bottleneck,
)

NO_ECN = dataclasses.replace(DcqcnParams(), pmax=0.0)


def test_a_lone_flow_completes_in_its_ideal_time_after_the_path_delay() -> None:
    topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, host_delay_us=2.0, fabric_delay_us=3.0)
    flow = FlowSpec(0, 3, 0.0, size_bytes=1e6)  # cross-leaf: 2 + 3 + 3 + 2 = 10 µs of links
    engine = Engine(topo, [flow], DcqcnParams(), SimConfig(dt_us=1.0))
    engine.run(9.0)
    assert engine.delivered[0].sum() == 0  # nothing arrives before the propagation delay
    engine.drain(1_000.0)
    m = run_metrics(engine)
    assert m.flows_finished == 1 and m.fct_slowdown_p50 == pytest.approx(1.0, abs=0.05)
    ideal = engine.records.ideal_us[0]  # type: ignore[union-attr]
    assert ideal == pytest.approx(1e6 * 8 / 200e3 + 10 + 1)


def test_links_of_fractional_steps_blend_two_steps_and_lose_no_byte() -> None:
    """Fabric links of 2.5 µs at a 1 µs step: their bytes arrive over two steps. The first flows stay
    on one leaf (whole steps); the cross-leaf ones that follow switch the blending on mid-run, in
    columns that earlier flows have used."""
    topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=2, host_delay_us=1.0, fabric_delay_us=2.5)
    flows = [FlowSpec(0, 1, 0.0, size_bytes=2e6), FlowSpec(1, 0, 0.0, size_bytes=2e6)]
    flows += [FlowSpec(k % 2, 2 + k % 2, 300.0 + 20 * k, size_bytes=300e3) for k in range(30)]
    engine = Engine(topo, flows, DcqcnParams(), SimConfig(dt_us=1.0), priorities=[3])
    engine.run(250.0)
    assert not engine.ring.fractional
    for until in (310.0, 600.0, 900.0):
        engine.run(until)
        assert engine.ring.fractional
        sent, delivered = engine.port_counters()["tx_bytes"].sum(), engine.port_counters()["rx_bytes"].sum()
        assert sent == pytest.approx(delivered + engine.in_flight().sum(), rel=1e-9)
    assert engine.drain(5_000.0)
    assert engine.slots.capacity < len(flows)  # columns were reused
    fct = engine.records.finish_us[0] - np.array([f.start_us for f in engine.records.specs])  # type: ignore[union-attr]
    ideal = np.array(engine.records.ideal_us)  # type: ignore[union-attr]
    alone = fct[-1] / ideal[-1]  # the last cross-leaf flow runs alone: 1 + 2.5 + 2.5 + 1 µs of links
    assert alone == pytest.approx(1.0, abs=0.05)


def test_same_seed_same_run_and_identical_rows_behave_identically() -> None:
    topo = single_bottleneck(4)
    flows = incast(0, [1, 2, 3, 4], 2e6)
    runs = []
    for _ in range(2):
        engine = Engine(topo, flows, [DcqcnParams()] * 3, SimConfig(dt_us=1.0, seed=5))
        engine.drain(5_000.0)
        runs.append(engine.records.finish_us.copy())  # type: ignore[union-attr]
    assert np.array_equal(runs[0], runs[1])
    assert np.array_equal(runs[0][0], runs[0][1]) and np.array_equal(runs[0][0], runs[0][2])


def test_bytes_are_conserved_through_queues_and_links() -> None:
    topo = leaf_spine(leaves=2, spines=2, hosts_per_leaf=3)
    flows = long_flows([(0, 3), (1, 3), (2, 4), (5, 0)], stop_us=400.0)
    engine = Engine(topo, flows, DcqcnParams(), SimConfig(dt_us=1.0))
    for until in (100.0, 300.0, 450.0):
        engine.run(until)
        sent, delivered = engine.port_counters()["tx_bytes"].sum(), engine.port_counters()["rx_bytes"].sum()
        assert sent == pytest.approx(delivered + engine.in_flight().sum(), rel=1e-9)
    engine.run(2_000.0)
    assert engine.in_flight().sum() == pytest.approx(0.0, abs=1.0)  # stopped flows drain completely


def test_pfc_pauses_propagate_upstream_hop_by_hop() -> None:
    # 3:1 into port 0 from the other leaf: only the spine -> leaf link feeds the congested queue, so
    # the leaf pauses the spine, the spine's queue grows and pauses the remote leaf's uplink, whose
    # queue pauses the senders.
    topo = leaf_spine(leaves=2, spines=1, hosts_per_leaf=4)
    engine = Engine(topo, long_flows([(4, 0), (5, 0), (6, 0)], stop_us=1e9), NO_ECN, SimConfig(dt_us=1.0))
    engine.run(3_000.0)
    rec, net = engine.recorder, engine.net
    leaf0, leaf1, spine = 8, 9, 10

    def paused(src: int, dst: int) -> float:
        link = next(i for i, ln in enumerate(topo.links) if (ln.src, ln.dst) == (src, dst))
        return float(rec.pause_us[0, link * net.P])

    assert paused(spine, leaf0) > 0  # leaf 0 paused the spine's downlink
    assert paused(leaf1, spine) > 0  # the spine paused leaf 1's uplink
    assert all(paused(h, leaf1) > 0 for h in (4, 5, 6))  # and leaf 1 paused the senders
    assert paused(7, leaf1) == 0 and rec.drops[0] == 0  # an idle port is never paused; nothing lost


def test_too_little_headroom_breaks_the_lossless_promise() -> None:
    topo = single_bottleneck(8, delay_us=5.0)
    flows = long_flows([(i, 0) for i in range(1, 9)], stop_us=1e9)
    ok = Engine(topo, flows, NO_ECN, SimConfig(dt_us=1.0, headroom_scale=1.0))
    tight = Engine(topo, flows, NO_ECN, SimConfig(dt_us=1.0, headroom_scale=0.2))
    for engine in (ok, tight):
        engine.run(2_000.0)
    assert ok.recorder.drops[0] == 0
    assert tight.recorder.drops[0] > 0
    counters = tight.port_counters()
    assert counters["out_of_sequence"][0, 0] > 0 and counters["nak"][0, 1:].sum() > 0


def test_a_lossy_fabric_drops_and_a_lost_tail_times_out() -> None:
    topo = single_bottleneck(8)
    flows = incast(0, list(range(1, 9)), 3e6)
    engine = Engine(topo, flows, NO_ECN, SimConfig(dt_us=1.0, pfc=False, lossy_buffer_bytes=1e6))
    assert engine.drain(20_000.0)  # every lost byte is re-sent: all flows still complete
    counters = engine.port_counters()
    assert engine.recorder.drops[0] > 0 and counters["timeouts"].sum() > 0
    assert counters["tx_bytes"].sum() > 8 * 3e6  # retransmissions
    assert engine.recorder.pause_us.sum() == 0


def test_strict_priority_serves_the_higher_priority_first() -> None:
    topo = single_bottleneck(2)
    flows = [
        FlowSpec(1, 0, 0.0, stop_us=1e9, priority=3, key=1),
        FlowSpec(2, 0, 0.0, stop_us=1e9, priority=5, key=2),
    ]
    engine = Engine(topo, flows, NO_ECN, SimConfig(dt_us=1.0, lossless_priorities=(3, 5)))
    engine.run(500.0)
    before = engine.delivered.copy()
    engine.run(1_500.0)
    got = engine.delivered - before
    assert got[0, 1] > 0.95 * got[0].sum()  # priority 5 takes the link; priority 3 is paused back


def test_ecmp_spreads_flows_over_spines_and_keeps_each_flow_on_one_path() -> None:
    topo = leaf_spine(leaves=2, spines=4, hosts_per_leaf=4, seed=1)
    spines = {topo.path(0, 5, key)[1] for key in range(64)}
    assert len(spines) == 4  # every spine gets some flows
    assert topo.path(0, 5, 7) == topo.path(0, 5, 7)
    assert len(topo.path(0, 1, 0)) == 2 and len(topo.path(0, 5, 0)) == 4
    assert topo.max_switch_hops() == 3


def test_rail_optimised_keeps_same_rail_traffic_on_its_rail_switch() -> None:
    topo = rail_optimised(hosts=8, rails=4, hosts_per_pod=4, spines=2)
    same_rail = topo.path(0 * 4 + 2, 1 * 4 + 2)  # host 0 rail 2 -> host 1 rail 2, same pod
    assert len(same_rail) == 2
    assert len(topo.path(0 * 4 + 2, 5 * 4 + 2)) == 4  # other pod: through a spine
    assert len(topo.path(0 * 4 + 1, 1 * 4 + 2)) == 4  # other rail: through a spine


def test_mixed_speeds_scale_the_ecn_thresholds_with_the_port() -> None:
    topo = leaf_spine(leaves=1, spines=1, hosts_per_leaf=2, host_gbps=[25.0, 400.0])
    engine = Engine(topo, long_flows([(1, 0)], stop_us=1e9), DcqcnParams(), SimConfig(dt_us=1.0))
    to_25g = topo.downlink(0) * engine.net.P
    assert engine._kmin[0, to_25g] == pytest.approx(800_000 * 25 / 200)
    engine.run(3_000.0)
    m = run_metrics(engine)
    assert m.utilization > 0.6 and m.pause_fraction < 0.5  # DCQCN brings 400G down to 25G


def test_batched_rows_run_the_same_rules_as_one_parameter_set() -> None:
    """ParamBatch columns broadcast through the RP rules exactly like a DcqcnParams."""
    variants = [
        DcqcnParams(),
        DcqcnParams(rp_byte_reset=0, rp_clamp_tgt_rate=1),
        DcqcnParams.paper(),
        DcqcnParams(rp_clamp_tgt_rate_ati=0),
    ]
    n = len(variants)
    batch = ParamBatch(variants)
    rng = np.random.default_rng(3)
    cnps = rng.integers(0, 2, (40, n, 5)).astype(float)
    sent = rng.uniform(0, 5e4, (40, n, 5))
    together = RpState.new((n, 5), 200_000.0, batch)
    widened = RpState.new((n, 5), 200_000.0, batch)
    alone = [RpState.new(5, 200_000.0, p) for p in variants]
    for step in range(40):
        rp_step(together, cnps[step], sent[step], 7.0, batch, 200_000.0)
        rp_step(widened, cnps[step], sent[step], 7.0, batch.widened(5), 200_000.0)
        for row, (state, p) in enumerate(zip(alone, variants, strict=True)):
            rp_step(state, cnps[step, row], sent[step, row], 7.0, p, 200_000.0)
    for row, state in enumerate(alone):
        assert np.allclose(together.rc[row], state.rc) and np.allclose(together.alpha[row], state.alpha)
        assert np.allclose(together.rt[row], state.rt)
    for name in ("rc", "rt", "alpha", "timer_stage", "byte_stage"):  # same values, only the shape differs
        assert np.array_equal(getattr(widened, name), getattr(together, name))


def test_calm_stretches_are_jumped_without_changing_the_result() -> None:
    topo = single_bottleneck(3)  # two flows on disjoint ports of one switch
    flows = [FlowSpec(1, 0, 0.0, size_bytes=50e6), FlowSpec(2, 3, 0.0, size_bytes=1e6, demand_mbps=50_000.0)]
    engine = Engine(topo, flows, DcqcnParams(), SimConfig(dt_us=1.0))
    engine.drain(10_000.0)
    finish = engine.records.finish_us[0]  # type: ignore[union-attr]
    # alone at line rate, the 50 MB flow needs 2 ms; the 1 MB flow at 50 Gb/s 160 µs
    assert finish[0] == pytest.approx(2_000 + 3, rel=0.02) and finish[1] == pytest.approx(160 + 3, rel=0.05)
    assert engine.t < 2_100 and not np.isnan(finish).any()


def test_jumping_a_calm_stretch_leaves_the_run_where_stepping_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow alone at line rate (calm, jumped over in several jumps that end at trace points), then
    a second one joins and DCQCN acts: the bytes still on the wire at each jump must arrive when they
    would have, or the join meets a different queue and the run diverges."""
    flows = [FlowSpec(1, 0, 0.0, stop_us=1e9, key=1), FlowSpec(2, 0, 1_000.0, stop_us=1e9, key=2)]
    config = SimConfig(dt_us=1.0, ecn_reference_gbps=40.0)

    def run() -> Engine:
        engine = Engine(single_bottleneck(2, 40.0), flows, DcqcnParams.paper(), config, trace_us=250.0)
        engine.run(3_000.0)
        return engine

    jumped = run()
    monkeypatch.setattr(Engine, "_skip", lambda self, end: False)
    stepped = run()
    assert jumped.t == stepped.t
    for name in ("delivered", "sent", "backlog"):
        np.testing.assert_allclose(getattr(jumped, name), getattr(stepped, name), rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(jumped.rp.rc, stepped.rp.rc, rtol=1e-9)


@pytest.mark.parametrize("alpha", [1.0, 0.25])
def test_a_shared_buffer_gives_each_paused_ingress_its_dynamic_share(alpha: float) -> None:
    """Dynamic thresholds (Choudhury and Hahne, IEEE/ACM ToN 1998): an ingress may hold alpha x the
    pool's free space, so N ingresses congested together settle at x = alpha B / (1 + alpha N) each,
    between XON (3/4 of it here) and XOFF. The switch never holds more than its pool plus headroom."""
    n, pool = 8, 8e6
    config = SimConfig(dt_us=1.0, switch_buffer_bytes=pool, dynamic_threshold=alpha)
    flows = long_flows([(i, 0) for i in range(1, n + 1)], stop_us=1e9)
    engine = Engine(single_bottleneck(n, 40.0), flows, NO_ECN, config)
    engine.run(2_000.0)
    held = []
    while engine.now_us < 4_000.0:
        engine.run(engine.now_us + 5.0)
        held.append(engine.backlog[0, :n, 0].copy())  # one flow per sender: its ingress's bytes
    per_ingress = np.array(held)
    share = alpha * pool / (1 + alpha * n)
    assert 0.7 * share < per_ingress.mean() < 1.05 * share
    headroom = float(engine.net.key_headroom.max())
    assert per_ingress.sum(axis=1).max() <= pool * alpha * n / (1 + alpha * n) + n * headroom
    assert run_metrics(engine).drops_bytes == 0


def test_a_lone_ingress_stops_at_the_static_xoff_when_the_pool_is_large() -> None:
    params = dataclasses.replace(NO_ECN, xoff_bytes=500_000, xon_bytes=400_000)
    config = SimConfig(dt_us=1.0, switch_buffer_bytes=64e6)
    flows = long_flows([(1, 0), (2, 0)], stop_us=1e9)
    engine = Engine(single_bottleneck(2, 40.0), flows, params, config)
    engine.run(3_000.0)
    headroom = float(engine.net.key_headroom.max())
    assert engine.backlog[0, :2, 0].max() <= 500_000 + headroom
    assert engine.backlog[0, :2, 0].max() > 400_000 * 0.5


def test_a_lossy_queue_tail_drops_at_its_dynamic_share_of_the_pool() -> None:
    """A lone lossy egress queue may hold alpha x (pool - what it holds): x = alpha B / (1 + alpha),
    half the pool at alpha = 1, below the static ``lossy_buffer_bytes``."""
    pool = 2e6
    config = SimConfig(dt_us=1.0, pfc=False, lossy_buffer_bytes=6e6, switch_buffer_bytes=pool)
    flows = long_flows([(i, 0) for i in range(1, 5)], stop_us=1e9)
    engine = Engine(single_bottleneck(4), flows, NO_ECN, config)
    queued = []
    while engine.now_us < 1_000.0:
        engine.run(engine.now_us + 5.0)
        queued.append(float(engine.standing_queues()[0].max()))
    assert engine.recorder.drops[0] > 0
    arriving = 4 * 200e3 / 8  # bytes four 200G senders bring in one 1 µs step
    assert pool / 2 - arriving < max(queued[50:]) <= pool / 2 + arriving

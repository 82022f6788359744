"""The α–β policy and the measured conditions it runs on."""

from __future__ import annotations

import math

import pytest

from cc.model.params import DcqcnParams
from netd.nccl.conditions import LinkConditions, PortCondition, cut_share, link_conditions, queue_delay_us
from netd.nccl.layout import ALGORITHMS, COLLECTIVES, NODE_BUCKETS, node_bucket_nodes, size_bucket
from netd.nccl.policy import CANDIDATES, ModelParams, algorithm_costs, build_table
from tests.nccl.hosts import CONGESTED, host_state

RING, TREE, PAT = ALGORITHMS.index("ring"), ALGORITHMS.index("tree"), ALGORITHMS.index("pat")


def _cond(pause: float = 0.0, cnp: float = 0.0, ce: float = 0.0, ports: int = 2, measured: bool = True):
    p = DcqcnParams()
    return LinkConditions(
        "h",
        tuple(
            PortCondition(
                f"mlx5_{i}", 1, 200.0, pause, cnp, ce, cut_share(cnp, p), queue_delay_us(ce, 200.0, p)
            )
            for i in range(ports)
        ),
        measured,
    )


def test_conditions_from_the_real_pipeline(tmp_path):
    cond = link_conditions(host_state(tmp_path / "a", "hostA", **CONGESTED).observation)
    assert cond.measured and cond.host == "hostA" and len(cond.ports) == 2
    port = cond.ports[0]
    assert port.line_gbps == 200.0
    assert port.pause_fraction == pytest.approx(0.2)
    assert port.cnp_handled_per_s == pytest.approx(2000)
    assert port.ce_fraction == pytest.approx(0.02)
    # 2000 CNP/s x cut 0.5 (alpha ~1, rp_gd 11) x 300 µs increase timer = 30 % of capacity
    assert port.cut_share == pytest.approx(2000 * (1023 / 1024 / 2) * 300e-6)
    assert cond.effective_gbps == pytest.approx(2 * 200 * 0.8 * (1 - port.cut_share))
    # RED inverted: 2 % CE of Pmax 20 % -> 10 % of the way from Kmin to Kmax, at 200 Gb/s
    assert port.queue_delay_us == pytest.approx((800_000 + 0.1 * 2_400_000) * 8 / 200e3)
    clean = link_conditions(host_state(tmp_path / "b", "hostB").observation)
    assert clean.effective_gbps == clean.nominal_gbps == 400 and clean.queue_delay_us == 0


def test_empty_tables_when_nothing_is_known_or_nothing_is_wrong():
    assert build_table(_cond(ports=0), 1, 1000).table.hint_count() == 0
    assert "no rates" in build_table(_cond(measured=False), 1, 1000).reason
    quiet = build_table(_cond(), 1, 1000)
    assert quiet.table.hint_count() == 0 and quiet.decisions == ()


def test_costs_follow_the_documented_formulas():
    p = ModelParams()
    n, size, gbps, q = 8, 1 << 20, 400.0, 2.0
    bw = gbps * 1e3 / 8  # bytes per µs
    costs = algorithm_costs("allreduce", n, size, gbps, q, p)
    ring_simple = 8.4 + 2 * (n - 1) * (14.0 + q) + 2 * (n - 1) / n * size / bw
    ring_ll128 = 14.0 + 2 * (n - 1) * (4.0 + q) + 2 * (n - 1) / n * size / (bw * 120 / 128)
    assert costs[RING] == pytest.approx(
        min(ring_simple, ring_ll128, 6.6 + 14 * (2.7 + q) + 1.75 * size / (bw / 2))
    )
    tree_simple = 8.4 + 2 * 3 * (14.0 + q) + 2 * size / (bw * 0.92)
    assert costs[TREE] <= tree_simple
    pat = algorithm_costs("allgather", n, size, gbps, q, p)[PAT]
    assert pat == pytest.approx(8.0 + 3 * (14.0 + q) + (n - 1) / n * size / bw)


@pytest.mark.parametrize("cond", [_cond(ce=0.02), _cond(pause=0.3, cnp=3000, ce=0.05), _cond(pause=0.5)])
def test_every_hint_is_a_congestion_driven_clear_winner(cond):
    p = ModelParams()
    result = build_table(cond, 5, 30_000, p)
    for d in result.decisions:
        winner = d.entry.algo
        others = [t for a, t in d.effective_us.items() if a != winner]
        assert d.effective_us[winner] * (1 + p.min_gain) <= min(others)  # a clear winner...
        assert min(d.nominal_us, key=lambda a: d.nominal_us[a]) != winner  # ...that congestion made
        assert d.entry.forbid == sum(0b111 << (3 * a) for a in d.effective_us if a != winner)
        assert d.collective in CANDIDATES and d.n_nodes > 1
    table = result.table
    assert table.generated_at_ns == 5 and table.valid_for_ms == 30_000
    for nb in range(NODE_BUCKETS):
        for c, collective in enumerate(COLLECTIVES):
            hinted = [not e.empty for e in table.entries[nb][c]]
            if nb == 0 or collective in ("broadcast", "reduce"):
                assert not any(hinted)  # one node, or Ring-only collectives: never hinted


def test_queueing_favours_logarithmic_algorithms_at_small_sizes():
    result = build_table(_cond(ce=0.02), 1, 1000)
    # 4 nodes, 4 KiB: NCCL's (nominal) model picks Ring; 41.6 µs of queueing per step makes Tree's
    # 2 log2(n) steps beat Ring's 2(n-1)
    assert result.table.entry(4, "allreduce", 4096).describe() == "prefer tree; forbid ring"
    assert result.table.entry(4, "allgather", 4096).describe() == "prefer pat; forbid ring"
    # 16 nodes, 4 KiB: the nominal model already picks Tree, so there is nothing to correct
    assert result.table.entry(16, "allreduce", 4096).empty
    assert result.table.entry(4, "allreduce", 8 << 30).empty  # bandwidth-bound: Ring either way


def test_bandwidth_loss_alone_moves_the_ring_tree_crossover_a_little():
    assert build_table(_cond(), 1, 1000).table.hint_count() == 0
    # 60 % paused: Ring's smaller volume gains on Tree, but by less than the default 15 % margin...
    assert build_table(_cond(pause=0.6), 1, 1000).table.hint_count() == 0
    # ...and with a 5 % margin it shows: every AllReduce hint prefers Ring
    loose = build_table(_cond(pause=0.6), 1, 1000, ModelParams(min_gain=0.05))
    allreduce = {d.entry.describe() for d in loose.decisions if d.collective == "allreduce"}
    assert allreduce == {"prefer ring; forbid tree"}


def test_min_gain_keeps_nccls_choice_when_there_is_no_clear_winner():
    cond = _cond(ce=0.01)
    strict = build_table(cond, 1, 1000, ModelParams(min_gain=5.0))
    loose = build_table(cond, 1, 1000, ModelParams(min_gain=0.0))
    assert strict.table.hint_count() < loose.table.hint_count()


def test_decision_sizes_sit_inside_their_buckets():
    for d in build_table(_cond(ce=0.03, pause=0.2), 1, 1000).decisions:
        assert size_bucket(math.floor(d.n_bytes)) == d.size_bucket
        assert d.n_nodes in {node_bucket_nodes(nb) for nb in range(1, NODE_BUCKETS)}


def test_queue_delay_uses_the_configured_switch_profile():
    from netd.config.settings import load_config
    from netd.nccl.service import switch_profile

    p = DcqcnParams()
    assert queue_delay_us(0.02, 100.0, p) == queue_delay_us(0.02, 400.0, p)  # Kmin/Kmax scale with speed
    assert queue_delay_us(0.0, 200.0, p) == 0.0
    assert queue_delay_us(1.0, 200.0, p) == pytest.approx(3_200_000 * 8 / 200e3)  # saturated at Kmax
    cfg = load_config(
        environ={"NETD_TUNING_SWITCH_KMIN_BYTES": "100000", "NETD_TUNING_SWITCH_KMAX_BYTES": "400000"}
    )
    shallow = switch_profile(cfg)
    assert (shallow.kmin_bytes, shallow.kmax_bytes) == (100_000, 400_000)
    assert queue_delay_us(0.02, 200.0, shallow) == pytest.approx((100_000 + 0.1 * 300_000) * 8 / 200e3)

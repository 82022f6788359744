"""The fault layer: each fault changes what its port reports, in its window only, and says so in labels."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from cc.sim.workload import FixedWorkload, Flow
from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.fault_kinds import (
    CnpShift,
    CounterSaturation,
    CounterStall,
    DriverReset,
    LinkFlap,
    LossBurst,
    RateGlitch,
    ReadGlitch,
    SpreadingVictim,
    StuckReceiver,
)
from netd.emulated.faults import FaultLayer
from netd.emulated.traces import fault_trace, healthy_trace

N_HOSTS = 8


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedFabric]:
    """One emulator for the module (building one costs most of a test); each test works after its end."""
    ring = FixedWorkload(
        "allreduce", [Flow((h, p), ((h + 1) % N_HOSTS, p)) for h in range(N_HOSTS) for p in range(2)]
    )
    f = EmulatedFabric(tmp_path_factory.mktemp("faults") / "emu", sim_ms_per_tick=2.0, workload=ring)
    yield f
    f.close()


def run(
    fabric: EmulatedFabric, make: Callable[[float], list], seconds: float, step: float = 0.5
) -> list[dict]:
    """Faults made at the emulator's current time; per step, a copy of host 1 port 0's counters."""
    faults = make(fabric.elapsed_s)
    fabric.hook = FaultLayer(faults)
    out = []
    for _ in range(round(seconds / step)):
        fabric.advance(step, sim_ms=2.0 * step)
        hw, eth = fabric.counters(1, 0)
        out.append(dict(hw) | {f"eth:{k}": v for k, v in eth.items()})
    fabric.hook = None
    return out, faults


def deltas(series: list[dict], name: str) -> list[int]:
    return [b.get(name, 0) - a.get(name, 0) for a, b in zip(series, series[1:], strict=False)]


def test_stuck_receiver_pauses_its_feeders_and_its_peer(fabric: EmulatedFabric) -> None:
    s, (fault,) = run(fabric, lambda t: [StuckReceiver(2, 0, t + 1.0, t + 2.0, feeders=((1, 0),))], 3.0)
    paused = deltas(s, "eth:rx_prio3_pause_duration")  # host 1 port 0 is a feeder
    sent = deltas(s, "eth:tx_prio3_packets")
    assert paused[:1] == [0] and paused[1:3] == [500_000, 500_000] and paused[3:] == [0, 0]
    assert sent[1:3] == [0, 0] and sent[0] > 0 and sent[3] > 0
    _, eth = fabric.counters(2, 0)
    assert eth["tx_prio3_pause_duration"] == 1_000_000  # the stuck receiver paused its ToR all along
    assert fault.labels()[0].start_s == fault.start_s
    assert [(lb.kind, lb.host, lb.priority) for lb in fault.labels()] == [
        ("pause_storm", 2, None),
        ("pfc_storm", 1, 3),
    ]


def test_spreading_victim_is_paused_without_marks(fabric: EmulatedFabric) -> None:
    s, _ = run(fabric, lambda t: [SpreadingVictim(1, 0, t + 0.5, t + 1.5, pause_fraction=0.4)], 2.0)
    assert deltas(s, "eth:rx_prio3_pause_duration") == [200_000, 200_000, 0]
    assert deltas(s, "np_ecn_marked_roce_packets") == [0, 0, 0] and deltas(s, "rp_cnp_handled") == [0, 0, 0]


def test_loss_burst_counts_events_at_its_rate(fabric: EmulatedFabric) -> None:
    s, _ = run(fabric, lambda t: [LossBurst(1, 0, t + 0.5, t + 1.5, events_per_s=1000)], 2.0)
    total = [
        sum(d)
        for d in zip(
            *(
                deltas(s, n)
                for n in ("out_of_sequence", "packet_seq_err", "roce_adp_retrans", "local_ack_timeout_err")
            ),
            strict=True,
        )
    ]
    assert total[0] in (499, 500) and total[1] in (500, 501) and total[2] == 0


def test_link_flap_counts_carrier_losses_sets_the_state_and_stops_traffic(fabric: EmulatedFabric) -> None:
    s, _ = run(
        fabric,
        lambda t: [LinkFlap(1, 0, t + 0.6, t + 1.8, downs=((t + 0.6, t + 0.9), (t + 1.5, t + 1.8)))],
        2.0,
    )
    assert deltas(s, "eth:link_down_events_phy") == [1, 0, 1] and deltas(s, "link_downed") == [1, 0, 1]
    rx = deltas(s, "eth:rx_vport_rdma_unicast_bytes")
    assert rx[0] == rx[2] < rx[1] * 0.8  # 0.3 s of 0.5 s down in the first and third slices
    state = (fabric.host_root(1) / "class/infiniband/mlx5_0/ports/1/state").read_text()
    assert state.strip() == "4: ACTIVE"


def test_saturation_pins_then_resets(fabric: EmulatedFabric) -> None:
    s, _ = run(fabric, lambda t: [CounterSaturation(1, 0, t + 0.4, t + 1.4, counter="symbol_error")], 2.0)
    assert [x.get("symbol_error", 0) for x in s] == [65535, 65535, 0, 0]


def test_stall_freezes_pma_data_while_ethtool_moves(fabric: EmulatedFabric) -> None:
    s, _ = run(fabric, lambda t: [CounterStall(1, 0, t + 0.4, t + 1.4)], 2.0)
    assert deltas(s, "port_rcv_data")[:1] == [0] and deltas(s, "eth:rx_vport_rdma_unicast_bytes")[0] > 0


def test_cnp_shift(fabric: EmulatedFabric) -> None:
    s, _ = run(fabric, lambda t: [CnpShift(1, 0, t + 0.5, t + 1.5, cnp_per_s=2000)], 2.0)
    assert deltas(s, "np_cnp_sent") == [1000, 1000, 0]


def test_trace_schedules_are_deterministic_and_labelled() -> None:
    a = fault_trace(3, 600, sim_ms_per_s=5.0)
    b = fault_trace(3, 600, sim_ms_per_s=5.0)
    assert [(x.kind, x.host, x.port, x.start_s) for x in a.labels()] == [
        (x.kind, x.host, x.port, x.start_s) for x in b.labels()
    ]
    kinds = {lb.kind for lb in a.labels()}
    assert kinds >= {
        "congestion",
        "pfc_storm",
        "pause_storm",
        "loss",
        "link_flap",
        "counter_saturated",
        "counter_stalled",
        "congestion_spreading",
    }
    per_port: dict[tuple[int, int], list] = {}
    for f in a.faults:
        per_port.setdefault((f.host, f.port), []).append((f.start_s, f.end_s))
    for spans in per_port.values():  # never two faults on one port at once
        spans.sort()
        assert all(b0 >= a1 for (_, a1), (b0, _) in zip(spans, spans[1:], strict=False))
    healthy = healthy_trace(3, 300, sim_ms_per_s=5.0)
    assert healthy.labels() == [] and healthy.workload.phase_at(1e12).name == "idle"


@pytest.mark.parametrize(
    ("counter", "ethtool", "mode"),
    [
        ("port_rcv_packets", False, "back"),
        ("np_ecn_marked_roce_packets", False, "spike"),
        ("rx_prio3_pause", True, "spike"),
    ],
)
def test_read_glitch_misleads_one_read_and_the_count_goes_on(
    fabric: EmulatedFabric, counter: str, ethtool: bool, mode: str
) -> None:
    key = f"eth:{counter}" if ethtool else counter
    s, (fault,) = run(
        fabric,
        lambda t: [ReadGlitch(1, 0, t + 0.99, t + 1.01, counter=counter, ethtool=ethtool, mode=mode)],
        2.0,
    )
    values = [x[key] for x in s]  # after 0.5, 1.0 (the bad read), 1.5, 2.0 s
    good = deltas(s, key)
    assert (values[1] < values[0]) if mode == "back" else (values[1] - values[0] >= 1 << 40)
    assert 0 <= values[2] - values[0] and values[3] >= values[2]  # back on the true series
    assert good[2] >= 0 and fault.labels() == []


def test_read_glitch_over32_reads_beyond_the_width_once(fabric: EmulatedFabric) -> None:
    s, _ = run(
        fabric,
        lambda t: [ReadGlitch(1, 0, t + 0.99, t + 1.01, counter="out_of_sequence", mode="over32")],
        2.0,
    )
    values = [x.get("out_of_sequence", 0) for x in s]
    assert values[1] >= 1 << 32 and all(v < 1 << 32 for v in (values[0], values[2], values[3]))


def test_driver_reset_restarts_every_counter(fabric: EmulatedFabric) -> None:
    before = dict(fabric.counters(1, 0)[0])
    s, _ = run(fabric, lambda t: [DriverReset(1, 0, t + 0.99, t + 1.01)], 2.0)
    assert before["port_rcv_packets"] > s[-1]["port_rcv_packets"] > 0  # restarted, counting again
    assert s[-1]["eth:tx_prio3_packets"] < s[0]["eth:tx_prio3_packets"]


def test_rate_glitch_rewrites_the_rate_for_one_read(fabric: EmulatedFabric) -> None:
    rate = fabric.host_root(1) / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "rate"
    original = rate.read_text()
    t = fabric.elapsed_s
    fabric.hook = FaultLayer([RateGlitch(1, 0, t + 0.99, t + 1.01, text="nan Gb/sec")])
    seen = []
    for _ in range(3):
        fabric.advance(0.5, sim_ms=1.0)
        seen.append(rate.read_text())
    fabric.hook = None
    assert seen == [original, "nan Gb/sec\n", original]

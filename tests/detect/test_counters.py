"""Counter health: saturation, counters that stopped moving, reads that fail."""

from __future__ import annotations

import pytest

from netd.detect.counters import KIND_READ_ERROR, KIND_SATURATED, KIND_STALLED, CounterHealthDetector
from tests.detect.helpers import cfg, port, tick

LINE_BYTES = 200e9 / 8  # per second


def test_saturated_counters_one_finding_each() -> None:
    found = CounterHealthDetector(cfg()).evaluate(
        tick(1.0, port(saturated=frozenset({"symbol_error", "link_downed"})))
    )
    assert sorted((c.kind, c.scope.subject) for c in found) == [
        (KIND_SATURATED, "link_downed"),
        (KIND_SATURATED, "symbol_error"),
    ]
    assert "perfquery -R" in found[0].explanation


STALL_CASES = [
    # (what, rx_bytes delta, rx_vport_rdma_unicast_bytes delta, state, interval, stalled subject or None)
    ("PMA data frozen while the NIC counts traffic", 0.0, 0.5 * LINE_BYTES, "ACTIVE", 1.0, "rx_bytes"),
    ("ethtool frozen while PMA counts", 0.5 * LINE_BYTES, 0.0, "ACTIVE", 1.0, "rx_vport_rdma_unicast_bytes"),
    ("both idle: nothing to say", 0.0, 0.0, "ACTIVE", 1.0, None),
    ("too little traffic on the other side (read skew)", 0.0, 0.01 * LINE_BYTES, "ACTIVE", 1.0, None),
    ("a down port is idle, not stalled", 0.0, 0.5 * LINE_BYTES, "DOWN", 1.0, None),
    (
        "a 10 ms interval falls inside the hw_counters cache",
        0.0,
        0.5 * LINE_BYTES * 0.01,
        "ACTIVE",
        0.01,
        None,
    ),
    ("both moving", LINE_BYTES, LINE_BYTES, "ACTIVE", 1.0, None),
]


@pytest.mark.parametrize(
    ("what", "rdma", "eth", "state", "dt", "subject"), STALL_CASES, ids=[c[0] for c in STALL_CASES]
)
def test_stalled(what: str, rdma: float, eth: float, state: str, dt: float, subject: str | None) -> None:
    p = port(counters={"rx_bytes": rdma}, netdev_counters={"rx_vport_rdma_unicast_bytes": eth}, state=state)
    found = CounterHealthDetector(cfg()).evaluate(tick(1.0, p, dt=dt))
    assert [c.scope.subject for c in found if c.kind == KIND_STALLED] == ([subject] if subject else [])


def test_a_stall_resolves_when_the_counter_moves_and_idle_ticks_carry_it() -> None:
    d = CounterHealthDetector(cfg())
    frozen = port(counters={"tx_bytes": 0.0}, netdev_counters={"tx_vport_rdma_unicast_bytes": LINE_BYTES})
    idle = port(counters={"tx_bytes": 0.0}, netdev_counters={"tx_vport_rdma_unicast_bytes": 0.0})
    moving = port(counters={"tx_bytes": 1.0}, netdev_counters={"tx_vport_rdma_unicast_bytes": 1.0})
    assert d.evaluate(tick(1.0, frozen))
    assert d.evaluate(tick(2.0, idle))
    assert not d.evaluate(tick(3.0, moving))


def test_read_errors_per_port_and_per_source() -> None:
    d = CounterHealthDetector(cfg(read_error_quiet_ticks=2))
    found = d.evaluate(
        tick(1.0, port(read_errors=("np_cnp_sent: not a number",)), source_errors={"ethtool": "EIO"})
    )
    assert {(c.kind, c.scope.device, c.scope.subject) for c in found} == {
        (KIND_READ_ERROR, None, "source:ethtool"),
        (KIND_READ_ERROR, "mlx5_0", None),
    }
    assert d.evaluate(tick(2.0, port()))  # one clean tick is not enough
    assert not d.evaluate(tick(3.0, port()))

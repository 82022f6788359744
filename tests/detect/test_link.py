"""Link health: carrier losses from netlink events and counters (merged), down links, speed changes."""

from __future__ import annotations

import pytest

from netd.detect.inputs import LinkChange
from netd.detect.link import KIND_LINK_DOWN, KIND_LINK_FLAP, KIND_SPEED, LinkDetector
from tests.detect.helpers import cfg, pfc, port, tick


def kinds(found: list) -> dict[str, str]:
    return {c.kind: c.severity.value for c in found}


COUNTER_CASES = [
    ("a link_down_events_phy increment is a flap", {}, {"link_down_events_phy": 1.0}, "warning"),
    ("PMA link_downed counts too", {"link_downed": 1.0}, {}, "warning"),
    (
        "both count the same loss: the larger, not the sum",
        {"link_downed": 2.0},
        {"link_down_events_phy": 2.0},
        "warning",
    ),
    ("three losses are critical", {"link_downed": 3.0}, {}, "critical"),
    ("no change", {"link_downed": 0.0}, {"link_down_events_phy": 0.0}, None),
]


@pytest.mark.parametrize(
    ("what", "counters", "netdev", "severity"), COUNTER_CASES, ids=[c[0] for c in COUNTER_CASES]
)
def test_flaps_from_counters(what: str, counters: dict, netdev: dict, severity: str | None) -> None:
    d = LinkDetector(cfg())
    d.evaluate(tick(1.0, port()))
    found = kinds(d.evaluate(tick(2.0, port(counters=counters, netdev_counters=netdev))))
    assert found.get(KIND_LINK_FLAP) == severity
    if severity:
        assert found[KIND_LINK_FLAP] and KIND_LINK_DOWN not in found


def test_a_flap_stays_open_for_its_window() -> None:
    d = LinkDetector(cfg(link_flap_window=5.0))
    d.evaluate(tick(1.0, port()))
    assert d.evaluate(tick(2.0, port(counters={"link_downed": 1.0})))
    open_at = [t for t in range(3, 10) if d.evaluate(tick(float(t), port(counters={"link_downed": 0.0})))]
    assert open_at == [3, 4, 5, 6]  # the loss at t=2 ages out of the 5 s window at t=7


def test_netlink_events_arrive_between_ticks_and_are_not_counted_twice() -> None:
    d = LinkDetector(cfg())
    d.evaluate(tick(1.0, port()))  # learns netdev mlx5_0_net -> mlx5_0/1
    down = LinkChange("mlx5_0_net", 1.3, carrier=False, operstate="DOWN")
    up = LinkChange("mlx5_0_net", 1.5, carrier=True, operstate="UP")
    repeat = LinkChange("mlx5_0_net", 1.55, carrier=True, operstate="UP")  # RTM_NEWLINK for something else
    found = d.evaluate(pfc(1.6, changes=(down, up, repeat)))
    assert kinds(found) == {KIND_LINK_FLAP: "warning"}  # reported by the fast path, before the next tick
    found = d.evaluate(tick(2.0, port(netdev_counters={"link_down_events_phy": 1.0})))
    assert found[0].evidence["carrier_losses"] == 1


def test_events_for_other_netdevs_are_ignored() -> None:
    d = LinkDetector(cfg())
    d.evaluate(tick(1.0, port()))
    assert not d.evaluate(pfc(1.5, changes=(LinkChange("eth0", 1.4, carrier=False),)))


def test_down_link_after_being_up() -> None:
    d = LinkDetector(cfg(link_down_ticks=2))
    d.evaluate(tick(1.0, port(state="ACTIVE")))
    assert KIND_LINK_DOWN not in kinds(d.evaluate(tick(2.0, port(state="DOWN"))))
    found = kinds(d.evaluate(tick(3.0, port(state="DOWN"))))
    assert found[KIND_LINK_DOWN] == "critical"
    assert not d.evaluate(tick(4.0, port(state="ACTIVE")))


def test_a_port_that_was_never_up_is_unused_not_down() -> None:
    d = LinkDetector(cfg())
    for t in range(1, 6):
        assert not d.evaluate(tick(float(t), port(state="DOWN")))


def test_speed_change() -> None:
    d = LinkDetector(cfg())
    d.evaluate(tick(1.0, port(rate_gbps=200.0)))
    found = d.evaluate(tick(2.0, port(rate_gbps=100.0)))
    assert kinds(found) == {KIND_SPEED: "warning"} and found[0].evidence["highest_rate_gbps"] == 200.0
    assert not d.evaluate(tick(3.0, port(rate_gbps=200.0)))

"""Carrier losses from the kernel (rtnetlink), heard by LinkMonitor inside a namespace we create."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator

import pytest

from netd.config.detect import DetectConfig
from netd.detect.inputs import LinkChange
from netd.detect.link import KIND_LINK_FLAP, LinkDetector
from netd.errors import SourceError
from netd.sources.netlink_events import LinkMonitor
from tests.detect.helpers import pfc, port, tick
from tests.netns import ip, throwaway_netns

pytestmark = pytest.mark.root


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    with throwaway_netns("netd-det") as name:
        ip("-n", name, "link", "add", "detA", "type", "veth", "peer", "name", "detB")
        yield name


def wait_for(monitor: LinkMonitor, predicate, timeout_s: float = 5.0) -> list:  # type: ignore[no-untyped-def]
    events: list = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events += monitor.drain()
        if predicate(events):
            return events
        time.sleep(0.02)
    return events


def up_down_up(carrier: list[bool | None]) -> bool:
    runs = [c for i, c in enumerate(carrier) if c is not None and (i == 0 or c != carrier[i - 1])]
    return "".join("u" if c else "d" for c in runs).find("udu") >= 0


def test_carrier_flaps_are_heard_and_found(netns: str) -> None:
    monitor = LinkMonitor(netns=netns)
    monitor.start()
    try:
        for state in ("up", "down", "up"):
            ip("-n", netns, "link", "set", "detB", state)
            ip("-n", netns, "link", "set", "detA", state)
        events = wait_for(monitor, lambda evs: up_down_up([e.carrier for e in evs if e.netdev == "detA"]))
    finally:
        monitor.close()
    carrier = [e.carrier for e in events if e.netdev == "detA" and e.carrier is not None]
    assert up_down_up(carrier), carrier  # up, lost carrier, back up: every event, none held back
    assert all(e.monotonic <= time.monotonic() and not e.removed for e in events)
    # the detector turns the kernel's repeated RTM_NEWLINK messages into carrier losses
    d = LinkDetector(DetectConfig())
    d.evaluate(tick(0.0, port("mlx5_0")))  # the port whose netdev we pretend detA is
    changes = tuple(
        LinkChange("mlx5_0_net", e.monotonic, e.carrier, e.operstate) for e in events if e.netdev == "detA"
    )
    found = d.evaluate(pfc(time.monotonic(), changes=changes))
    assert [c.kind for c in found] == [KIND_LINK_FLAP]
    losses = sum(1 for i, c in enumerate(carrier) if c is False and (i == 0 or carrier[i - 1] is not False))
    assert found[0].evidence["carrier_losses"] == losses >= 1


def test_removal_and_close_are_clean(netns: str) -> None:
    monitor = LinkMonitor(netns=netns)
    monitor.start()
    ip("-n", netns, "link", "del", "detA")
    events = wait_for(monitor, lambda evs: any(e.removed for e in evs))
    monitor.close()
    monitor.close()  # idempotent
    assert any(e.removed and e.netdev in ("detA", "detB") for e in events)


def test_a_namespace_that_does_not_exist_fails_clearly() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    monitor = LinkMonitor(netns=f"netd-none-{secrets.token_hex(3)}")
    with pytest.raises(SourceError, match="cannot listen for link events"):
        monitor.start()
    assert not any(n.startswith("netd-none-") for n in os.listdir("/run/netns"))  # not created either

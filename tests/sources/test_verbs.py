"""The optional pyverbs source: the real absent paths, and attribute naming with a small stand-in."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from netd.sources.verbs import VerbsGid, VerbsPort, VerbsSource, port_from_attrs

HAS_RDMA = os.path.isdir("/sys/class/infiniband") and bool(os.listdir("/sys/class/infiniband"))


@pytest.mark.skipif(HAS_RDMA, reason="this host has RDMA devices")
def test_real_pyverbs_without_devices() -> None:
    pytest.importorskip("pyverbs.device")
    src = VerbsSource()
    ok, reason = src.available()
    assert (ok, reason) == (False, "no RDMA devices (verbs found none)")
    assert src.read() == ()


def test_unavailable_reason_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    src = VerbsSource(device_lister=list)
    with caplog.at_level(logging.INFO, logger="netd.sources.verbs"):
        for _ in range(3):
            assert src.available() == (False, "no RDMA devices (verbs found none)")
    assert len(caplog.records) == 1


def test_pyverbs_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyverbs.device", None)  # what a host without python3-pyverbs sees
    src = VerbsSource()
    ok, reason = src.available()
    assert not ok and reason.startswith("pyverbs not importable")
    assert src.read() == ()


@dataclass
class Attrs:
    """The PortAttr fields netd reads, with raw verbs numbers."""

    state: int = 4
    phys_state: int = 5
    active_speed: int = 128
    active_width: int = 16
    link_layer: int = 2
    gid_tbl_len: int = 256


LINK_LOCAL = "fe80:0000:0000:0000:0e42:a1ff:fe40:29a0"
V4_MAPPED = "0000:0000:0000:0000:0000:ffff:0a6c:a424"
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        (Attrs(), ("ACTIVE", "LinkUp", "NDR", "2X", 200.0, "Ethernet")),  # ConnectX-7 200GAUI-2
        (Attrs(active_speed=128, active_width=2), ("ACTIVE", "LinkUp", "NDR", "4X", 400.0, "Ethernet")),
        (Attrs(active_speed=32, active_width=2), ("ACTIVE", "LinkUp", "EDR", "4X", 100.0, "Ethernet")),
        (Attrs(active_speed=32, active_width=1), ("ACTIVE", "LinkUp", "EDR", "1X", 25.0, "Ethernet")),
        (
            Attrs(active_speed=16, active_width=2, link_layer=1),
            ("ACTIVE", "LinkUp", "FDR", "4X", 56.0, "InfiniBand"),
        ),
        (Attrs(state=1, phys_state=3), ("DOWN", "Disabled", "NDR", "2X", 200.0, "Ethernet")),
        (
            Attrs(state=9, phys_state=0, active_speed=3, active_width=3, link_layer=0),
            ("UNKNOWN(9)", None, None, None, None, None),
        ),
    ],
)
def test_port_from_attrs(attrs: Attrs, expected: tuple[object, ...]) -> None:
    p = port_from_attrs("mlx5_0", 1, attrs, [])
    assert (p.state, p.phys_state, p.active_speed, p.active_width, p.rate_gbps, p.link_layer) == expected
    assert (p.device, p.port, p.gid_tbl_len, p.gids) == ("mlx5_0", 1, 256, ())


def test_gids_are_named_like_sysfs_and_empty_slots_dropped() -> None:
    raw = [(3, V4_MAPPED, 2), (0, LINK_LOCAL, 1), (1, LINK_LOCAL, 2), (2, V4_MAPPED, 1), (4, ZERO, 0)]
    p = port_from_attrs("mlx5_0", 1, Attrs(), raw)
    assert p.gids == (
        VerbsGid(0, LINK_LOCAL, "IB/RoCE v1"),
        VerbsGid(1, LINK_LOCAL, "RoCE v2"),
        VerbsGid(2, V4_MAPPED, "IB/RoCE v1"),
        VerbsGid(3, V4_MAPPED, "RoCE v2"),
    )


@dataclass
class Device:
    """A stand-in for one open verbs device (the VerbsDevice protocol)."""

    name: str
    attrs: dict[int, Attrs]
    gid_table: dict[int, list[tuple[int, str, int]]] = field(default_factory=dict)
    fail: bool = False
    closed: bool = False

    def port_numbers(self) -> Sequence[int]:
        return sorted(self.attrs)

    def query_port(self, port: int) -> Attrs:
        if self.fail:
            raise OSError(19, "No such device")  # what a device unplugged mid-query gives
        return self.attrs[port]

    def gids(self, port: int) -> Sequence[tuple[int, str, int]]:
        return self.gid_table.get(port, [])

    def close(self) -> None:
        self.closed = True


def test_read_every_port_and_skip_a_failing_device() -> None:
    devices = [
        Device("mlx5_0", {1: Attrs()}, {1: [(1, LINK_LOCAL, 2)]}),
        Device("mlx5_1", {1: Attrs()}, fail=True),
        Device("mlx4_0", {1: Attrs(active_speed=4, active_width=2), 2: Attrs(state=1)}),
    ]
    src = VerbsSource(device_lister=lambda: devices)
    assert src.available() == (True, "3 RDMA device(s): mlx5_0, mlx5_1, mlx4_0")
    ports = src.read()
    assert [(p.device, p.port) for p in ports] == [("mlx5_0", 1), ("mlx4_0", 1), ("mlx4_0", 2)]
    assert ports[0].gids == (VerbsGid(1, LINK_LOCAL, "RoCE v2"),)
    assert ports[1].rate_gbps == 40.0 and ports[2].state == "DOWN"
    assert all(d.closed for d in devices)
    assert isinstance(ports[0], VerbsPort)


def test_a_lister_that_raises_is_unavailable_not_an_error() -> None:
    def broken() -> list[Device]:
        raise RuntimeError("Failed to open device")

    src = VerbsSource(device_lister=broken)
    assert src.available() == (False, "verbs device list failed: Failed to open device")
    assert src.read() == ()

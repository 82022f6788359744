"""mtu_mismatch against neighbours parsed from lldpd's own JSON (captured: lldpd 1.0.16 receiving an
802.3 Maximum Frame Size TLV of 9216). Expected frame sizes are worked by hand from IEEE 802.3's frame
(destination address through FCS: MTU + 14 + 4, + 4 with an 802.1Q tag) and RoCE MTUs from the
kernel's iboe_get_mtu (netdev MTU less 96 bytes of headers, then the largest IB MTU that fits)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from netd.model.topology import LldpNeighbor
from netd.qos.local import local_findings
from netd.qos.mtu import roce_mtu
from netd.sources.lldpcli import read_lldp_file
from netd.sources.qos import PortQos

FIXTURES = Path(__file__).parents[1] / "fixtures" / "lldp"


def _neighbour(mfs: int | None = 9216, interface: str = "ens1f0np0") -> LldpNeighbor:
    (n,) = read_lldp_file(FIXTURES / "lldpd_mfs.json")  # leaf1 swp7, heard on ens1f0np0, MFS 9216
    return dataclasses.replace(n, max_frame_size=mfs, interface=interface)


def _port(mtu: int | None, trust: str | None = "dscp", netdev: str = "ens1f0np0") -> PortQos:
    return PortQos("mlx5_0", 1, netdev, trust=trust, mtu=mtu)


# (MTU, trust, neighbour's MFS) -> the MTU the fix sets, or None for no finding
CASES = [
    (9000, "dscp", 9216, None),  # 9018-byte frames: fit
    (9198, "dscp", 9216, None),  # 9216: exactly fits
    (9199, "dscp", 9216, 9198),  # 9217: one byte over
    (9194, "pcp", 9216, None),  # tagged: 9194 + 22 = 9216
    (9198, "pcp", 9216, 9194),  # tagged: 9220
    (9198, None, 9216, None),  # trust unknown: counted untagged
    (4200, "dscp", 1522, 1504),  # a jumbo host behind a standard 1522-byte switch port
    (9000, "dscp", None, None),  # the neighbour sends no MFS: nothing to say
    (None, "dscp", 1522, None),  # MTU not read: nothing to compare
]


@pytest.mark.parametrize(("mtu", "trust", "mfs", "fixed"), CASES)
def test_frame_size_against_the_neighbours_mfs(mtu, trust, mfs, fixed) -> None:
    found = local_findings([_port(mtu, trust)], neighbors={"ens1f0np0": (_neighbour(mfs),)})
    if fixed is None:
        assert found == []
        return
    (f,) = found
    assert (f.kind, f.device, f.port, f.netdev, f.priority, f.subject) == (
        "mtu_mismatch",
        "mlx5_0",
        1,
        "ens1f0np0",
        None,
        "ens1f0np0",
    )
    assert f.fix.startswith(f"ip link set dev ens1f0np0 mtu {fixed}   #")
    assert f"accepts at most {mfs}" in f.message and "leaf1 port swp7" in f.message


@pytest.mark.parametrize(
    ("mtu", "ib"),
    [(9000, 4096), (4192, 4096), (4191, 2048), (4200, 4096), (1500, 1024), (1024 + 96, 1024), (351, 0)],
)
def test_roce_mtu_follows_iboe_get_mtu(mtu: int, ib: int) -> None:
    assert roce_mtu(mtu) == ib


def test_the_message_says_what_it_costs_roce() -> None:
    (f,) = local_findings([_port(4200)], neighbors={"ens1f0np0": (_neighbour(4200),)})
    # 4218-byte frames over a 4200 limit; at the 4182 that fits RoCE drops from 4096 to 2048
    assert "frames of up to 4218 bytes (MTU + 18)" in f.message
    assert "RoCE MTU 4096 at this MTU, 2048 at the 4182 that fits" in f.message


def test_a_bond_is_judged_on_what_its_members_hear() -> None:
    """LLDP runs per physical port: the bond's neighbours are heard on its members, one finding each."""
    bond = _port(9000, netdev="bond0")
    heard = (_neighbour(9216, "ens1f0np0"), _neighbour(1522, "ens1f1np1"))
    (f,) = local_findings([bond], neighbors={"bond0": heard})
    assert (f.netdev, f.subject) == ("bond0", "ens1f1np1") and "(heard on ens1f1np1)" in f.message
    assert f.fix.startswith("ip link set dev bond0 mtu 1504")


def test_a_neighbour_on_another_netdev_is_not_this_ports() -> None:
    assert local_findings([_port(9000)], neighbors={"ens2f0np0": (_neighbour(1522),)}) == []

"""The fabric model: LLDP placement, static-file merge, rails (rail-optimised layouts), bonds and VLANs."""

from __future__ import annotations

from pathlib import Path

from netd.model.snapshot import PortSample
from netd.model.topology import Gid, HostInterface, LldpNeighbor, join_names
from netd.sources.lldpcli import read_lldp_file
from netd.sources.topology_file import parse_topology_file
from netd.topology.build import build_topology, natural_key, rail_index

FIXTURES = Path(__file__).parent / "fixtures" / "lldp"


def _port(device: str, netdev: str, port: int = 1, state: str = "ACTIVE") -> PortSample:
    return PortSample(device, port, netdev, "Ethernet", state, "LinkUp", 200.0)


def _lldp(interface: str, switch: str, switch_port: str) -> LldpNeighbor:
    return LldpNeighbor(interface, switch, None, switch_port, "ifname", None, ("10.0.0.1",))


RAIL_FILE = """
version: 1
spines: [spine-a, spine-b]
tors:
  leaf-r0: {spines: [spine-a, spine-b], rail: 0}
  leaf-r1: {spines: [spine-a, spine-b], rail: 1}
  leaf-r2: {spines: spine-a, rail: 2}
  leaf-r3: {spines: [spine-b], rail: 3}
"""


def test_lldp_places_ports_and_rails_follow_device_order():
    ports = [_port("mlx5_10", "ens10np0"), _port("mlx5_2", "ens2f0np0"), _port("mlx5_0", "ens1f0np0")]
    neighbors = read_lldp_file(FIXTURES / "sonic_rails.json")
    topo = build_topology("gpu-017", ports, neighbors=neighbors, now=5.0)
    by_dev = {p.device: p for p in topo.ports}
    assert [p.device for p in topo.ports] == ["mlx5_0", "mlx5_2", "mlx5_10"]  # natural order
    assert {d: p.rail for d, p in by_dev.items()} == {"mlx5_0": 0, "mlx5_2": 1, "mlx5_10": 2}
    assert (by_dev["mlx5_0"].tor, by_dev["mlx5_0"].tor_port, by_dev["mlx5_0"].placed_by) == (
        "leaf-r0-p1",
        "Ethernet24",
        "lldp",
    )
    assert by_dev["mlx5_0"].spine is None  # LLDP cannot see uplinks
    assert by_dev["mlx5_10"].tor is None and any("mlx5_10/1" in w for w in topo.warnings)
    assert topo.tors["leaf-r0-p1"].mgmt_address == "10.20.0.11" and topo.generated_at == 5.0
    assert set(topo.tors) == {"leaf-r0-p1", "leaf-r1-p1", "00:1c:73:aa:bb:cc"}  # every neighbour is a switch


def test_static_file_adds_uplinks_rails_and_ports_lldp_cannot_see():
    static = parse_topology_file(
        RAIL_FILE + "hosts:\n  gpu-9:\n    mlx5_2: {tor: leaf-r2, tor_port: Ethernet8}\n"
        "    ens4f0np0: {tor: leaf-r3, rail: 7}\n"
    )
    ports = [
        _port("mlx5_0", "ens1f0np0"),
        _port("mlx5_1", "ens2f0np0"),
        _port("mlx5_2", "ens3f0np0"),
        _port("mlx5_3", "ens4f0np0"),
    ]
    neighbors = [_lldp("ens1f0np0", "leaf-r0", "Ethernet0"), _lldp("ens2f0np0", "leaf-r1", "Ethernet0")]
    topo = build_topology("gpu-9", ports, neighbors=neighbors, static=static)
    p = {x.device: x for x in topo.ports}
    assert (p["mlx5_0"].tor, p["mlx5_0"].spine, p["mlx5_0"].placed_by) == (
        "leaf-r0",
        "spine-a+spine-b",
        "lldp",
    )
    assert (p["mlx5_2"].tor, p["mlx5_2"].tor_port, p["mlx5_2"].placed_by) == (
        "leaf-r2",
        "Ethernet8",
        "static",
    )
    assert p["mlx5_2"].spine == "spine-a" and p["mlx5_3"].spine == "spine-b"
    assert [p[d].rail for d in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3")] == [
        0,
        1,
        2,
        7,
    ]  # ToR rail, then port's
    assert topo.warnings == () and set(topo.spines) == {"spine-a", "spine-b"}


def test_lldp_wins_over_a_disagreeing_file_and_says_so():
    static = parse_topology_file("hosts:\n  h:\n    ens1f0np0: {tor: leaf-9}\n")
    topo = build_topology(
        "h", [_port("mlx5_0", "ens1f0np0")], neighbors=[_lldp("ens1f0np0", "leaf-1", "Eth1")], static=static
    )
    assert topo.ports[0].tor == "leaf-1"
    assert "LLDP sees ToR leaf-1, the topology file says leaf-9" in topo.warnings[0]
    agree = parse_topology_file("hosts:\n  h:\n    mlx5_0/1: {tor: leaf-1}\n")
    topo = build_topology(
        "h", [_port("mlx5_0", "ens1f0np0")], neighbors=[_lldp("ens1f0np0", "leaf-1", "Eth1")], static=agree
    )
    assert topo.ports[0].placed_by == "lldp+static" and topo.warnings == ()


def test_rail_optimised_cluster_groups_nic_i_of_every_host_on_rail_i():
    static = parse_topology_file(RAIL_FILE)
    placements = []
    for h in range(3):
        ports = [_port(f"mlx5_{i}", f"ens{i}np0") for i in range(4)]
        neighbors = [_lldp(f"ens{i}np0", f"leaf-r{i}", f"Ethernet{4 * h}") for i in range(4)]
        placements += build_topology(f"gpu-{h}", ports, neighbors=neighbors, static=static).ports
    by_rail: dict[int, set[str]] = {}
    for p in placements:
        assert p.rail is not None
        by_rail.setdefault(p.rail, set()).add(p.tor or "")
    assert by_rail == {0: {"leaf-r0"}, 1: {"leaf-r1"}, 2: {"leaf-r2"}, 3: {"leaf-r3"}}


def test_rails_none_leaves_rails_unknown():
    static = parse_topology_file("rails: none\n")
    topo = build_topology("h", [_port("mlx5_0", "a"), _port("mlx5_1", "b")], static=static)
    assert [p.rail for p in topo.ports] == [None, None]


def test_bond_hears_lldp_on_its_members_and_keeps_vlans_and_gids():
    interfaces = [
        HostInterface("ens1f0np0", 4, "physical", master="bond0"),
        HostInterface("ens1f1np1", 5, "physical", master="bond0"),
        HostInterface("bond0", 6, "bond", addresses=("10.1.0.5/24",)),
        HostInterface("bond0.100", 7, "vlan", link="bond0", vlan_id=100, addresses=("10.100.0.5/24",)),
        HostInterface("lo", 1, "loopback"),
    ]
    neighbors = [_lldp("ens1f0np0", "leaf-1a", "Ethernet4"), _lldp("ens1f1np1", "leaf-1b", "Ethernet4")]
    gid = Gid(3, "0000:0000:0000:0000:0000:ffff:0a64:0005", "RoCE v2", "bond0.100")
    topo = build_topology(
        "h",
        [_port("mlx5_bond_0", "bond0")],
        neighbors=neighbors,
        interfaces=interfaces,
        gids={("mlx5_bond_0", 1): (gid,)},
    )
    (p,) = topo.ports
    assert (p.tor, p.tor_port, p.bond, p.members) == (
        "leaf-1a+leaf-1b",
        "Ethernet4",
        "bond0",
        ("ens1f0np0", "ens1f1np1"),
    )
    assert [v.name for v in p.vlans] == ["bond0.100"] and p.addresses == ("10.1.0.5/24",)
    assert p.gids == (gid,) and all(i.kind != "loopback" for i in topo.interfaces)


def test_helpers():
    assert join_names(["b", "a", "", "b"]) == "a+b"
    assert sorted(["mlx5_10", "mlx5_9"], key=natural_key) == ["mlx5_9", "mlx5_10"]
    assert rail_index([_port("mlx5_1", "b"), _port("mlx5_0", "a")]) == {("mlx5_0", 1): 0, ("mlx5_1", 1): 1}

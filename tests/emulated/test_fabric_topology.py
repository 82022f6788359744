"""The emulated fabric's wiring is written in the formats netd's real topology sources read."""

from __future__ import annotations

from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.fabric_topology import SPINE, tor_name
from netd.sources.lldpcli import read_lldp_file
from netd.sources.topology_file import read_topology_file


def test_every_host_has_lldp_and_a_topology_file(tmp_path):
    fabric = EmulatedFabric(tmp_path / "emu", tors=3, hosts_per_tor=2, ports_per_host=1)
    try:
        for host in range(6):
            root = fabric.host_root(host)
            neighbors = read_lldp_file(root / "lldp.json")  # one port: lldpcli's single-object shape
            assert [(n.interface, n.switch) for n in neighbors] == [("ens1f0np0", tor_name(host // 2))]
            assert neighbors[0].switch_port == f"Ethernet{4 * (host % 2)}"
            static = read_topology_file(root / "topology.yaml")
            assert set(static.tors) == {tor_name(t) for t in range(3)}
            assert all(t.spines == (SPINE,) for t in static.tors.values()) and set(static.spines) == {SPINE}
    finally:
        fabric.close()

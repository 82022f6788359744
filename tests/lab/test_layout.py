"""The lab's shape: names, addresses, interface indexes and routes are derived, never guessed."""

from __future__ import annotations

import pytest

from netd.lab.layout import IFINDEX_BASE, MAX_PORTS, LabLayout, check_lab_name


def test_default_shape_two_tier() -> None:
    lay = LabLayout("lab")
    assert [n.name for n in lay.nodes] == ["h0", "h1", "h2", "h3", "tor0", "tor1", "spine"]
    assert [lay.tor_of(h) for h in range(4)] == [0, 0, 1, 1]
    assert all(n.netns.startswith("ndl-lab-") for n in lay.nodes)
    assert len(lay.links) == 6  # 4 host links + 2 uplinks
    assert lay.uplink_mbps(0) == 200.0  # non-blocking: 2 hosts x 100 Mb/s


def test_every_port_has_a_unique_ifindex_mac_and_a_peer() -> None:
    lay = LabLayout("lab", hosts=8, tors=4)
    ifindexes = [p.ifindex for p in lay.ports]
    assert len(set(ifindexes)) == len(ifindexes) and min(ifindexes) == IFINDEX_BASE
    assert len({p.mac for p in lay.ports}) == len(lay.ports)
    for p in lay.ports:
        assert lay.port(p.peer_id).peer_id == p.id
        assert lay.port(p.peer_id).node != p.node


def test_host_facing_port_is_the_tor_downlink() -> None:
    lay = LabLayout("lab")
    port = lay.host_facing(2)
    assert (port.node.name, port.ifname) == ("tor1", "swp1")
    assert lay.port(port.peer_id).node.name == "h2"
    assert lay.find_port("tor0", "uplink").rate_mbps == 200.0


def test_routes_reach_every_host_inside_the_lab_prefix() -> None:
    lay = LabLayout("lab")
    h0 = lay.host_nodes[0]
    assert lay.routes(h0) == [("10.77.1.1/32", None, "eth0"), ("10.77.0.0/16", "10.77.1.1", "eth0")]
    spine = lay.spine_node
    assert spine is not None
    dests = {d for d, _, _ in lay.routes(spine)}
    assert {"10.77.1.0/24", "10.77.2.0/24"} <= dests
    for node in lay.nodes:
        assert all(d.startswith("10.77.") for d, _, _ in lay.routes(node))


def test_single_tor_has_no_spine() -> None:
    lay = LabLayout("small", hosts=2, tors=1)
    assert lay.spine_node is None and len(lay.links) == 2
    assert all(p.ifname != "uplink" for p in lay.ports)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tors": 0}, "--tors"),
        ({"hosts": 1}, "--hosts"),
        ({"hosts": 3, "tors": 4}, "--hosts"),
        ({"link_mbps": 0.5}, "--rate"),
        ({"oversubscription": 0.5}, "oversubscription"),
    ],
)
def test_invalid_shapes_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LabLayout("lab", **kwargs)  # type: ignore[arg-type]


def test_port_budget_of_the_data_plane() -> None:
    assert len(LabLayout("big", hosts=32, tors=8).ports) <= MAX_PORTS


@pytest.mark.parametrize("name", ["", "Lab", "1lab", "lab-1", "a" * 13])
def test_lab_names_are_short_lowercase_words(name: str) -> None:
    with pytest.raises(ValueError, match="lab name"):
        check_lab_name(name)

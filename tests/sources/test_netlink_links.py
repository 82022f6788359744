"""Netlink interfaces: bonds, VLANs and addresses from encoded messages, and a real namespace (root)."""

from __future__ import annotations

import pytest
from pyroute2.netlink.rtnl.ifaddrmsg import ifaddrmsg
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from netd.sources.netlink_links import NetlinkLinks, interfaces_from_messages
from tests.integration.netns import need_root_tools, run, two_namespaces


def _link(index: int, name: str, kind: str | None = None, **attrs: object) -> ifinfmsg:
    msg = ifinfmsg()
    msg["index"] = index
    msg["attrs"] = [
        ("IFLA_IFNAME", name),
        ("IFLA_MTU", 9000),
        ("IFLA_OPERSTATE", "UP"),
        ("IFLA_ADDRESS", f"02:00:00:00:00:{index:02x}"),
    ]
    for key, value in attrs.items():
        msg["attrs"].append((key, value))
    if kind:
        info: list[tuple[str, object]] = [("IFLA_INFO_KIND", kind)]
        if kind == "vlan":
            info.append(("IFLA_INFO_DATA", {"attrs": [("IFLA_VLAN_ID", 100)]}))
        msg["attrs"].append(("IFLA_LINKINFO", {"attrs": info}))
    msg.encode()
    decoded = ifinfmsg(msg.data)
    decoded.decode()
    return decoded


def _addr(index: int, address: str, prefixlen: int) -> ifaddrmsg:
    msg = ifaddrmsg()
    msg["index"], msg["prefixlen"], msg["family"] = index, prefixlen, 2
    msg["attrs"] = [("IFA_ADDRESS", address)]
    msg.encode()
    decoded = ifaddrmsg(msg.data)
    decoded.decode()
    return decoded


def test_bond_members_vlans_and_addresses():
    links = [
        _link(1, "lo"),
        _link(4, "ens1f0np0", IFLA_MASTER=6),
        _link(5, "ens1f1np1", IFLA_MASTER=6),
        _link(6, "bond0", "bond"),
        _link(7, "bond0.100", "vlan", IFLA_LINK=6),
    ]
    by_name = {i.name: i for i in interfaces_from_messages(links, [_addr(7, "10.100.0.5", 24)])}
    assert by_name["lo"].kind == "loopback" and by_name["ens1f0np0"].kind == "physical"
    assert by_name["ens1f0np0"].master == "bond0" and by_name["bond0"].kind == "bond"
    vlan = by_name["bond0.100"]
    assert (vlan.kind, vlan.vlan_id, vlan.link, vlan.addresses) == ("vlan", 100, "bond0", ("10.100.0.5/24",))
    assert (vlan.mtu, vlan.oper_state, vlan.mac) == (9000, "UP", "02:00:00:00:00:07")


@pytest.mark.root
def test_reads_a_real_namespace():
    need_root_tools("ip")
    with two_namespaces("nsnl") as (_, ns_host, _, if_host):
        run("ip", "-n", ns_host, "link", "add", "br-nl", "type", "bridge")
        run("ip", "-n", ns_host, "link", "set", if_host, "master", "br-nl")
        found = {i.name: i for i in NetlinkLinks(netns=ns_host).read()}
    assert found[if_host].kind == "veth" and found[if_host].master == "br-nl"
    assert found[if_host].link is None  # a veth's IFLA_LINK is its peer, not a parent
    assert "192.0.2.2/30" in found[if_host].addresses and found["br-nl"].kind == "bridge"

"""LLDP for real: two network namespaces joined by a veth pair, a "switch" lldpd on one side, and netd's
topology discovery on the other, through lldpd (lldpcli) and, with no lldpd on the host side, by
listening for the frames (scapy). Netlink runs inside the host namespace too."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from netd.config.service import TopologyConfig
from netd.model.snapshot import PortSample
from netd.sources.lldpcli import LldpcliSource
from netd.topology.service import TopologyService
from tests.integration.netns import lldpd, lldpd_socket_dir, need_root_tools, two_namespaces, wait_for

pytestmark = pytest.mark.root


def _configure_switch(sock: Path, name: str) -> None:
    for args in (
        ["configure", "system", "hostname", name],
        ["configure", "lldp", "portidsubtype", "ifname"],
        ["configure", "lldp", "tx-interval", "1"],
        ["update"],
    ):
        subprocess.run(["lldpcli", "-u", str(sock), *args], check=True, capture_output=True)


def _port(netdev: str) -> PortSample:
    return PortSample("mlx5_0", 1, netdev, "Ethernet", "ACTIVE", "LinkUp", 100.0)


def test_lldpd_on_both_sides():
    need_root_tools("ip", "lldpd", "lldpcli")
    with two_namespaces() as (ns_sw, ns_host, if_sw, if_host), lldpd_socket_dir() as sockets:
        sw_sock, host_sock = sockets / "sw.sock", sockets / "host.sock"
        with lldpd(ns_sw, if_sw, sw_sock), lldpd(ns_host, if_host, host_sock):
            _configure_switch(sw_sock, f"leaf-{if_sw}")
            source = LldpcliSource(socket=host_sock)
            leaf = f"leaf-{if_sw}"
            (n,) = wait_for(lambda: [x for x in source.read() if x.chassis_name == leaf], what="LLDP")
            assert (n.interface, n.switch_port, n.port_id_type) == (if_host, if_sw, "ifname")
            assert "192.0.2.1" in n.mgmt_addresses

            cfg = TopologyConfig(lldp="lldpd", lldpd_socket=host_sock, netns=ns_host)
            service = TopologyService(cfg, Path("/sys"), "gpu-ns")
            try:
                service.refresh()
                topo = service.topology([_port(if_host)])
            finally:
                service.close()
            (p,) = topo.ports
            assert (p.tor, p.tor_port, p.placed_by) == (f"leaf-{if_sw}", if_sw, "lldp")
            assert p.addresses[0] == "192.0.2.2/30"  # from netlink inside the host namespace (then fe80::)
            assert {s.source: s.ok for s in topo.sources} == {"netlink": True, "lldp:lldpd": True}
            assert topo.tors[f"leaf-{if_sw}"].mgmt_address == "192.0.2.1"


def test_frames_are_heard_without_lldpd_on_the_host():
    need_root_tools("ip", "lldpd", "lldpcli")
    with two_namespaces() as (ns_sw, ns_host, if_sw, if_host), lldpd_socket_dir() as sockets:
        # auto: no lldpd answers on this socket, so the service listens for frames itself
        cfg = TopologyConfig(lldp="auto", lldpd_socket=sockets / "absent.sock", netns=ns_host)
        service = TopologyService(cfg, Path("/sys"), "gpu-ns")
        try:
            service.refresh()
            assert service.topology([_port(if_host)]).ports[0].tor is None  # nothing heard yet
            sw_sock = sockets / "sw.sock"
            with lldpd(ns_sw, if_sw, sw_sock):
                _configure_switch(sw_sock, f"leaf-{if_sw}")
                placed = wait_for(
                    lambda: (t := service.topology([_port(if_host)])).ports[0].tor == f"leaf-{if_sw}" and t,
                    what="an LLDP frame",
                )
            (p,) = placed.ports
            assert p.tor_port == if_sw and p.neighbors[0].source == "lldp-frames"
            assert "192.0.2.1" in p.neighbors[0].mgmt_addresses
            assert any(s.source == "lldp:frames" and s.ok for s in placed.sources)
        finally:
            service.close()

"""mtu_mismatch with a real lldpd and a real kernel MTU: a "switch" in one namespace sends LLDP frames
carrying the IEEE 802.3 Maximum Frame Size TLV (lldpd itself never sends it, so the switch side is
scapy), lldpd in the host namespace receives them, netd's topology reads lldpd through lldpcli, and the
QoS check compares with the veth's MTU as the kernel reports it. The printed fix, run in the host
namespace, makes the finding go away."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scapy.contrib import lldp as L
from scapy.layers.l2 import Ether

from netd.config.service import TopologyConfig
from netd.model.snapshot import PortSample
from netd.qos.local import local_findings
from netd.qos.service import neighbors_by_netdev
from netd.sources.qos import PortQos
from netd.topology.service import TopologyService
from tests.integration.netns import lldpd, lldpd_socket_dir, need_root_tools, run, two_namespaces, wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]

SWITCH_MFS = 9216


def _switch_frame(mfs: int) -> bytes:
    mfs_tlv = L.LLDPDUGenericOrganisationSpecific(org_code=0x00120F, subtype=4, data=struct.pack("!H", mfs))
    return bytes(
        Ether(dst="01:80:c2:00:00:0e", src="02:00:00:00:00:01")
        / L.LLDPDUChassisID(subtype=4, id=bytes.fromhex("020000000001"))
        / L.LLDPDUPortID(subtype=5, id=b"swp7")
        / L.LLDPDUTimeToLive(ttl=120)
        / L.LLDPDUSystemName(system_name=b"leaf-mfs")
        / mfs_tlv
        / L.LLDPDUEndOfLLDPDU()
    )


def _send(netns: str, ifname: str, frame: bytes) -> None:
    code = (
        "import socket, sys; s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); "
        f"s.bind(({ifname!r}, 0)); s.send(bytes.fromhex(sys.argv[1]))"
    )
    run("ip", "netns", "exec", netns, sys.executable, "-c", code, frame.hex())


def _port_qos(netns: str, ifname: str) -> PortQos:
    """The port as the QoS reader sees it, its MTU from the kernel of the host namespace."""
    (link,) = json.loads(run("ip", "-n", netns, "-j", "link", "show", "dev", ifname))
    return PortQos("mlx5_0", 1, ifname, trust="dscp", mtu=int(link["mtu"]))


def test_a_neighbour_mfs_heard_by_lldpd_against_the_kernel_mtu() -> None:
    need_root_tools("ip", "lldpd", "lldpcli")
    with two_namespaces("nsmfs") as (ns_sw, ns_host, if_sw, if_host), lldpd_socket_dir() as sockets:
        run("ip", "-n", ns_host, "link", "set", "dev", if_host, "mtu", "9200")  # 9218-byte frames
        sock = sockets / "host.sock"
        with lldpd(ns_host, if_host, sock):
            cfg = TopologyConfig(lldp="lldpd", lldpd_socket=sock, netns=ns_host)
            service = TopologyService(cfg, Path("/sys"), "gpu-ns")
            port = PortSample("mlx5_0", 1, if_host, "Ethernet", "ACTIVE", "LinkUp", 100.0)

            def heard():  # type: ignore[no-untyped-def]
                _send(ns_sw, if_sw, _switch_frame(SWITCH_MFS))
                time.sleep(0.1)
                service.refresh()
                topo = service.topology([port])
                return topo if topo.ports[0].neighbors else None

            try:
                topo = wait_for(heard, what="lldpd to hear the switch frame")
            finally:
                service.close()
            (n,) = topo.ports[0].neighbors
            assert (n.switch, n.switch_port, n.max_frame_size, n.source) == (
                "leaf-mfs",
                "swp7",
                9216,
                "lldpd",
            )

            neighbours = neighbors_by_netdev(topo)
            (f,) = local_findings([_port_qos(ns_host, if_host)], neighbors=neighbours)
            assert f.kind == "mtu_mismatch" and "frames of up to 9218 bytes" in f.message
            assert f.fix.startswith(f"ip link set dev {if_host} mtu 9198 ")  # 9216 - 14 - 4
            subprocess.run(
                ["ip", "netns", "exec", ns_host, "sh", "-c", f.fix], check=True
            )  # the fix, as printed
            assert local_findings([_port_qos(ns_host, if_host)], neighbors=neighbours) == []

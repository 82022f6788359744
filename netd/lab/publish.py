"""Render each lab host's agent counters as an mlx5-shaped sysfs tree plus an ``ethtool -S`` capture.

``<lab>/host<i>/`` then looks like a host with one ConnectX port (``mlx5_0`` port 1, netdev ``eth0``),
so ``netd run --sysfs-root <lab>/host<i>`` reads real lab traffic through netd's ordinary sources.
Every value is a count of something the host agent really did (see csrc/lab_host.c); counters with
no lab equivalent stay 0, as on a NIC where that event never happened.
"""

from __future__ import annotations

import os
from pathlib import Path

from netd.emulated.fabric_host import rate_text
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.lab.shm import COUNTER_FIELDS, HostShm
from netd.sources.ethtool import format_ethtool_text

__all__ = ["DEVICE", "NETDEV", "PRIORITY", "HostPublisher", "hw_values", "ethtool_values"]

DEVICE = "mlx5_0"
NETDEV = "eth0"
PRIORITY = 3


def hw_values(c: dict[str, int]) -> dict[str, int]:
    """sysfs counter files (raw mlx5 names) from agent counters. PMA data counts 4-byte words."""
    return {
        "port_xmit_data": c["tx_bytes"] // 4,
        "port_rcv_data": c["rx_bytes"] // 4,
        "port_xmit_packets": c["tx_pkts"],
        "port_rcv_packets": c["rx_pkts"],
        "unicast_xmit_packets": c["tx_pkts"],
        "unicast_rcv_packets": c["rx_pkts"],
        "np_ecn_marked_roce_packets": c["ecn_marked_rx"],
        "np_cnp_sent": c["cnp_sent"],
        "rp_cnp_handled": c["cnp_handled"],
        "rp_cnp_ignored": c["cnp_ignored"],
        "out_of_sequence": c["out_of_sequence"] & 0xFFFFFFFF,  # 32-bit q-counters
        "duplicate_request": c["duplicate_request"] & 0xFFFFFFFF,
        "packet_seq_err": c["packet_seq_err"] & 0xFFFFFFFF,
        "out_of_buffer": c["out_of_buffer"] & 0xFFFFFFFF,
        "local_ack_timeout_err": c["local_ack_timeout_err"] & 0xFFFFFFFF,
        "rx_write_requests": c["rx_data_pkts"] & 0xFFFFFFFF,
    }


def ethtool_values(c: dict[str, int]) -> dict[str, int]:
    p = PRIORITY
    out: dict[str, int] = {}
    for d in ("rx", "tx"):
        out[f"{d}_prio{p}_bytes"] = c[f"{d}_data_bytes"]
        out[f"{d}_prio{p}_packets"] = c[f"{d}_data_pkts"]
        out[f"{d}_vport_rdma_unicast_bytes"] = c[f"{d}_bytes"]
        out[f"{d}_vport_rdma_unicast_packets"] = c[f"{d}_pkts"]
        out[f"{d}_bytes_phy"] = c[f"{d}_bytes"]
        out[f"{d}_packets_phy"] = c[f"{d}_pkts"]
        out[f"{d}_prio{p}_pause"] = c[f"{d}_pause"]
        out[f"{d}_prio{p}_pause_duration"] = c[f"{d}_pause_duration_us"]
        out[f"{d}_pause_ctrl_phy"] = c[f"{d}_pause"]
    out[f"rx_prio{p}_pause_transition"] = c["rx_pause_transition"]
    out["tx_pause_storm_warning_events"] = c["pause_storm_warning"]
    out[f"rx_prio{p}_buf_discard"] = c["out_of_buffer"]
    return out


class HostPublisher:
    """One lab host: its tree, its capture, and the agent memory they are rendered from."""

    def __init__(self, root: Path, shm_path: Path, link_mbps: float) -> None:
        self.root = root
        self.tree = SysfsTree(root)
        self.tree.add_device(
            DeviceSpec(name=DEVICE, driver="mlx5", netdev=NETDEV, rate=rate_text(link_mbps / 1000))
        )
        (root / "ethtool").mkdir(parents=True, exist_ok=True)
        self._names = mlx5_ethtool_names((PRIORITY,))
        self.shm = HostShm(shm_path)
        self._last: dict[str, int] | None = None
        self.publish(force=True)

    def publish(self, force: bool = False) -> bool:
        """Write what changed since the last call; returns whether anything was written."""
        c = self.shm.counters() if self.shm.ready else dict.fromkeys(COUNTER_FIELDS, 0)
        if c == self._last and not force:
            return False
        self.tree.set_counters(DEVICE, 1, hw_values(c))
        stats = dict.fromkeys(self._names, 0)
        stats.update(ethtool_values(c))
        path = self.root / "ethtool" / NETDEV
        tmp = path.with_name(f".{NETDEV}.tmp")
        tmp.write_text(format_ethtool_text(stats))
        os.replace(tmp, path)  # the capture reader notices the new inode; never half-written
        self._last = c
        return True

    def close(self) -> None:
        self.tree.close()
        self.shm.close()

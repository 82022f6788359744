"""A static replayed host for footprint measurements: ``nics`` dual-port mlx5 NICs, counters that tick.

Each NIC is two PCI functions, hence two RDMA devices of one port each (as mlx5 registers them), each
with its netdev and an ``ethtool -S`` capture with PFC on priority 3. :func:`advance` moves every
counter by a calm fabric's amount (no pause), rewriting sysfs files in place as the kernel regenerates
them and replacing captures by rename as a replayer does.
"""

from __future__ import annotations

import os
from pathlib import Path

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.sources.ethtool_text import format_ethtool_text

__all__ = ["StaticHost"]

_PRIORITY = 3
_PACKETS_PER_S = 100_000  # a calm, lightly loaded port
_BYTES_PER_PACKET = 4096


class StaticHost:
    """The tree under ``root``; :meth:`advance` by ``seconds``; :meth:`close` releases the writer."""

    def __init__(self, root: Path, nics: int) -> None:
        self.root = Path(root)
        self.tree = SysfsTree(self.root)
        self.devices: list[tuple[str, str]] = []  # (RDMA device, netdev)
        (self.root / "ethtool").mkdir(parents=True, exist_ok=True)
        self._names = mlx5_ethtool_names((_PRIORITY,))
        self._t = 0.0
        for n in range(nics):
            for f in range(2):
                device, netdev = f"mlx5_{2 * n + f}", f"ens{n + 1}f{f}np{f}"
                pci = f"0000:{0x10 + n:02x}:00.{f}"
                self.tree.add_device(DeviceSpec(device, netdev=netdev, pci=pci))
                self.devices.append((device, netdev))
        self.advance(0.0)

    @property
    def ports(self) -> int:
        return len(self.devices)

    def advance(self, seconds: float) -> None:
        self._t += seconds
        packets = int(self._t * _PACKETS_PER_S)
        hw = {
            "port_rcv_packets": packets,
            "port_xmit_packets": packets,
            "port_rcv_data": packets * _BYTES_PER_PACKET // 4,
            "port_xmit_data": packets * _BYTES_PER_PACKET // 4,
        }
        stats = dict.fromkeys(self._names, 0)
        for direction in ("rx", "tx"):
            stats[f"{direction}_prio{_PRIORITY}_packets"] = packets
            stats[f"{direction}_prio{_PRIORITY}_bytes"] = packets * _BYTES_PER_PACKET
            stats[f"{direction}_vport_rdma_unicast_bytes"] = packets * _BYTES_PER_PACKET
        text = format_ethtool_text(stats)
        for device, netdev in self.devices:
            self.tree.set_counters(device, 1, hw)
            path = self.root / "ethtool" / netdev
            tmp = path.with_name(f".{netdev}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path)

    def close(self) -> None:
        self.tree.close()

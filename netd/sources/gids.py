"""The RoCE GID table of each RDMA port, from sysfs.

``/sys/class/infiniband/<dev>/ports/<p>/gids/<i>`` holds the GID of slot i (all zeros when unused),
``gid_attrs/types/<i>`` its type ("RoCE v2" or "IB/RoCE v1"; reading an empty slot fails with
EINVAL, which the errno policy treats as absent) and ``gid_attrs/ndevs/<i>`` the netdev it belongs to
(a VLAN interface for a VLAN's addresses). RoCE v2 GIDs are what a RoCE v2 QP is addressed by: an
IPv4-mapped or IPv6 address of the port's netdev (or of a VLAN on it).
"""

from __future__ import annotations

from pathlib import Path

from netd.model.topology import Gid
from netd.sources.sysfs_io import list_dir, read_text

__all__ = ["ZERO_GID", "read_gids"]

_SOURCE = "gids"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def read_gids(sysfs_root: Path, device: str, port: int, roce_v2_only: bool = True) -> tuple[Gid, ...]:
    """Populated GID slots of one port, in slot order (RoCE v2 ones only, by default)."""
    port_dir = sysfs_root / "class" / "infiniband" / device / "ports" / str(port)
    out = []
    slots = sorted((n for n in list_dir(port_dir / "gids", _SOURCE) if n.isdigit()), key=int)
    for index in slots:
        gid = read_text(port_dir / "gids" / index, _SOURCE)
        if not gid or gid == ZERO_GID:
            continue
        gid_type = read_text(port_dir / "gid_attrs" / "types" / index, _SOURCE)
        if gid_type is None or (roce_v2_only and gid_type != "RoCE v2"):
            continue
        netdev = read_text(port_dir / "gid_attrs" / "ndevs" / index, _SOURCE) or None
        out.append(Gid(int(index), gid, gid_type, netdev))
    return tuple(out)

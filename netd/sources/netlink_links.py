"""Host-side interfaces from netlink (pyroute2): netdevs, bonds and their members, VLANs, addresses.

One RTM_GETLINK and one RTM_GETADDR dump per refresh (a few ms even on a host with hundreds of
interfaces), optionally inside a named network namespace (the lab's hosts). Only meaningful for the
live host: a captured or emulated tree has netdev names that do not exist here, so the topology
service runs this source only when the sysfs root is ``/sys``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from netd.errors import SourceError
from netd.model.topology import HostInterface

__all__ = ["NetlinkLinks", "interfaces_from_messages"]

_SOURCE = "netlink"
_ZERO_MAC = "00:00:00:00:00:00"


def _kind(msg: Any) -> str:
    info = msg.get("IFLA_LINKINFO")
    kind = info.get("IFLA_INFO_KIND") if info is not None else None
    if kind:
        return str(kind)
    return "loopback" if msg.get("ifname") == "lo" else "physical"


def _vlan_id(msg: Any) -> int | None:
    info = msg.get("IFLA_LINKINFO")
    if info is None or info.get("IFLA_INFO_KIND") != "vlan":
        return None
    data = info.get("IFLA_INFO_DATA")
    vid = data.get("IFLA_VLAN_ID") if data is not None else None
    return int(vid) if vid is not None else None


def interfaces_from_messages(links: Iterable[Any], addrs: Iterable[Any]) -> tuple[HostInterface, ...]:
    """Netlink link and address messages (pyroute2 ifinfmsg/ifaddrmsg) to interface values."""
    links = list(links)
    names = {int(m["index"]): str(m.get("ifname")) for m in links}
    by_index: dict[int, list[str]] = {}
    for a in addrs:
        address = a.get("address") or a.get("local")
        if address:
            by_index.setdefault(int(a["index"]), []).append(f"{address}/{a['prefixlen']}")
    out = []
    for m in links:
        index = int(m["index"])
        kind = _kind(m)
        master = m.get("master")
        link = m.get("link") if kind == "vlan" else None  # a veth's IFLA_LINK is its peer, not a parent
        mac = m.get("address")
        out.append(
            HostInterface(
                name=names[index],
                index=index,
                kind=kind,
                mac=None if mac in (None, _ZERO_MAC) else str(mac),
                mtu=m.get("mtu"),
                oper_state=m.get("operstate"),
                master=names.get(int(master)) if master else None,
                link=names.get(int(link)) if link else None,
                vlan_id=_vlan_id(m),
                addresses=tuple(by_index.get(index, ())),
            )
        )
    return tuple(sorted(out, key=lambda i: i.index))


class NetlinkLinks:
    """Reads the interfaces of this host (or of the network namespace ``netns``)."""

    def __init__(self, netns: str | None = None) -> None:
        self.netns = netns

    def read(self) -> tuple[HostInterface, ...]:
        from pyroute2 import IPRoute  # imported here: only the live host needs it

        try:
            with IPRoute(netns=self.netns) if self.netns else IPRoute() as ipr:
                links = list(ipr.get_links())
                addrs = list(ipr.get_addr())
        except OSError as exc:
            raise SourceError(_SOURCE, f"netlink dump failed: {exc.strerror or exc}") from exc
        return interfaces_from_messages(links, addrs)

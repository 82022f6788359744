"""The emulated fabric's wiring, written where netd's real topology sources look for it.

cc's fabric has ``tors`` ToRs of ``hosts_per_tor`` hosts, every port of a host cabled to its ToR, and
one spine above all ToRs. For each emulated host this writes, beside its sysfs-shaped tree:

* ``lldp.json``: what ``lldpcli -f json show neighbors details`` would print on that host: one
  neighbour per port, its ToR (System Name ``emu-tor<t>``, a SONiC-style port ``Ethernet<4k>``, a
  management address from the documentation range 192.0.2.0/24);
* ``topology.yaml``: the static topology file with the ToR → spine uplinks (LLDP on a host cannot
  see those), in the format of docs/service.md.

netd's topology service reads both through its ordinary file sources (``<sysfs_root>/lldp.json`` and
``<sysfs_root>/topology.yaml``), so ``netd run`` on the emulated fabric places every port under a ToR
and a spine by the same code path as a real host. Rails follow the default convention: port i of
every host (device ``mlx5_<i>``) is on rail i.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

__all__ = ["SPINE", "lldp_document", "render_topology", "tor_name", "topology_document"]

SPINE = "emu-spine0"


def tor_name(tor: int) -> str:
    return f"emu-tor{tor}"


def _tor_mac(tor: int) -> str:
    return f"02:00:5e:00:10:{tor:02x}"  # locally administered


def _tor_address(tor: int) -> str:
    return f"192.0.2.{10 + tor}"


def lldp_document(
    host: int, hosts_per_tor: int, ports_per_host: int, host_name: str, netdevs: list[str]
) -> Any:
    """The ``lldpcli -f json show neighbors details`` document of one emulated host."""
    tor = host // hosts_per_tor
    entries = []
    for p, netdev in enumerate(netdevs):
        switch_port = 4 * ((host % hosts_per_tor) * ports_per_host + p)
        entries.append(
            {
                netdev: {
                    "via": "LLDP",
                    "rid": str(tor + 1),
                    "age": "0 day, 00:00:01",
                    "chassis": {
                        tor_name(tor): {
                            "id": {"type": "mac", "value": _tor_mac(tor)},
                            "descr": "netd emulated ToR (SONiC-style port names)",
                            "mgmt-ip": _tor_address(tor),
                            "capability": [
                                {"type": "Bridge", "enabled": True},
                                {"type": "Router", "enabled": True},
                            ],
                        }
                    },
                    "port": {
                        "id": {"type": "ifname", "value": f"Ethernet{switch_port}"},
                        "descr": f"{host_name}:{netdev}",
                        "ttl": "120",
                    },
                }
            }
        )
    # lldpcli prints one neighbour as an object and several as a list: do the same
    interfaces: Any = entries[0] if len(entries) == 1 else entries
    return {"lldp": {"interface": interfaces} if entries else {}}


def topology_document(tors: int) -> dict[str, Any]:
    return {
        "version": 1,
        "rails": "device_index",
        "spines": [SPINE],
        "tors": {tor_name(t): {"spines": [SPINE], "mgmt_address": _tor_address(t)} for t in range(tors)},
    }


def render_topology(
    root: Path,
    host: int,
    *,
    tors: int,
    hosts_per_tor: int,
    ports_per_host: int,
    host_name: str,
    netdevs: list[str],
) -> None:
    """Write ``lldp.json`` and ``topology.yaml`` into one host's root."""
    doc = lldp_document(host, hosts_per_tor, ports_per_host, host_name, netdevs)
    (root / "lldp.json").write_text(json.dumps(doc, indent=2) + "\n")
    header = "# netd emulated fabric: ToR -> spine uplinks (what LLDP on a host cannot see)\n"
    (root / "topology.yaml").write_text(header + yaml.safe_dump(topology_document(tors), sort_keys=False))

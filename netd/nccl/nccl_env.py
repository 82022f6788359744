"""NCCL environment settings the tuner plugin cannot change, recommended from what netd sees.

NCCL reads its transport settings (``NCCL_IB_*``) before the tuner's init, so the plugin cannot set
them (NVIDIA/nccl#1351): they go in the job's environment or ``/etc/nccl.conf``. Pure: ports,
netdev statistics and GID tables in, a document out. Each setting carries the reason; what netd
cannot see (the switch's DSCP-to-priority map, the NIC's trust mode) is stated as an assumption.

* ``NCCL_IB_HCA``: the active RDMA ports, exact match (``=mlx5_0:1,...``).
* ``NCCL_IB_GID_INDEX``: the RoCE v2 GID holding the netdev's IPv4 address, when it has the same
  index on every port; otherwise ``NCCL_IB_ADDR_FAMILY`` + ``NCCL_IB_ROCE_VERSION_NUM`` let NCCL
  pick per port.
* ``NCCL_IB_SL`` / ``NCCL_IB_TC``: the one PFC-enabled (lossless) priority ``p`` of the RoCE
  netdevs: SL ``p`` (PCP trust) and traffic class ``(8p + 2) << 2`` — DSCP ``8p + 2`` (AF``p``1,
  26 for priority 3) maps to priority ``p`` under the default DSCP map (priority = DSCP >> 3).
* ``NCCL_IB_QPS_PER_CONNECTION``: 4 on RoCE, where ECMP hashes each QP onto one path; more QPs per
  connection spread a collective over more paths.
* ``NCCL_TUNER_PLUGIN`` / ``NETD_TUNER_SOCKET``: the netd tuner plugin and this daemon's socket.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from netd.model.topology import Gid
from netd.series.tracker import Observation
from netd.vocabulary.ethtool_names import parse_signals

__all__ = ["Setting", "recommend", "render"]


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    value: str
    reason: str


def _ipv4_mapped(gid: str) -> bool:
    try:
        return ipaddress.IPv6Address(gid).ipv4_mapped is not None
    except ValueError:
        return False


def _gid_settings(
    roce: list[tuple[str, int, str | None]], gids: Mapping[tuple[str, int], tuple[Gid, ...]]
) -> tuple[list[Setting], list[str]]:
    notes: list[str] = []
    chosen: dict[str, int] = {}
    families = set()
    for device, port, netdev in roce:
        v2 = [g for g in gids.get((device, port), ()) if g.type == "RoCE v2"]
        v4 = [g for g in v2 if _ipv4_mapped(g.gid) and (netdev is None or g.netdev in (None, netdev))]
        if v4:
            chosen[f"{device}:{port}"] = v4[0].index
            families.add("AF_INET")
        elif v2:
            families.add("AF_INET6")
        else:
            notes.append(
                f"{device}:{port} has no RoCE v2 GID: NCCL will fall back to RoCE v1 or fail to connect"
            )
    if not chosen:
        if families:
            fam = "AF_INET6" if families == {"AF_INET6"} else "AF_INET"
            return [
                Setting("NCCL_IB_ADDR_FAMILY", fam, "RoCE v2 GIDs exist only for this address family"),
                Setting("NCCL_IB_ROCE_VERSION_NUM", "2", "select RoCE v2 GIDs"),
            ], notes
        return [], notes
    indices = set(chosen.values())
    if len(indices) == 1 and len(chosen) == len(roce):
        index = indices.pop()
        return [
            Setting(
                "NCCL_IB_GID_INDEX",
                str(index),
                f"the RoCE v2 GID with the netdev's IPv4 address is index {index} on every port",
            )
        ], notes
    where = ", ".join(f"{k}={v}" for k, v in sorted(chosen.items()))
    notes.append(f"the IPv4 RoCE v2 GID index differs between ports ({where}): not pinning NCCL_IB_GID_INDEX")
    return [
        Setting("NCCL_IB_ADDR_FAMILY", "AF_INET", "let NCCL pick the IPv4 RoCE v2 GID on each port"),
        Setting("NCCL_IB_ROCE_VERSION_NUM", "2", "select RoCE v2 GIDs"),
    ], notes


def recommend(
    obs: Observation, gids: Mapping[tuple[str, int], tuple[Gid, ...]], socket_path: str
) -> dict[str, Any]:
    """The recommendation document for this host (``GET /v1/nccl/env``, ``netd nccl-env --json``)."""
    up = [p.sample for p in obs.ports if p.sample.up]
    settings: list[Setting] = [
        Setting(
            "NCCL_TUNER_PLUGIN",
            "netd",
            "load libnccl-tuner-netd.so (congestion-aware, consistent per communicator)",
        ),
        Setting("NETD_TUNER_SOCKET", socket_path, "where this host's netd answers the plugin"),
    ]
    notes: list[str] = []
    if not up:
        notes.append("no active RDMA port: no transport settings to recommend")
    else:
        hca = ",".join(f"{p.device}:{p.port}" for p in sorted(up, key=lambda p: (p.device, p.port)))
        settings.append(Setting("NCCL_IB_HCA", f"={hca}", "the active RDMA ports, matched exactly"))
    roce = [(p.device, p.port, p.netdev) for p in up if p.link_layer == "Ethernet"]
    if roce:
        gid_settings, gid_notes = _gid_settings(roce, gids)
        settings += gid_settings
        notes += gid_notes
        lossless: set[int] = set()
        for _, _, netdev in roce:
            view = obs.netdevs.get(netdev) if netdev else None
            if view is not None:
                lossless.update(parse_signals(view.sample.stats).active_priorities)
        if len(lossless) == 1:
            p = lossless.pop()
            dscp = 8 * p + 2
            settings += [
                Setting(
                    "NCCL_IB_SL",
                    str(p),
                    f"priority {p} is the one PFC-enabled (lossless) priority (PCP trust)",
                ),
                Setting(
                    "NCCL_IB_TC",
                    str(dscp << 2),
                    f"DSCP {dscp} << 2: priority {p} under the default DSCP map "
                    "(DSCP trust; priority = DSCP >> 3)",
                ),
            ]
            notes.append(
                f"NCCL_IB_TC assumes the NICs and switches map DSCP {dscp} to priority {p}; if your QoS map "
                "differs, use the DSCP your fabric assigns to the lossless class"
            )
        elif lossless:
            notes.append(
                f"several PFC-enabled priorities ({sorted(lossless)}): "
                "choose NCCL_IB_TC/SL for the RDMA class"
            )
        else:
            notes.append(
                "no PFC-enabled priority seen: RoCE runs lossy (best effort); NCCL_IB_TC left at its default"
            )
        settings.append(
            Setting(
                "NCCL_IB_QPS_PER_CONNECTION",
                "4",
                "RoCE ECMP hashes each QP to one path: 4 QPs per connection spread load over more paths",
            )
        )
    return {
        "host": obs.snapshot.host,
        "emulated": obs.snapshot.emulated,
        "env": {s.name: s.value for s in settings},
        "details": [{"name": s.name, "value": s.value, "reason": s.reason} for s in settings],
        "notes": notes,
    }


def render(doc: Mapping[str, Any], fmt: str) -> str:
    """``shell`` (export lines with reasons as comments) or ``conf`` (/etc/nccl.conf lines)."""
    lines = [f"# netd nccl-env for {doc['host']}" + (" (EMULATED fabric)" if doc.get("emulated") else "")]
    lines += [f"# note: {n}" for n in doc["notes"]]
    for d in doc["details"]:
        if fmt == "conf" and not d["name"].startswith("NCCL_"):
            continue  # nccl.conf holds NCCL_* variables only; NETD_TUNER_SOCKET goes in the environment
        lines.append(f"# {d['reason']}")
        lines.append(f"export {d['name']}={d['value']}" if fmt == "shell" else f"{d['name']}={d['value']}")
    return "\n".join(lines) + "\n"

"""``netd lab status``: what a lab has, what runs, and what its ports have counted so far."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from netd.errors import LabError
from netd.lab.control import LabClient
from netd.lab.layout import NS_PREFIX, LabLayout
from netd.lab.lldp import lldp_socket, neighbors
from netd.lab.netns import NETNS_DIR, list_netns, pid_alive
from netd.lab.state import LabState, lab_dir

__all__ = ["lab_status", "list_labs", "render_status", "unhealthy"]


def unhealthy(state: LabState) -> list[str]:
    problems = [f"namespace {ns} is missing" for ns in state.namespaces if not (NETNS_DIR / ns).exists()]
    problems += [
        f"{name} (pid {pid}) is not running" for name, pid in state.pids.items() if not pid_alive(pid)
    ]
    return problems


def list_labs(root: Path) -> list[str]:
    names = {p.name for p in root.iterdir() if (p / "lab.json").exists()} if root.is_dir() else set()
    names |= {ns[len(NS_PREFIX) :].rsplit("-", 1)[0] for ns in list_netns(NS_PREFIX)}
    return sorted(names)


def lab_status(root: Path, name: str, lldp: bool = False) -> dict[str, Any]:
    directory = lab_dir(root, name)
    state = LabState.load(directory)
    if state is None:
        leftovers = list_netns(f"{NS_PREFIX}{name}-")
        return {"lab": name, "up": False, "leftover_namespaces": leftovers}
    layout = state.layout
    doc: dict[str, Any] = {
        "lab": name,
        "up": state.complete and not unhealthy(state),
        "complete": state.complete,
        "problems": unhealthy(state),
        "state_dir": str(directory),
        **layout.describe(),
        "pfc": state.pfc,
        "switch": state.switch,
        "buffer_bytes": state.buffer_bytes,
        "processes": {k: {"pid": p, "running": pid_alive(p)} for k, p in sorted(state.pids.items())},
        "hosts_detail": [
            {
                "host": n.name,
                "netns": n.netns,
                "address": layout.host_address(n.index),
                "tor": f"tor{layout.tor_of(n.index)}",
                "sysfs_root": str(directory / f"host{n.index}"),
                "lldp_socket": str(lldp_socket(n)),
            }
            for n in layout.host_nodes
        ],
    }
    if lldp:
        doc["lldp"] = {n.name: _safe(lambda n=n: neighbors(lldp_socket(n))) for n in layout.nodes}
    if doc["up"]:
        try:
            with LabClient(directory, timeout_s=2.0) as client:
                doc["ports"] = _port_summary(layout, client.request("stats"))
        except LabError as exc:
            doc["problems"].append(str(exc))
            doc["up"] = False
    return doc


def _safe(fn: Any) -> Any:
    try:
        return fn()
    except LabError as exc:
        return {"error": str(exc)}


def _port_summary(layout: LabLayout, stats: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in layout.ports:
        s = stats["ports"][str(p.id)]
        row = {
            "node": p.node.name,
            "port": p.ifname,
            "peer": layout.port(p.peer_id).node.name,
            "rate_mbps": p.rate_mbps,
            "rx_pkts": s["in_pkts"],
            "rx_ce": s["in_ce"],
            "rx_cnp": s["in_cnp"],
            "rx_pfc": s["in_pfc"],
        }
        if p.is_switch:
            row |= {
                "tx_offered": s["cp_pkts"],
                "marked": s["cp_marked"],
                "backlog": s["q_backlog"],
                "max_backlog": s["q_max_backlog"],
            }
        out.append(row)
    return out


def render_status(doc: dict[str, Any]) -> str:
    if "hosts_detail" not in doc:
        left = doc.get("leftover_namespaces") or []
        return (
            f"lab {doc['lab']}: not up"
            + (f" (leftover namespaces: {', '.join(left)}; run `netd lab down`)" if left else "")
            + "\n"
        )
    lines = [
        f"lab {doc['lab']}: {'up' if doc['up'] else 'NOT healthy'} — {doc['hosts']} hosts, "
        f"{doc['tors']} ToRs, {doc['link_mbps']:g} Mb/s, PFC {'on' if doc['pfc'] else 'off'}, "
        f"state {doc['state_dir']}"
    ]
    lines += [f"  problem: {p}" for p in doc["problems"]]
    for h in doc["hosts_detail"]:
        lines.append(
            f"  {h['host']} {h['address']} ({h['tor']})  sysfs {h['sysfs_root']}  lldp {h['lldp_socket']}"
        )
    for row in doc.get("ports", []):
        extra = (
            f" offered {row['tx_offered']} marked {row['marked']} backlog {row['backlog']}"
            if "marked" in row
            else ""
        )
        lines.append(
            f"  {row['node']:>6}/{row['port']:<7} -> {row['peer']:<6} rx {row['rx_pkts']} ce {row['rx_ce']} "
            f"cnp {row['rx_cnp']} pfc {row['rx_pfc']}{extra}"
        )
    for node, neigh in doc.get("lldp", {}).items():
        if isinstance(neigh, dict):
            lines.append(f"  lldp {node}: {neigh.get('error')}")
            continue
        seen = ", ".join(f"{n['interface']}->{n['system']}/{n['port']}" for n in neigh) or "no neighbours yet"
        lines.append(f"  lldp {node}: {seen}")
    return "\n".join(lines) + "\n"

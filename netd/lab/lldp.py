"""LLDP between the lab's hosts and switches: one lldpd per namespace, each with its own control socket.

Every node runs ``lldpd -d -u /run/netd/lab-lldp/<netns>.sock -I <its ports>``; after start the lab
names each system ``<lab>-<node>`` (all namespaces share the machine's UTS name otherwise), sets a
1 s transmit interval so neighbours appear within seconds, and describes it. netd's topology
discovery, or a user, reads the neighbours with ``lldpcli -u <socket> show neighbors -f json``.

The control sockets live outside the lab's state directory because Debian's ``lldpcli`` is setuid
``_lldpd``: even run by root it can only reach a socket whose every parent directory is
world-searchable, which a state directory under a private temporary directory is not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from netd.errors import LabError
from netd.lab.layout import LabLayout, Node
from netd.lab.netns import spawn

__all__ = [
    "LLDP_SOCKET_DIR",
    "configure_lldpd",
    "lldp_socket",
    "neighbors",
    "remove_sockets",
    "start_lldpd",
    "write_host_topology",
]

LLDP_SOCKET_DIR = Path("/run/netd/lab-lldp")


def lldp_socket(node: Node) -> Path:
    return LLDP_SOCKET_DIR / f"{node.netns}.sock"


def remove_sockets(netns_prefix: str) -> None:
    for sock in LLDP_SOCKET_DIR.glob(f"{netns_prefix}*.sock") if LLDP_SOCKET_DIR.is_dir() else ():
        sock.unlink(missing_ok=True)


def start_lldpd(layout: LabLayout, node: Node, state_dir: Path) -> int:
    if shutil.which("lldpd") is None:
        raise LabError("lldpd is not installed (apt-get install lldpd, or `make setup`)")
    sock = lldp_socket(node)
    sock.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(sock.parent, 0o755)
    sock.unlink(missing_ok=True)
    ifaces = ",".join(p.ifname for p in layout.ports_of(node))
    descr = f"netd lab {layout.name} {node.kind} {node.name}"
    argv = ["lldpd", "-d", "-u", str(sock), "-I", ifaces, "-S", descr]
    return spawn(argv, state_dir / "log" / f"lldpd-{node.name}.log", netns=node.netns)


def _lldpcli(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["lldpcli", "-u", str(sock), *args], capture_output=True, text=True, timeout=10)


def configure_lldpd(layout: LabLayout, node: Node, timeout_s: float = 10.0) -> None:
    """Wait for the daemon's socket, then set its system name and a fast transmit interval."""
    sock = lldp_socket(node)
    deadline = time.monotonic() + timeout_s
    commands = (
        ("configure", "system", "hostname", f"{layout.name}-{node.name}"),
        ("configure", "lldp", "tx-interval", "1"),
        ("configure", "lldp", "portidsubtype", "ifname"),  # port id = interface name, as switches send
    )
    for cmd in commands:
        while True:
            proc = _lldpcli(sock, *cmd)
            if proc.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise LabError(
                    f"lldpd in {node.netns} did not accept `{' '.join(cmd)}`: {proc.stderr.strip()}"
                )
            time.sleep(0.05)


def neighbors(sock: Path) -> list[dict[str, Any]]:
    """[{"interface", "system", "port", "port_descr", "mgmt_ip"}] as lldpd currently sees them."""
    proc = _lldpcli(sock, "show", "neighbors", "-f", "json")
    if proc.returncode != 0:
        raise LabError(f"lldpcli -u {sock}: {proc.stderr.strip() or 'failed'}")
    doc = json.loads(proc.stdout or "{}")
    ifaces = doc.get("lldp", {}).get("interface", [])
    if isinstance(ifaces, dict):  # lldpcli collapses single-element lists into objects
        ifaces = [{k: v} for k, v in ifaces.items()]
    out = []
    for entry in ifaces:
        for ifname, info in entry.items():
            chassis = info.get("chassis", {})
            (system, details), *_ = chassis.items() if chassis else [("", {})]
            port = info.get("port", {})
            port_id = port.get("id", {})
            mgmt = details.get("mgmt-ip") if isinstance(details, dict) else None
            out.append(
                {
                    "interface": ifname,
                    "system": system,
                    "port": port_id.get("value") if isinstance(port_id, dict) else port_id,
                    "port_descr": port.get("descr"),
                    "mgmt_ip": mgmt[0] if isinstance(mgmt, list) else mgmt,
                }
            )
    return out


def write_host_topology(layout: LabLayout, state_dir: Path, timeout_s: float = 15.0) -> list[str]:
    """Give netd on each lab host what a real host's topology discovery would find: ``lldp.json``
    (its lldpd's ``show neighbors details``, once every host hears its ToR) and ``topology.yaml``
    (the ToR-to-spine uplinks LLDP on a host cannot see), both read by netd from ``--sysfs-root``.
    Returns the hosts whose neighbour did not appear in time (their file is written anyway)."""
    tors = {t.name: t for t in layout.tor_nodes}
    spine = f"{layout.name}-spine" if layout.spine_node else None
    yaml = ["version: 1", "rails: device_index"]
    yaml += [f"spines: [{spine}]"] if spine else []
    yaml.append("tors:")
    for name, node in tors.items():
        uplinks = f"spines: [{spine}], " if spine else ""
        yaml.append(f"  {layout.name}-{name}: {{{uplinks}mgmt_address: 10.77.{node.index + 1}.1}}")
    pending = list(layout.host_nodes)
    deadline = time.monotonic() + timeout_s
    while pending:
        still = []
        for node in pending:
            proc = _lldpcli(lldp_socket(node), "-f", "json", "show", "neighbors", "details")
            root = state_dir / f"host{node.index}"
            (root / "topology.yaml").write_text("\n".join(yaml) + "\n")
            if proc.returncode == 0:
                (root / "lldp.json").write_text(proc.stdout)
            if proc.returncode != 0 or '"chassis"' not in proc.stdout:
                still.append(node)
        pending = still
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    return [n.name for n in pending]

"""``netd bench qos``: wall time of the fabric QoS comparison (the audit `netd fabric` runs) over N hosts.

The hosts' settings are real readings: one emulated host per drift kind (and one healthy) is rendered by
:mod:`netd.emulated.qos_state` and read back by the real source; N hosts are then laid out on ToRs of
32 hosts, every 64th host carrying one drift kind in turn. Only :func:`netd.qos.audit.audit` is timed
(the fastest of ``repeat`` runs). ``findings`` must equal ``drifted`` (the hosts given a drift): the
figure doubles as a check that the audit finds each drifted host once and no other.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from cc.model.params import DcqcnParams
from netd.emulated.cc_params import render as render_cc_params
from netd.emulated.qos_state import DRIFT_KINDS, drifted_params, render_qos
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.errors import BenchError
from netd.qos.audit import PortSettings, audit_ports
from netd.sources.qos import QosSource
from netd.sources.qos_dcb import CapturedDcbReader

__all__ = ["bench_qos", "profiles"]

HOSTS_PER_TOR = 32
DRIFT_EVERY = 64


def profiles(ports_per_host: int) -> dict[str, list[tuple[str, str | None, dict[str, str]]]]:
    """Drift kind ('' for healthy) -> each port's (device, netdev, settings) as the real source reads them."""
    out: dict[str, list[tuple[str, str | None, dict[str, str]]]] = {}
    with tempfile.TemporaryDirectory(prefix="netd-bench-qos-") as tmp:
        for kind in ("", *DRIFT_KINDS):
            root = Path(tmp) / (kind or "healthy")
            with SysfsTree(root) as tree:
                ports = []
                for p in range(ports_per_host):
                    device, netdev = f"mlx5_{p}", f"ens{p}np0"
                    tree.add_device(DeviceSpec(name=device, netdev=netdev, pci=f"0000:{0x41 + p:02x}:00.0"))
                    ports.append((device, netdev))
                    params = drifted_params((kind,), DcqcnParams())
                    render_cc_params(root, f"0000:{0x41 + p:02x}:00.0", params)
                render_qos(root, ports, (kind,) if kind else ())
                out[kind] = [
                    (q.device, q.netdev, q.settings())
                    for q in QosSource(root, CapturedDcbReader(root)).read()
                ]
    return out


def bench_qos(hosts: int = 4096, ports_per_host: int = 2, repeat: int = 5) -> dict[str, Any]:
    if hosts < 1 or not 1 <= ports_per_host <= 8 or not 1 <= repeat <= 50:
        raise BenchError("--hosts must be >= 1, --ports 1..8 and --repeat 1..50")
    by_kind = profiles(ports_per_host)
    kinds = list(DRIFT_KINDS)
    ports: list[PortSettings] = []
    drifted = 0
    for h in range(hosts):
        kind = kinds[(h // DRIFT_EVERY) % len(kinds)] if h % DRIFT_EVERY == DRIFT_EVERY - 1 else ""
        drifted += bool(kind)
        tor = f"tor{h // HOSTS_PER_TOR}"
        for device, netdev, settings in by_kind[kind]:
            ports.append(PortSettings(f"host{h}", tor, device, 1, netdev, settings))
    best = float("inf")
    result = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = audit_ports(ports, scope="tor")
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return {
        "hosts": hosts,
        "findings": len(result.findings),
        "seconds": round(best, 4),
        "ports": len(ports),
        "settings_per_port": len(ports[0].settings) if ports else 0,
        "drifted": drifted,
        "repeat": repeat,
    }

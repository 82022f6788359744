"""`netd bench export`: the cost of turning a large cluster's topology into every export format.

The fabric is rail-optimized, as large GPU clusters are: scalable units of 32 hosts, each host with
8 NICs, NIC i on rail i's ToR of its unit; every rail's ToRs uplinked to that rail's 4 spines. The
timed part is what `netd fabric export` and each publishing round do after the cluster view is
read: the tiers, the Node label patches with Kueue's Topology, the HyperNodes, Slurm's
topology.conf, and the YAML of the two Kubernetes formats.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from netd.config.kube import KubeConfig
from netd.errors import BenchError
from netd.kube.export import export_objects, render
from netd.kube.tiers import fabric_tiers
from netd.model.topology import PortPlacement, Switch, Topology

__all__ = ["bench_export", "rail_optimized", "register_bench"]

UNIT_HOSTS, RAILS, SPINES_PER_RAIL = 32, 8, 4


def rail_optimized(hosts: int) -> Topology:
    ports = []
    tors: dict[str, Switch] = {}
    for h in range(hosts):
        unit = h // UNIT_HOSTS
        for rail in range(RAILS):
            tor = f"su{unit}-rail{rail}"
            if tor not in tors:
                spines = tuple(f"rail{rail}-spine{s}" for s in range(SPINES_PER_RAIL))
                tors[tor] = Switch(tor, "tor", spines=spines, rail=rail)
            ports.append(
                PortPlacement(f"gpu{h:05d}", f"mlx5_{rail}", 1, f"eth{rail}", "ACTIVE", rail=rail, tor=tor)
            )
    above = {name: Switch(name, "spine") for sw in tors.values() for name in sw.spines}
    return Topology(0.0, tuple(f"gpu{h:05d}" for h in range(hosts)), tuple(ports), tors, above)


def bench_export(hosts: int, repeat: int = 3) -> dict[str, Any]:
    if hosts < 1:
        raise BenchError("--hosts must be at least 1")
    topo = rail_optimized(hosts)
    cfg = KubeConfig()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        t = fabric_tiers(topo)
        labels = export_objects(t, cfg, "node-labels")
        hypernodes = export_objects(t, cfg, "hypernodes")
        texts = [render(t, cfg, fmt, "the benchmark") for fmt in ("node-labels", "hypernodes", "slurm")]
        best = min(best, time.perf_counter() - t0)
    return {
        "hosts": hosts,
        "ports": len(topo.ports),
        "hypernodes": len(hypernodes),
        "labels": sum(len(o["metadata"]["labels"]) for o in labels if o["kind"] == "Node"),
        "bytes": sum(len(x) for x in texts),
        "seconds": round(best, 4),
        "repeat": repeat,
    }


def _cmd(args: argparse.Namespace, cfg: object) -> int:
    print(json.dumps(bench_export(args.hosts, args.repeat), indent=2))
    return 0


def register_bench(sub: Any) -> None:
    p = sub.add_parser(
        "export", help="seconds to build every scheduler export of a large rail-optimized cluster"
    )
    p.add_argument("--hosts", type=int, default=4096, help="hosts in the cluster (4096)")
    p.add_argument("--repeat", type=int, default=3, help="runs; the fastest is reported (3)")
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd, needs_config=False)

"""The cluster's topology when there is no Prometheus to read it from: one per-host topology for
every host of the emulated fabric, built by the same sources a real host uses (its sysfs tree,
``lldp.json`` as lldpd would print it, the ``topology.yaml`` uplinks), then merged."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from netd.api.service_view import ClusterSnapshot
from netd.config.settings import Config
from netd.congestion.host import scorer_from_config
from netd.congestion.score import Components
from netd.congestion.scorer import ScoreInput
from netd.emulated.fabric_host import EmulatedFabric
from netd.model.topology import PortPlacement, Switch, Topology, join_names
from netd.sources.collect import Sampler
from netd.topology.service import TopologyService

__all__ = ["emulated_snapshot", "emulated_topology", "merge_topologies"]


def merge_topologies(parts: Iterable[Topology], now: float | None = None) -> Topology:
    """Hosts and ports of every part; a switch seen by several parts keeps the union of its uplinks."""
    hosts: set[str] = set()
    ports: list[PortPlacement] = []
    tors: dict[str, Switch] = {}
    spines: dict[str, Switch] = {}
    warnings: list[str] = []
    for t in parts:
        hosts.update(t.hosts)
        ports.extend(t.ports)
        warnings.extend(t.warnings)
        for name, sw in t.tors.items():
            old = tors.get(name)
            ups = join_names((*(old.spines if old else ()), *sw.spines))
            tors[name] = Switch(name, "tor", tuple(u for u in ups.split("+") if u), sw.rail, sw.mgmt_address)
        spines.update(t.spines)
    return Topology(
        generated_at=time.time() if now is None else now,
        hosts=tuple(sorted(hosts)),
        ports=tuple(ports),
        tors=dict(sorted(tors.items())),
        spines=dict(sorted(spines.items())),
        warnings=tuple(warnings),
    )


def emulated_topology(cfg: Config, state_dir: Path | None = None) -> Topology:
    """Every emulated host's topology (``[emulator]`` sets the fabric's size), merged."""
    e = cfg.emulator
    with tempfile.TemporaryDirectory(prefix="netd-export-") as tmp:
        fabric = EmulatedFabric(
            state_dir or Path(tmp),
            tors=e.tors,
            hosts_per_tor=e.hosts_per_tor,
            ports_per_host=e.ports_per_host,
            link_gbps=e.link_gbps,
            seed=e.seed,
        )
        parts = []
        try:
            for h in range(e.tors * e.hosts_per_tor):
                root, name = fabric.host_root(h), fabric.host_name(h)
                sampler = Sampler.from_config(cfg, root, host=name, emulated=True)
                service = TopologyService(cfg.topology, root, name)
                try:
                    service.refresh()
                    parts.append(service.topology(sampler.collect().ports))
                finally:
                    service.close()
                    sampler.close()
        finally:
            fabric.close()
    return merge_topologies(parts)


def emulated_snapshot(cfg: Config) -> ClusterSnapshot:
    """The emulated fabric as a cluster view: its topology, and each port's link state scored (a
    port not ACTIVE is down, as in the cluster view), so health has something to say."""
    topo = emulated_topology(cfg)
    inputs = [
        ScoreInput(
            host=p.host,
            device=p.device,
            port=p.port,
            components=Components(),
            up=p.state in (None, "ACTIVE"),
            netdev=p.netdev,
            tor=p.tor,
            spine=p.spine,
            rail=p.rail,
        )
        for p in topo.ports
    ]
    report = scorer_from_config(cfg.congestion).update(inputs, topo.generated_at)
    return ClusterSnapshot("fabric", topo.generated_at, True, topo, report)

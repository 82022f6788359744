"""Building the QoS reader and the fabric audit for `netd run` (the composition root calls
:func:`start_qos`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter
from prometheus_client.registry import Collector

from netd.config.settings import Config
from netd.daemon.loop import Daemon
from netd.daemon.state import PublishedState
from netd.emulated.fabric_topology import tor_name
from netd.qos.fabric import FabricQos, from_emulated_trees
from netd.qos.metrics import QosCollector
from netd.qos.routes import fabric_qos_router, qos_router
from netd.qos.service import QosService

__all__ = ["QosParts", "emulated_fabric_qos", "start_qos"]

log = logging.getLogger(__name__)


@dataclass
class QosParts:
    service: QosService | None
    routers: tuple[APIRouter, ...]
    collectors: tuple[Collector, ...]
    banner: str | None

    def close(self) -> None:
        if self.service is not None:
            self.service.close()


def emulated_fabric_qos(cfg: Config, daemon: Daemon) -> FabricQos | None:
    """The audit over every emulated host's trees (None when the daemon reads a real host)."""
    emulator = daemon.emulator
    if emulator is None:
        return None
    e = cfg.emulator
    n_hosts = e.tors * e.hosts_per_tor
    roots = {
        emulator.host_name(h): (emulator.host_root(h), tor_name(h // e.hosts_per_tor)) for h in range(n_hosts)
    }
    return FabricQos(from_emulated_trees(roots), cfg.qos, origin=f"the emulated fabric's {n_hosts} hosts")


def start_qos(
    cfg: Config,
    sysfs_root: Path,
    host: str,
    state: Callable[[], PublishedState | None],
    fabric: FabricQos | None,
) -> QosParts:
    """The running reader, its /v1/qos router (and /v1/qos/fabric when ``fabric`` is given) and metrics."""
    if not cfg.qos.enabled:
        return QosParts(None, (), (), None)
    service = QosService(cfg, sysfs_root, host, state)
    service.start()
    routers = [qos_router(service)]
    if fabric is not None:
        routers.append(fabric_qos_router(fabric))
    missing = sorted({why for p in service.ports for why in p.missing.values()})
    line = f"  QoS: {len(service.ports)} ports read every {cfg.qos.interval:g} s; GET /v1/qos"
    if fabric is not None:
        line += " and /v1/qos/fabric"
    if missing:
        line += f" (not readable: {missing[0]}{'; …' if len(missing) > 1 else ''})"
    return QosParts(service, tuple(routers), (QosCollector(service),), line)

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
from netd.detect.service import Detection
from netd.emulated.fabric_topology import tor_name
from netd.qos.fabric import FabricQos, from_emulated_trees
from netd.qos.metrics import QosCollector
from netd.qos.routes import fabric_qos_router, qos_router
from netd.qos.service import QosService

__all__ = ["QosParts", "emulated_fabric_qos", "start_qos"]

log = logging.getLogger(__name__)


@dataclass
class QosParts:
    """What `netd run` mounts: the reader (None when ``[qos] enabled = false``) and the fabric audit."""

    service: QosService | None
    fabric: FabricQos | None = None

    @property
    def routers(self) -> tuple[APIRouter, ...]:
        if self.service is None:
            return ()
        audit = () if self.fabric is None else (fabric_qos_router(self.fabric),)
        return (qos_router(self.service), *audit)

    @property
    def collectors(self) -> tuple[Collector, ...]:
        return () if self.service is None else (QosCollector(self.service),)

    @property
    def banner(self) -> str | None:
        if self.service is None:
            return None
        s = self.service
        line = f"  QoS: {len(s.ports)} ports read every {s.interval:g} s; GET /v1/qos"
        if self.fabric is not None:
            line += " and /v1/qos/fabric"
        missing = sorted({why for p in s.ports for why in p.missing.values()})
        if missing:
            line += f" (not readable: {missing[0]}{'; …' if len(missing) > 1 else ''})"
        return line

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
    detection: Detection | None = None,
) -> QosParts:
    """The running reader with its /v1/qos (and /v1/qos/fabric when ``fabric`` is given) and metrics;
    its local findings also feed ``detection`` (one anomaly finding each, docs/detection.md)."""
    if not cfg.qos.enabled:
        return QosParts(None)
    service = QosService(cfg, sysfs_root, host, state)
    service.start()
    if detection is not None:
        detection.config = lambda: service.local
    return QosParts(service, fabric)

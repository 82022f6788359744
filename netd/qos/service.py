"""The QoS reader of one host: reads every port's QoS every ``[qos] interval`` and keeps the latest.

QoS changes rarely and ``dcb`` costs four netlink round trips per port, so it is read on its own
slow clock (60 s by default), not per tick; readers (``/v1/qos``, ``/metrics``, ``netd qos``) take the
last document and never touch a device. A read that fails keeps the previous ports and says why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netd.config.settings import Config
from netd.daemon.state import PublishedState
from netd.errors import NetdError
from netd.model.config_finding import ConfigFinding
from netd.model.topology import LldpNeighbor, Topology
from netd.qos.local import local_findings
from netd.sources.qos import PortQos, QosSource
from netd.sources.qos_dcb import make_dcb_reader

__all__ = ["QosService", "build_source", "neighbors_by_netdev"]

log = logging.getLogger(__name__)


def build_source(cfg: Config, sysfs_root: Path) -> QosSource:
    q = cfg.qos
    return QosSource(
        sysfs_root,
        make_dcb_reader(q.backend, sysfs_root, q.dcb_path),
        debugfs_root=q.debugfs_root,
        configfs_root=q.configfs_root,
        include=cfg.rdma.include,
        exclude=cfg.rdma.exclude,
    )


def neighbors_by_netdev(topology: Topology | None) -> dict[str, tuple[LldpNeighbor, ...]]:
    """netdev -> the LLDP neighbours the topology placed on it (a bond's: those heard on its members)."""
    if topology is None:
        return {}
    return {p.netdev: p.neighbors for p in topology.ports if p.netdev and p.neighbors}


class QosService:
    def __init__(
        self,
        cfg: Config,
        sysfs_root: Path,
        host: str,
        state: Callable[[], PublishedState | None] | None = None,
    ) -> None:
        self.host = host
        self.interval = cfg.qos.interval
        self.source = build_source(cfg, sysfs_root)
        self._state = state
        # One reading swapped in by reference (ports, their local findings, wall clock of the read), so a
        # reader on another thread never pairs one read's ports with another's findings.
        self._reading: tuple[tuple[PortQos, ...], tuple[ConfigFinding, ...], float | None] = ((), (), None)
        self.reads = 0
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """Read every port once; on failure keep the previous reading and record why."""
        try:
            ports = self.source.read()
        except NetdError as exc:
            self.errors += 1
            self.last_error = str(exc)
            log.warning("QoS read failed: %s", exc)
            return
        if self.source.errors:  # some ports' DCB state failed to read; the rest is still good
            self.errors += len(self.source.errors)
            log.warning("QoS read: %s", "; ".join(self.source.errors))
        st = self._state() if self._state is not None else None
        bpf = st.observation.snapshot.bpf if st is not None else None
        roce = bpf.roce_classes if bpf is not None else ()
        neighbors = neighbors_by_netdev(st.topology if st is not None else None)
        local = tuple(local_findings(ports, roce, neighbors))
        self._reading = (ports, local, time.time())
        self.reads += 1
        self.last_error = "; ".join(self.source.errors) or None

    def reading(self) -> tuple[tuple[PortQos, ...], tuple[ConfigFinding, ...], float | None]:
        """(ports, local findings, read_at) of one read, consistent with each other."""
        return self._reading

    @property
    def ports(self) -> tuple[PortQos, ...]:
        return self._reading[0]

    @property
    def local(self) -> tuple[ConfigFinding, ...]:
        return self._reading[1]

    @property
    def read_at(self) -> float | None:
        """Wall clock of the last good read (None before the first)."""
        return self._reading[2]

    def document(self) -> dict[str, Any]:
        ports, local, read_at = self.reading()
        return {
            "host": self.host,
            "read_at": read_at,
            "interval_s": self.interval,
            "ports": [p.to_dict() for p in ports],
            "local_findings": [f.to_dict() for f in local],
            "error": self.last_error,
        }

    def start(self) -> None:
        self.refresh()
        self._thread = threading.Thread(target=self._run, name="netd-qos", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

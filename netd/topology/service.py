"""Runs the topology sources on their own cadence and hands the tick a current :class:`Topology`.

LLDP changes when a cable moves, not every second, and asking lldpd costs a process spawn, so the
sources run every ``topology.refresh_interval`` (30 s) in a thread of their own, and the tick only
combines their latest findings with the snapshot's ports (:func:`netd.topology.build.build_topology`,
memoised until either side changes). Which LLDP source runs (``topology.lldp = "auto"``):

* ``topology.lldp_file`` when set (a file of ``lldpcli -f json show neighbors details`` output);
* on a captured or emulated tree (``sysfs_root`` other than ``/sys``): ``<sysfs_root>/lldp.json``;
* on the live host: a running lldpd through ``lldpcli``; without one, listening for LLDP frames on
  the RoCE netdevs (scapy).

The static topology file is ``topology.static_file``, or ``<sysfs_root>/topology.yaml`` on a captured
or emulated tree. Netlink (interfaces, bonds, VLANs, addresses) runs on the live host only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from netd.config.service import TopologyConfig
from netd.errors import NetdError
from netd.model.snapshot import PortSample
from netd.model.topology import HostInterface, LldpNeighbor, SourceNote, StaticFabric, Topology
from netd.sources.gids import read_gids
from netd.sources.lldp_frames import LldpFrameListener
from netd.sources.lldpcli import LldpcliSource, read_lldp_file
from netd.sources.netlink_links import NetlinkLinks
from netd.sources.topology_file import read_topology_file
from netd.topology.build import build_topology

__all__ = ["TopologyInputs", "TopologyService"]

log = logging.getLogger(__name__)
LIVE_ROOT = Path("/sys")


@dataclass(frozen=True, slots=True)
class TopologyInputs:
    version: int
    neighbors: tuple[LldpNeighbor, ...] = ()
    interfaces: tuple[HostInterface, ...] = ()
    static: StaticFabric | None = None
    notes: tuple[SourceNote, ...] = ()


class TopologyService:
    def __init__(
        self, cfg: TopologyConfig, sysfs_root: Path, host: str, clock: Callable[[], float] = time.time
    ) -> None:
        self.cfg = cfg
        self.sysfs_root = sysfs_root
        self.host = host
        self._clock = clock
        self._live = sysfs_root == LIVE_ROOT
        self._lldp_file = cfg.lldp_file or (None if self._live else sysfs_root / "lldp.json")
        self._static_file = cfg.static_file or (None if self._live else sysfs_root / "topology.yaml")
        self._lldpd = LldpcliSource(cfg.lldpcli, cfg.lldpd_socket)
        self._netlink = NetlinkLinks(cfg.netns)
        self._listener: LldpFrameListener | None = None
        self._listen_on: tuple[str, ...] = ()
        self._mode = "off"
        self._inputs = TopologyInputs(0)
        self._netdevs: tuple[str, ...] = ()
        self._memo: tuple[object, Topology] | None = None
        self._lock = threading.Lock()  # refresh() may run from the thread and from start()

    # -- sources ------------------------------------------------------------------------------
    def _lldp_mode(self) -> str:
        mode = self.cfg.lldp
        if mode != "auto":
            return mode
        if self.cfg.lldp_file is not None or not self._live:
            return "file"
        return "lldpd" if self._lldpd.available() else "frames"

    def _read_lldp(self, mode: str, interfaces: Sequence[HostInterface]) -> tuple[LldpNeighbor, ...]:
        if mode == "file":
            if self._lldp_file is None:
                raise NetdError("topology.lldp = 'file' needs topology.lldp_file")
            if self.cfg.lldp_file is None and not self._lldp_file.exists():
                return ()  # a captured tree without LLDP: nothing to say, nothing wrong
            return read_lldp_file(self._lldp_file)
        if mode == "lldpd":
            return self._lldpd.read()
        self._ensure_listener(interfaces)
        return self._listener.neighbors() if self._listener is not None else ()

    def _ensure_listener(self, interfaces: Sequence[HostInterface]) -> None:
        """Listen on the RoCE netdevs, and on a bond's members (LLDP runs per physical port)."""
        members: dict[str, list[str]] = {}
        for i in interfaces:
            if i.master:
                members.setdefault(i.master, []).append(i.name)
        wanted = tuple(sorted({m for n in self._netdevs for m in (members.get(n) or [n])}))
        if wanted == self._listen_on:
            return
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self._listen_on = wanted
        if wanted:
            listener = LldpFrameListener(wanted, netns=self.cfg.netns)
            listener.start()
            self._listener = listener

    def refresh(self) -> TopologyInputs:
        """Run every source once; each one's failure is noted, not raised."""
        with self._lock:
            notes: list[SourceNote] = []
            interfaces: tuple[HostInterface, ...] = ()
            if self._live:
                try:
                    interfaces = self._netlink.read()
                    notes.append(SourceNote("netlink", True, items=len(interfaces)))
                except NetdError as exc:
                    notes.append(SourceNote("netlink", False, str(exc)))
            neighbors: tuple[LldpNeighbor, ...] = ()
            mode = "off"
            try:
                mode = self._mode = self._lldp_mode()
                if mode != "off":
                    neighbors = self._read_lldp(mode, interfaces)
                    where = self._lldp_file if mode == "file" else ", ".join(self._listen_on) or "lldpd"
                    notes.append(SourceNote(f"lldp:{mode}", True, f"from {where}", len(neighbors)))
            except NetdError as exc:
                notes.append(SourceNote(f"lldp:{mode}", False, str(exc)))
            static = None
            if self._static_file is not None and (
                self.cfg.static_file is not None or self._static_file.exists()
            ):
                try:
                    static = read_topology_file(self._static_file)
                    notes.append(SourceNote("topology-file", True, str(self._static_file), len(static.tors)))
                except NetdError as exc:
                    notes.append(SourceNote("topology-file", False, str(exc)))
            for n in notes:
                if not n.ok:
                    log.warning("topology source %s: %s", n.source, n.detail)
            self._inputs = TopologyInputs(
                self._inputs.version + 1, neighbors, interfaces, static, tuple(notes)
            )
            return self._inputs

    # -- for the tick -------------------------------------------------------------------------
    def topology(self, ports: Sequence[PortSample]) -> Topology:
        """The topology for these ports: rebuilt only when the sources or the ports changed."""
        netdevs = tuple(sorted({p.netdev for p in ports if p.netdev}))
        inputs = self._inputs
        if netdevs != self._netdevs:
            self._netdevs = netdevs
            if self._mode == "frames":  # the RoCE netdevs are known only now: listen on them at once
                self.refresh()
                inputs = self._inputs
        neighbors = self._listener.neighbors() if self._listener is not None else inputs.neighbors
        key = (inputs.version, neighbors, tuple((p.device, p.port, p.netdev, p.state) for p in ports))
        memo = self._memo
        if memo is not None and memo[0] == key:
            return memo[1]
        gids = {p.key: read_gids(self.sysfs_root, p.device, p.port) for p in ports}
        topo = build_topology(
            self.host,
            ports,
            neighbors=neighbors,
            interfaces=inputs.interfaces,
            static=inputs.static,
            gids=gids,
            sources=inputs.notes,
            now=self._clock(),
        )
        self._memo = (key, topo)
        return topo

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.cfg.refresh_interval):
            try:
                self.refresh()
            except Exception:  # the service outlives one bad refresh
                log.exception("topology refresh failed")

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

"""The composition root: sources → snapshot → series → publishers, once per tick.

Only this module (and the CLI) moves data between layers (DESIGN §2). The loop
runs in its own thread; the HTTP listener (uvicorn, main thread) reads the
latest published :class:`ExporterState`, an immutable value swapped in by
reference, so readers never see a half-built tick and need no lock.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netd.bpf_wiring import start_bpf
from netd.collect import Collector
from netd.config import Config
from netd.congestion_host import host_inputs, scorer_from_config
from netd.congestion_state import CongestionScorer
from netd.detection import Detection, build_detection, wait_running_fast_path
from netd.emulated.child import EmulatorProcess
from netd.emulated.fabric_host import EmulatedFabric, Emulator, default_state_dir
from netd.exporter import ExporterState
from netd.series import SeriesTracker
from netd.sources.sysfs_io import list_dir
from netd.topology_service import TopologyService

__all__ = ["Daemon", "FabricChoice", "build_daemon", "choose_fabric"]

log = logging.getLogger(__name__)


class Daemon:
    """Runs ticks at a fixed cadence and publishes the latest state."""

    def __init__(
        self,
        collector: Collector,
        interval_s: float,
        emulator: Emulator | None = None,
        clock: Callable[[], float] = time.monotonic,
        topology: TopologyService | None = None,
        scorer: CongestionScorer | None = None,
        detection: Detection | None = None,
        emulator_host: int = 0,
    ) -> None:
        self.collector = collector
        self.detection = detection  # anomaly detection (netd.detection), with its PFC fast path
        self._fast_advanced = 0.0  # emulated seconds the fast path advanced since the last tick
        self.topology = topology
        self.scorer = scorer or CongestionScorer()
        self.interval_s = interval_s
        self.emulator = emulator
        self.emulator_host = emulator_host  # the emulated host whose tree this daemon reads
        self._clock = clock
        self._tracker = SeriesTracker()
        self._errors: Tally[str] = Tally()
        self._ticks = 0
        self._state: ExporterState | None = None
        self.started_at = clock()

    def state(self) -> ExporterState | None:
        return self._state

    def last_tick_age_s(self) -> float | None:
        st = self._state
        return None if st is None else self._clock() - st.observation.snapshot.monotonic

    def _advance_emulator(self, wall_s: float, fast: bool = False) -> None:
        assert self.emulator is not None  # fabric time in proportion to the wall time stepped
        sim_ms = self.emulator.sim_ms_per_tick * wall_s / self.interval_s
        # A fast-path step rewrites only the tree this daemon reads (10x per second for all 8 hosts
        # cost more CPU than the rest of the daemon); every full tick renders every host.
        render = (self.emulator_host,) if fast else None
        self.emulator.advance(wall_s, sim_ms=sim_ms, render=render)

    def fast_tick(self) -> None:
        """One PFC fast-path sample between ticks: pause counters only (docs/detection.md)."""
        st, det = self._state, self.detection
        if st is None or det is None:
            return
        if self.emulator is not None:
            self._advance_emulator(det.fast_interval_s, fast=True)
            self._fast_advanced += det.fast_interval_s
        self._state = dataclasses.replace(st, anomalies=det.fast_sample())

    def tick(self) -> ExporterState:
        if self.emulator is not None:
            self._advance_emulator(max(self.interval_s - self._fast_advanced, 0.0))
            self._fast_advanced = 0.0
        snap = self.collector.collect()
        for s in snap.sources:
            if not s.ok:
                self._errors[s.source] += 1
        obs = self._tracker.update(snap)
        topo = self.topology.topology(snap.ports) if self.topology is not None else None
        anomalies = self.detection.on_observation(obs) if self.detection is not None else None
        congestion = self.scorer.update(host_inputs(obs, topo, anomalies), snap.timestamp)  # storms count
        self._ticks += 1
        self._state = ExporterState(observation=obs, source_errors=dict(self._errors), ticks=self._ticks,
                                    topology=topo, congestion=congestion, anomalies=anomalies)  # fmt: skip
        return self._state

    def run(self, stop: threading.Event) -> None:
        """Tick every interval until ``stop`` is set. Missed deadlines are skipped, not bunched."""
        if self.topology is not None:  # LLDP and friends refresh on their own, slower cadence
            topo = threading.Thread(target=self.topology.run, args=(stop,), name="netd-topology", daemon=True)
            topo.start()
        next_at = self._clock() + self.interval_s
        fast = self.detection.fast_interval_s if self.detection is not None else 0.0
        while not wait_running_fast_path(next_at, fast, stop, self._clock, self.fast_tick):
            try:
                self.tick()
            except Exception:  # the loop outlives any single bad tick
                log.exception("tick failed")
            next_at += self.interval_s
            now = self._clock()
            if next_at < now:  # we fell behind (slow source, suspended VM): realign
                next_at = now + self.interval_s

    def close(self) -> None:
        self.collector.close()
        if self.detection is not None:
            self.detection.close()
        if self.topology is not None:
            self.topology.close()
        if self.emulator is not None:
            self.emulator.close()


class FabricChoice:
    """Which fabric a run uses, and why (for the banner and `netd check`)."""

    def __init__(self, emulated: bool, reason: str) -> None:
        self.emulated = emulated
        self.reason = reason


def choose_fabric(cfg: Config) -> FabricChoice:
    devices = list_dir(cfg.sysfs_root / "class" / "infiniband")
    where = cfg.sysfs_root / "class" / "infiniband"
    if cfg.fabric == "emulated":
        return FabricChoice(True, 'fabric = "emulated" was requested')
    if cfg.fabric == "hardware":
        return FabricChoice(
            False, f'fabric = "hardware" was requested ({len(devices)} RDMA devices in {where})'
        )
    if devices:
        return FabricChoice(False, f"found {len(devices)} RDMA devices in {where}: {', '.join(devices)}")
    return FabricChoice(True, f"no RDMA devices in {where}")


def build_daemon(cfg: Config) -> tuple[Daemon, FabricChoice]:
    choice = choose_fabric(cfg)
    emulator: Emulator | None = None
    root: Path = cfg.sysfs_root
    if choice.emulated:
        e = cfg.emulator
        options: dict[str, Any] = {
            "tors": e.tors,
            "hosts_per_tor": e.hosts_per_tor,
            "ports_per_host": e.ports_per_host,
            "link_gbps": e.link_gbps,
            "seed": e.seed,
            "sim_ms_per_tick": e.sim_ms_per_tick,
        }
        where = e.state_dir or default_state_dir()
        emulator = EmulatedFabric(where, **options) if e.in_process else EmulatorProcess(where, **options)
        root = emulator.host_root(e.host_index)
    host = emulator.host_name(cfg.emulator.host_index) if emulator is not None else None
    collector = Collector.from_config(cfg, root, host=host, emulated=choice.emulated)
    collector.bpf = start_bpf(cfg)  # eBPF probes: attach now, detach in Daemon.close()
    topology = None
    if cfg.topology.enabled:
        topology = TopologyService(cfg.topology, root, collector.host)
        topology.refresh()
    scorer = scorer_from_config(cfg.congestion)
    detection = build_detection(cfg, collector, choice.emulated)
    daemon = Daemon(collector, cfg.interval, emulator, topology=topology, scorer=scorer, detection=detection,
                    emulator_host=cfg.emulator.host_index)  # fmt: skip
    return daemon, choice

"""The composition root: sources → snapshot → series → publishers, once per tick.

Only this module (and the CLI) moves data between layers (docs/architecture.md, Layers). The loop
runs in its own thread; the HTTP listener (uvicorn, main thread) reads the
latest published :class:`PublishedState`, an immutable value swapped in by
reference, so readers never see a half-built tick and need no lock.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from netd.congestion.host import host_inputs
from netd.congestion.scorer import CongestionScorer
from netd.daemon.cadence import MOVERS, CalmCadence, calm, slots_per_calm_tick
from netd.daemon.health import TickRecorder
from netd.daemon.state import PublishedState
from netd.detect.fast_wait import wait_running_fast_path
from netd.detect.pfc import stormed_ports
from netd.detect.service import Detection
from netd.errors import NetdError
from netd.model.snapshot import SourceStatus
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
from netd.topology.service import TopologyService

__all__ = ["Daemon", "Emulator", "freeze_long_lived"]

log = logging.getLogger(__name__)


def freeze_long_lived() -> None:
    """Move every object alive after the first tick (modules, configuration, the counter tracks of
    every port) out of the cyclic garbage collector's reach. A tick allocates thousands of short-lived
    containers, which trigger collections; an oldest-generation collection walked all those
    long-lived objects again, tens of milliseconds a few times a minute (docs/benchmarks.md,
    footprint). Frozen objects are still freed by reference counting; only cycles among them leak,
    and netd's long-lived state has none that it drops.

    The youngest generation is also collected less often: CPython's default collects it every 700
    net allocations, ~30 times in a 16-port tick whose objects are nearly all freed by reference
    counting anyway; every ``YOUNG_THRESHOLD`` cut the tick's CPU by ~15 % (docs/benchmarks.md,
    footprint) for at most that many young objects waiting a little longer."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


YOUNG_THRESHOLD = 20_000  # allocations between two collections of the youngest generation


class Emulator(Protocol):
    """What the daemon drives: an :class:`EmulatedFabric`, or one in a child process
    (:class:`netd.emulated.child.EmulatorProcess`); structural, so the
    loop does not depend on the emulator that implements it."""

    state_dir: Path
    sim_ms_per_tick: float
    elapsed_s: float

    def host_root(self, host: int) -> Path: ...

    def host_name(self, host: int) -> str: ...

    def advance(
        self, wall_s: float, sim_ms: float | None = None, render: Sequence[int] | None = None
    ) -> object:
        """Simulate a slice of fabric time and rewrite the trees (``render``: only these hosts')."""
        ...

    def close(self) -> None: ...


class Daemon:
    """Runs ticks at a fixed cadence and publishes the latest state."""

    def __init__(
        self,
        collector: Sampler,
        interval_s: float,
        emulator: Emulator | None = None,
        clock: Callable[[], float] = time.monotonic,
        topology: TopologyService | None = None,
        scorer: CongestionScorer | None = None,
        detection: Detection | None = None,
        emulator_host: int = 0,
        calm_interval_s: float = 0.0,
    ) -> None:
        self.collector = collector
        self.detection = detection  # anomaly detection (netd.detect.service), with its PFC fast path
        self._fast_advanced = 0.0  # emulated seconds the fast path advanced since the last tick
        self._scheduled_step: float | None = None  # the fast-path interval the loop is waiting out
        self.topology = topology
        self.scorer = scorer or CongestionScorer()
        self.interval_s = interval_s
        # while the host is calm, a tick every this many slots (netd.daemon.cadence)
        self._cadence = CalmCadence(slots_per_calm_tick(interval_s, calm_interval_s))
        self._slots = 1  # tick slots since the last tick (passed-over ones included)
        self.emulator = emulator
        self.emulator_host = emulator_host  # the emulated host whose tree this daemon reads
        self._clock = clock
        self._tracker = SeriesTracker()
        self._errors: Tally[str] = Tally()
        self._emulator_problem: str | None = None  # the last failure logged (logged again only when new)
        self._ticks = 0
        self._health = TickRecorder()
        self._state: PublishedState | None = None
        self.started_at = clock()

    def state(self) -> PublishedState | None:
        return self._state

    @property
    def longest_interval_s(self) -> float:
        """The longest time between two ticks of a loop that keeps up: the calm cadence's."""
        return self.interval_s * self._cadence.slots_per_tick

    def last_tick_age_s(self) -> float | None:
        st = self._state
        return None if st is None else self._clock() - st.observation.snapshot.monotonic

    def _advance_emulator(self, wall_s: float, fast: bool = False) -> SourceStatus:
        """Step the emulated fabric; its failure is a failed source of the tick (its trees are then
        stale), logged once per distinct problem, never a traceback per tick or fast-path sample."""
        assert self.emulator is not None  # fabric time in proportion to the wall time stepped
        sim_ms = self.emulator.sim_ms_per_tick * wall_s / self.interval_s
        # A fast-path step rewrites only the tree this daemon reads (10x per second for all 8 hosts
        # cost more CPU than the rest of the daemon); every full tick renders every host.
        render = (self.emulator_host,) if fast else None
        start = time.monotonic()
        try:
            self.emulator.advance(wall_s, sim_ms=sim_ms, render=render)
        except NetdError as exc:
            if str(exc) != self._emulator_problem:
                log.warning("emulated fabric: %s (its counters are stale until it recovers)", exc)
            self._emulator_problem = str(exc)
            return SourceStatus("emulator", False, time.monotonic() - start, str(exc))
        if self._emulator_problem is not None:
            log.warning("emulated fabric recovered")
            self._emulator_problem = None
        return SourceStatus("emulator", True, time.monotonic() - start)

    def fast_tick(self) -> None:
        """One PFC fast-path sample between ticks: pause counters only (docs/detection.md)."""
        st, det = self._state, self.detection
        if st is None or det is None:
            return
        if self.emulator is not None:
            # the step the loop waited for this sample (adaptive), or the current one when called directly
            step = self._scheduled_step if self._scheduled_step is not None else det.fast_interval_s
            self._scheduled_step = None
            if self._advance_emulator(step, fast=True).ok:
                self._fast_advanced += step
        if det.take_fast_sample():  # a calm sample changes no finding: nothing to republish
            self._state = dataclasses.replace(st, anomalies=det.state())

    def tick(self) -> PublishedState:
        started = self._clock()
        emulator = None
        if self.emulator is not None:
            emulator = self._advance_emulator(max(self.interval_s * self._slots - self._fast_advanced, 0.0))
            self._fast_advanced = 0.0
        snap = self.collector.collect()
        if emulator is not None:
            snap = dataclasses.replace(snap, sources=(*snap.sources, emulator))
        for s in snap.sources:
            if not s.ok:
                self._errors[s.source] += 1
        obs = self._tracker.update(snap)
        topo = self.topology.topology(snap.ports) if self.topology is not None else None
        # Score first (with the storms the detectors hold open, fast path included), then detect on the
        # scorer's levels: "congested" means the same in a finding as in /v1/congestion.
        previous = self._state.anomalies if self._state is not None else None
        congestion = self.scorer.update(host_inputs(obs, topo, stormed_ports(previous)), snap.timestamp)
        anomalies = self.detection.on_observation(obs, congestion) if self.detection is not None else None
        self._ticks += 1
        det = self.detection
        fast = det.state().fast_samples if det is not None and det.fast_interval_s > 0 else None
        done = self._clock()
        self._health.finished(done - started, done, fast)
        before = self._state
        state = PublishedState(
            observation=obs,
            source_errors=dict(self._errors),
            ticks=self._ticks,
            topology=topo,
            congestion=congestion,
            anomalies=anomalies,
            health=self._health.health(),
            counter_events=dict(self._tracker.events),
        )
        self._cadence.ticked(calm(state, before))
        self._health.cadence(self._cadence.stretched)
        self._state = state
        return state

    def run(self, stop: threading.Event) -> None:
        """Tick every interval until ``stop`` is set. Missed deadlines are skipped, not bunched."""
        if self.topology is not None:  # LLDP and friends refresh on their own, slower cadence
            topo = threading.Thread(target=self.topology.run, args=(stop,), name="netd-topology", daemon=True)
            topo.start()
        next_at = self._clock() + self.interval_s
        fast = self._next_fast_step if self.detection is not None else 0.0  # adaptive: asked every sample
        frozen = False
        while not wait_running_fast_path(next_at, fast, stop, self._clock, self.fast_tick):
            if self._cadence.may_pass() and not self._wants_tick():
                self._pass_slot()
            else:
                self._health.started(next_at, self._clock(), self.interval_s)
                try:
                    self.tick()
                except Exception:  # the loop outlives any single bad tick
                    log.exception("tick failed")
                self._slots = 1
                if not frozen:
                    freeze_long_lived()
                    frozen = True
            next_at += self.interval_s
            now = self._clock()
            if next_at < now:  # we fell behind (slow source, suspended VM): realign, count the gap
                self._health.skipped(int((now - next_at) // self.interval_s) + 1)
                next_at = now + self.interval_s

    def _wants_tick(self) -> bool:
        """Whether this slot must tick however calm the last tick was: the detectors want it (pause
        seen by the fast path, a storm being confirmed, a link event), or a congestion or loss
        counter moved (netd.daemon.cadence.MOVERS). Asked only of a slot that may pass; an error
        asking counts as yes."""
        try:
            wants = (
                self.detection is not None and self.detection.wants_tick()
            ) or self.collector.counters_moved(MOVERS)
        except Exception:
            log.exception("asking whether the host is still calm failed; ticking")
            wants = True
        if wants:
            self._cadence.interrupted()
        return wants

    def _pass_slot(self) -> None:
        """A slot passed over while calm: the fast path's sample in the tick's place (its wait left the
        slot to the tick), so pause is looked for as often as when every slot ticks; then the counts
        are published, so they stay live between calm ticks (ticks plus passed slots make one a slot:
        a liveness signal; fast samples)."""
        self._cadence.passed()
        self._health.passed()
        self._slots += 1
        det = self.detection
        if det is not None and det.fast_interval_s > 0:
            try:
                self.fast_tick()
            except Exception:
                log.exception("fast-path sample failed")
        st = self._state
        if st is not None:
            anomalies = det.state() if det is not None else st.anomalies
            self._state = dataclasses.replace(st, health=self._health.health(), anomalies=anomalies)

    def _next_fast_step(self) -> float:
        assert self.detection is not None
        self._scheduled_step = self.detection.fast_interval_s
        return self._scheduled_step

    def close(self) -> None:
        self.collector.close()
        if self.detection is not None:
            self.detection.close()
        if self.topology is not None:
            self.topology.close()
        if self.emulator is not None:
            self.emulator.close()

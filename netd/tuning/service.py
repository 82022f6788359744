"""The daemon's DCQCN tuning: signals from every tick, a tuner decision every ``tuning.interval``, and
(in ``apply`` mode) journaled writes to the NICs.

The service runs beside the loop in its own thread (a decision simulates the tuner's model
situations, about a second of CPU) and reads the loop's published state, so ticks are never delayed.
At start it reads the parameter trees and, if a change set was interrupted by a crash, rolls it back
before anything else. In ``recommend`` mode (the default) it only decides and explains; the latest
recommendation is at ``GET /v1/tuning`` and can be applied on request (``POST /v1/tuning/apply``,
bearer token). In ``apply`` mode, changes and regression rollbacks are written at most once per
``min_apply_interval``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cc.model.params import DcqcnParams
from cc.tune.recommendation import Recommendation
from cc.tune.space import SafetyBounds
from cc.tune.tuner import Tuner
from netd.config.settings import Config
from netd.daemon.state import PublishedState
from netd.errors import ConfigError, NetdError, TuningError
from netd.sources.cc_params import discover
from netd.tuning.applier import Applier, Outcome
from netd.tuning.journal import Journal, recovery_message
from netd.tuning.observe import SignalWindow, host_signals
from netd.tuning.worker import SimulationWorker

__all__ = ["ACTIONS", "TuningService", "params_in_force", "safety_bounds"]

log = logging.getLogger(__name__)

ACTIONS = (
    "hold",
    "change",
    "rollback",
    "applied",
    "apply_failed",
    "apply_refused",
    "rolled_back",
    "crash_recovered",
    "recovery_needed",
)
"""Values of the ``action`` label of netd_tuner_actions_total (docs/tuning.md)."""

_FAILURE_ACTION = {"failed": "apply_failed", "refused": "apply_refused", "recovery-needed": "recovery_needed"}
_NIC_FIELDS = tuple(f.name for f in dataclasses.fields(DcqcnParams) if f.name.startswith(("rp_", "np_")))


def safety_bounds(cfg: Config) -> SafetyBounds:
    try:
        return SafetyBounds(cfg.tuning.bounds, cfg.tuning.freeze)
    except ValueError as exc:
        raise ConfigError(f"[tuning] bounds/freeze: {exc}") from exc


def params_in_force(values: dict[str, int], cfg: Config) -> DcqcnParams:
    """The device's NIC values plus the switch profile from the configuration, as one operating point."""
    nic = {name: values[name] for name in _NIC_FIELDS if name in values}
    t = cfg.tuning
    try:
        return DcqcnParams(
            **nic, kmin_bytes=t.switch_kmin_bytes, kmax_bytes=t.switch_kmax_bytes, pmax=t.switch_pmax
        )
    except ValueError as exc:
        raise TuningError(f"the parameters in force are outside the model's ranges: {exc}") from exc


class TuningService:
    def __init__(
        self,
        cfg: Config,
        sysfs_root: Path,
        state: Callable[[], PublishedState | None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self.mode = cfg.tuning.mode
        self._state = state
        self._clock = clock
        self.bounds = safety_bounds(cfg)
        # the twins run in a child process that exits when idle (netd/tuning/worker.py: the compiled
        # simulator would otherwise add ~120 MB to the daemon for its whole life)
        self.worker = SimulationWorker(idle_exit=max(120.0, 4 * cfg.tuning.interval))
        self.tuner = Tuner(self.bounds, simulate=self.worker)
        trees, self.notes = discover(
            sysfs_root, cfg.tuning.debugfs(sysfs_root), cfg.rdma.include, cfg.rdma.exclude
        )
        self.journal = Journal(cfg.tuning.journal_dir())
        self.applier = Applier(trees, self.journal, dict(self.bounds.bounds))
        self.actions: Counter[str] = Counter({a: 0 for a in ACTIONS})
        self.window = SignalWindow(ticks=max(1, round(cfg.tuning.interval / cfg.interval)))
        self.latest: Recommendation | None = None
        self.last_outcome: Outcome | None = None
        self.error: str | None = None
        self.values: dict[str, dict[str, int]] = {}
        self.recovery: dict[str, Any] | None = None  # the open intent while recovery is needed
        self._last_apply = -float("inf")
        self._last_decision = clock()
        self._last_tick = -1
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        if trees:
            self.recover()
        self._read_values()

    # -- the loop -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.mode == "off" or not self.applier.trees:
            return
        self._thread = threading.Thread(target=self._run, name="netd-tuning", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.worker.close()

    def _run(self) -> None:
        while not self._stop.wait(max(self.cfg.interval / 2, 0.1)):
            try:
                self.step()
            except Exception:  # the daemon outlives a failed decision
                if not self._stop.is_set():  # a decision cut short by shutdown is not a failure
                    log.exception("tuning decision failed")

    def step(self) -> Recommendation | None:
        """Take the newest tick's signals; decide when ``tuning.interval`` has passed."""
        st = self._state()
        if st is not None and st.ticks != self._last_tick:
            self._last_tick = st.ticks
            self.window.add(host_signals(st.observation))
        if self._clock() - self._last_decision < self.cfg.tuning.interval:
            return None
        return self.decide()

    def decide(self) -> Recommendation | None:
        signals = self.window.value()
        self._last_decision = self._clock()
        self.window.clear()
        if self.recovery is not None:
            self.recover()
        self._read_values()
        if signals is None or not self.values:
            return None
        try:
            in_force = params_in_force(next(iter(self.values.values())), self.cfg)
        except TuningError as exc:
            self.error = str(exc)
            return None
        rec = self.tuner.observe(signals, in_force)
        with self._lock:
            self.latest = rec
            self.error = None
        self.actions[rec.action] += 1
        if self.mode == "apply" and rec.action != "hold" and rec.nic_changes:
            if self._clock() - self._last_apply >= self.cfg.tuning.min_apply_interval:
                self.apply_latest(source="daemon")
        return rec

    # -- applying -------------------------------------------------------------------------------
    def recover(self) -> Outcome | None:
        """Close a change set left open by a crash or a failed undo (at start, then before every
        decision while one is open, and on ``POST /v1/tuning/rollback``)."""
        try:
            outcome = self.applier.recover()
        except TuningError as exc:  # locked by another netd, or an unreadable intent
            self.error = str(exc)
            return None
        if outcome is not None:
            self.last_outcome = outcome
            if outcome.state == "recovered":
                self.actions["crash_recovered"] += 1
                log.warning("tuning: open change set %s rolled back", outcome.txid)
            elif self.recovery is None or self.recovery["txid"] != outcome.txid:  # once per set
                self.actions["recovery_needed"] += 1
                log.error("tuning: change set %s: recovery needed: %s", outcome.txid, outcome.error)
        return outcome

    def apply_latest(self, source: str) -> Outcome:
        with self._lock:
            rec = self.latest
        if rec is None or rec.action == "hold" or not rec.nic_changes:
            return Outcome("nothing", error="the latest recommendation changes no NIC parameter")
        target = {c.name: int(c.proposed) for c in rec.nic_changes}
        outcome = self.applier.apply(
            self.applier.plan(target), source=source, reason=rec.action + ": " + "; ".join(rec.reasons[:2])
        )
        self._record(outcome, "applied")
        return outcome

    def rollback(self, source: str) -> Outcome:
        """Close an open change set if there is one (that is the rollback); else undo the newest."""
        outcome = self.recover() if self.recovery is not None else None
        if outcome is None:
            outcome = self.applier.rollback(source=source)
            self._record(outcome, "rolled_back")
        else:
            self._read_values()
        return outcome

    def _record(self, outcome: Outcome, success: str) -> None:
        self.last_outcome = outcome
        if outcome.state == "applied":
            self.actions[success] += 1
            self._last_apply = self._clock()
        elif outcome.state in ("failed", "refused", "recovery-needed"):
            self.actions[_FAILURE_ACTION[outcome.state]] += 1
        self._read_values()

    def _read_values(self) -> None:
        try:
            self.values = self.applier.in_force()
            self.recovery = self.applier.journal.pending()
        except NetdError as exc:
            self.error = str(exc)

    # -- reporting ------------------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        with self._lock:
            rec = self.latest
        return {
            "mode": self.mode,
            "devices": [
                {"device": t.device, "tree": t.kind, "path": str(t.path)} for t in self.applier.trees
            ],
            "notes": self.notes,
            "in_force": self.values,
            "recommendation": None if rec is None else {**rec.to_dict(), "explanation": rec.explain()},
            "last_outcome": None if self.last_outcome is None else self.last_outcome.to_dict(),
            "actions": dict(self.actions),
            "recovery_needed": _recovery_doc(self.recovery),
            "error": self.error,
        }


def _recovery_doc(pending: dict[str, Any] | None) -> dict[str, Any] | None:
    if pending is None:
        return None
    return {
        "txid": pending["txid"],
        "devices": sorted({w.device for w in pending["writes"]}),
        "writes": [dataclasses.asdict(w) for w in pending["writes"]],
        "error": pending.get("recovery_error"),
        "message": recovery_message(pending),
    }

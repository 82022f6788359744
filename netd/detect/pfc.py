"""PFC storms, with the semantics of SONiC's PFC watchdog, and the NIC's own pause-storm events.

``pfc_storm`` (per port and priority, the *stormed* side): the priority keeps receiving pause — the
pause duration covers at least ``pfc_pause_fraction`` of the sample and new pause frames arrive —
while its transmit makes no progress (``tx_prio<p>_packets`` does not move), for a run of samples
adding up to ``pfc_detection_time`` of real elapsed time (SONiC's countdown, charged per poll). It
is restored after ``pfc_restoration_time`` of samples that no longer qualify. SONiC restores only
when pause frames stop altogether; netd only alerts (it never drops), so a priority that transmits
again under lighter pause counts as restored too, and is then a congestion/spreading matter.

``pause_storm`` (per port, the *storming* side: a stuck receiver): this port's NIC keeps sending pause
to its peer (``tx_prio<p>_pause_duration`` ≥ the same fraction for the detection time), or the NIC
counted its own storm-prevention events (``tx_pause_storm_warning_events``: past the minor stall
watermark; ``tx_pause_storm_error_events``: past the critical one, after which mlx5 stops pausing
and drops). An event keeps the finding open for ``pause_storm_event_hold`` seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.base import judgeable, port_scope, prune, ratio
from netd.detect.findings import AnomalyState, Candidate, Severity
from netd.detect.inputs import DetectInput, InputPath, PortInput, PriorityCounters

__all__ = ["KIND_PAUSE_STORM", "KIND_PFC_STORM", "PfcStormDetector", "stormed_ports"]

KIND_PFC_STORM = "pfc_storm"
KIND_PAUSE_STORM = "pause_storm"
_EPS = 1e-9


@dataclass(slots=True)
class _Countdown:
    """One watchdog: time charged towards detection, then (once stormed) towards restoration."""

    charged_s: float = 0.0
    stormed: bool = False
    quiet_s: float = 0.0
    # Pause time of the last sample that did not qualify because the pause covered too little of it
    # (new pause frames arrived: a storm's onset sample), charged with the next sample if that one
    # qualifies. The onset sample's pause happened; dropping it made detection wait one whole
    # qualifying sample after the onset was seen. A sample that was paused enough but transmitted
    # is an interruption, not an onset: it leaves no lead.
    lead_s: float = 0.0
    onset: bool = False  # lead_s came from the first paused sample after a pause-free one
    paused: bool = False  # the last sample saw pause
    evidence: dict[str, Any] = field(default_factory=dict)

    def step(
        self, qualifies: bool | None, dt: float, cfg: DetectConfig, paused: bool = False, lead_s: float = 0.0
    ) -> None:
        """``paused``: the sample saw new pause; ``lead_s``: its pause time when it saw some but too
        little to qualify (the onset candidate)."""
        if qualifies is None:  # unknown (a counter reset, a missing stat): neither charge nor clear
            return
        paused_before, self.paused = self.paused, paused
        if self.stormed:
            self.quiet_s = 0.0 if qualifies else self.quiet_s + dt
            if self.quiet_s >= cfg.pfc_restoration_time - _EPS:
                self.stormed, self.charged_s, self.quiet_s = False, 0.0, 0.0
            return
        if qualifies:
            self.charged_s = (self.charged_s or self.lead_s) + dt
            self.lead_s, self.onset = 0.0, False
        else:
            self.charged_s, self.lead_s = 0.0, min(max(lead_s, 0.0), dt)
            self.onset = self.lead_s > 0 and not paused_before
        if self.charged_s >= cfg.pfc_detection_time - _EPS:
            self.stormed, self.quiet_s = True, 0.0

    def confirm_in(self, cfg: DetectConfig) -> float | None:
        """Seconds of qualifying samples still needed to declare a storm, or None when nothing is
        pending: no charge and no fresh onset (a port under sustained partial pause has a lead every
        sample and must not pull the fast path faster than its interval), or already stormed."""
        held = self.charged_s or (self.lead_s if self.onset else 0.0)
        if self.stormed or held <= 0:
            return None
        return cfg.pfc_detection_time - held


def _pause(
    frames: float | None, us: float | None, frac: float | None, cfg: DetectConfig
) -> tuple[bool, float]:
    """(new pause seen, its seconds when it covered less than ``pfc_pause_fraction``: a lead)."""
    if not (frames and us):
        return False, 0.0
    return True, (us / 1e6 if frac is not None and frac < cfg.pfc_pause_fraction else 0.0)


def _fraction(us: float | None, dt: float) -> float | None:
    f = ratio(us, dt * 1e6)
    return None if f is None else min(max(f, 0.0), 1.0)


class PfcStormDetector:
    kinds: tuple[str, ...] = (KIND_PFC_STORM, KIND_PAUSE_STORM)

    def __init__(self, cfg: DetectConfig) -> None:
        self.cfg = cfg
        self._rx: dict[tuple[str, int, int], _Countdown] = {}  # (device, port, priority)
        self._tx: dict[tuple[str, int, int], _Countdown] = {}
        self._events: dict[tuple[str, int], dict[str, Any]] = {}  # NIC storm events, last seen
        self._ports: dict[tuple[str, int], PortInput] = {}

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        if inp.path is InputPath.TICK:  # ticks say which ports exist; PFC samples may miss a netdev
            present = [p.key for p in inp.ports]
            for state in (self._rx, self._tx, self._events, self._ports):
                prune(state, present)
        elif judgeable(inp, self.cfg):
            assert inp.interval_s is not None
            for p in inp.ports:
                self._ports[p.key] = p
                self._step(p, inp.interval_s, inp.monotonic)
        return self._candidates(inp)

    def at_rest(self) -> bool:
        """No countdown charged or stormed and no NIC storm event held: a PFC sample without any
        pause cannot change this detector's findings (the fast path's calm test)."""
        if self._events:
            return False
        return not any(
            cd.stormed or cd.charged_s or cd.lead_s for cd in (*self._rx.values(), *self._tx.values())
        )

    def confirm_in(self) -> float | None:
        """The shortest time after which a sample could complete some pending countdown (None:
        nothing pending): the fast path takes its next sample then, not a whole interval later."""
        pending = [cd.confirm_in(self.cfg) for cd in (*self._rx.values(), *self._tx.values())]
        return min((t for t in pending if t is not None), default=None)

    def _step(self, p: PortInput, dt: float, now: float) -> None:
        cfg = self.cfg
        for pc in p.priorities:
            key = (p.device, p.port, pc.priority)
            rx = self._rx.setdefault(key, _Countdown())
            rx_frac = _fraction(pc.rx_pause_us, dt)
            rx.step(
                self._stormed_rx(pc, rx_frac),
                dt,
                cfg,
                *_pause(pc.rx_pause_frames, pc.rx_pause_us, rx_frac, cfg),
            )
            if rx_frac is not None and rx_frac >= cfg.pfc_pause_fraction:
                rx.evidence = {
                    "interval_s": round(dt, 4),
                    "rx_pause_frames": pc.rx_pause_frames,
                    "rx_pause_us": pc.rx_pause_us,
                    "rx_pause_fraction": round(rx_frac, 4),
                    "tx_packets": pc.tx_packets,
                    "stormed_s": round(rx.charged_s, 3),
                }
            tx = self._tx.setdefault(key, _Countdown())
            tx_frac = _fraction(pc.tx_pause_us, dt)
            qualifies = (
                None if tx_frac is None else (tx_frac >= cfg.pfc_pause_fraction and pc.tx_pause_frames != 0)
            )
            tx.step(qualifies, dt, cfg, *_pause(pc.tx_pause_frames, pc.tx_pause_us, tx_frac, cfg))
            if qualifies:
                tx.evidence = {
                    "interval_s": round(dt, 4),
                    "tx_pause_frames": pc.tx_pause_frames,
                    "tx_pause_us": pc.tx_pause_us,
                    "tx_pause_fraction": round(tx_frac or 0.0, 4),
                    "rx_packets": pc.rx_packets,
                    "storming_s": round(tx.charged_s, 3),
                }
        warn, err = p.storm_warning_events or 0.0, p.storm_error_events or 0.0
        if warn > 0 or err > 0:
            ev = self._events.setdefault(p.key, {"warning_events": 0.0, "error_events": 0.0})
            ev["warning_events"] += warn
            ev["error_events"] += err
            ev["last"] = now
        ev_state = self._events.get(p.key)
        if ev_state is not None and now - ev_state["last"] >= cfg.pause_storm_event_hold:
            del self._events[p.key]

    def _stormed_rx(self, pc: PriorityCounters, frac: float | None) -> bool | None:
        """SONiC's test: pause covers the sample, new pause frames arrived, nothing was transmitted."""
        if frac is None:
            return None
        progress = pc.tx_packets is not None and pc.tx_packets > self.cfg.pfc_tx_progress_packets
        return frac >= self.cfg.pfc_pause_fraction and pc.rx_pause_frames != 0 and not progress

    def _candidates(self, inp: DetectInput) -> list[Candidate]:
        out: list[Candidate] = []
        for (device, port, prio), cd in self._rx.items():
            p = self._ports.get((device, port))
            if cd.stormed and p is not None:
                out.append(self._storm_candidate(inp.host, p, prio, cd))
        for key, p in self._ports.items():
            storming = {prio: cd for (d, n, prio), cd in self._tx.items() if (d, n) == key and cd.stormed}
            events = self._events.get(key)
            if storming or events:
                out.append(self._pause_candidate(inp.host, p, storming, events))
        return out

    def _storm_candidate(self, host: str, p: PortInput, prio: int, cd: _Countdown) -> Candidate:
        ev = dict(cd.evidence)
        ev.update(
            detection_time_s=self.cfg.pfc_detection_time,
            pause_fraction_threshold=self.cfg.pfc_pause_fraction,
            restoring_s=round(cd.quiet_s, 3),
        )
        frac = ev.get("rx_pause_fraction", 1.0)
        text = (
            f"{p.device}/{p.port} prio {prio} is paused {frac:.0%} of the time and sends nothing: "
            "a PFC storm (SONiC watchdog: stormed), most likely a stuck receiver or PFC deadlock "
            f"downstream; first check which peer sends the pause (tx_prio{prio}_pause on the hosts "
            "behind this ToR, `show pfcwd stats` on the switch)"
        )
        return Candidate(KIND_PFC_STORM, port_scope(host, p, prio), Severity.CRITICAL, text, ev)

    def _pause_candidate(
        self, host: str, p: PortInput, storming: dict[int, _Countdown], events: dict[str, Any] | None
    ) -> Candidate:
        ev: dict[str, Any] = {f"prio{prio}": dict(cd.evidence) for prio, cd in sorted(storming.items())}
        errors = 0.0
        if events is not None:
            errors = events["error_events"]
            ev.update(storm_warning_events=events["warning_events"], storm_error_events=errors)
        severity = Severity.CRITICAL if storming or errors > 0 else Severity.WARNING
        how = (
            f"keeps pausing its peer on prio {', '.join(map(str, sorted(storming)))}"
            if storming
            else "counted pause-storm prevention events (tx_pause_storm_*)"
        )
        text = (
            f"{p.device}/{p.port}'s NIC {how}: this host is a stuck receiver (not draining its receive "
            "queues) and is spreading a PFC storm into the fabric; first check the host: PCIe errors and "
            "stalls (outbound_pci_stalled_*), a hung application or driver, `ethtool --show-tunable "
            f"{p.netdev or '<netdev>'} pfc-prevention-tout`"
        )
        return Candidate(KIND_PAUSE_STORM, port_scope(host, p), severity, text, ev)


def stormed_ports(state: AnomalyState | None) -> set[tuple[str | None, int | None]]:
    """(device, port) of every port with an open PFC-storm or pause-storm finding: the congestion
    scorer counts a port the detectors hold stormed (netd.congestion.host)."""
    if state is None:
        return set()
    storms = (KIND_PFC_STORM, KIND_PAUSE_STORM)
    return {(f.scope.device, f.scope.port) for f in state.active if f.kind in storms}

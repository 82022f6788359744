"""Congestion spreading: a port paused hard by its switch while its own traffic is barely marked.

PFC stops a whole priority of a link, so congestion at one switch queue backs up into ports whose
own flows go elsewhere (head-of-line blocking). Such a port is a *victim*, not a source: it is paused
(``rx_prio<p>_pause_duration`` ≥ ``spreading_pause_fraction`` of the tick) while its own congestion
signals stay low — CE fraction of what it receives ≤ ``spreading_max_ce_fraction`` and CNPs handled
per packet it sends ≤ ``spreading_max_cnp_per_packet`` (a sender *into* the congestion gets CNPs for
its flows) — and it still transmits (a priority that sends nothing is a PFC storm, not spreading).
Entered on the first such tick; left after ``spreading_exit_ticks`` ticks without it.

A tick that contains the edge of a PFC storm looks the same in aggregate (part of the second paused
solid, the rest transmitting), so the detector also watches the PFC samples between ticks: a tick in
which any sample was *stormy* (paused ≥ ``pfc_pause_fraction`` and nothing sent) neither opens nor
clears a victim finding. Without the fast path there are no such samples and the guard is inert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from netd.config.detect import DetectConfig
from netd.detect.base import PerPortDetector, judgeable, port_scope, ratio
from netd.detect.findings import Candidate, Severity
from netd.detect.inputs import DetectInput, InputPath, PortInput, PriorityCounters

__all__ = ["KIND_SPREADING", "SpreadingDetector"]

KIND_SPREADING = "congestion_spreading"
_CRITICAL_PAUSE = 0.5  # paused half the time or more: the victim has lost half its bandwidth


@dataclass(slots=True)
class _Victim:
    active: bool = False
    clear: int = 0
    evidence: dict[str, Any] | None = None


class SpreadingDetector(PerPortDetector[tuple[str, int, int], _Victim]):
    kinds: tuple[str, ...] = (KIND_SPREADING,)

    def __init__(self, cfg: DetectConfig) -> None:
        super().__init__(cfg)
        self._stormy: set[tuple[str, int, int]] = set()  # stormy PFC samples since the last tick

    def evaluate(self, inp: DetectInput) -> list[Candidate]:
        if inp.path is InputPath.PFC and judgeable(inp, self.cfg):
            assert inp.interval_s is not None
            self._note_stormy(inp.ports, inp.interval_s)
        return super().evaluate(inp)

    def _tick(self, inp: DetectInput) -> None:
        super()._tick(inp)
        self._stormy.clear()

    def _note_stormy(self, ports: tuple[PortInput, ...], dt: float) -> None:
        cfg = self.cfg
        for p in ports:
            for pc in p.priorities:
                pause = ratio(pc.rx_pause_us, dt * 1e6)
                idle = pc.tx_packets is not None and pc.tx_packets <= cfg.pfc_tx_progress_packets
                if pause is not None and pause >= cfg.pfc_pause_fraction and idle:
                    self._stormy.add((p.device, p.port, pc.priority))

    def victim_evidence(self, p: PortInput, pc: PriorityCounters, dt: float) -> dict[str, Any] | None:
        """The evidence when this tick shows the victim signature, else None."""
        cfg = self.cfg
        pause = ratio(pc.rx_pause_us, dt * 1e6)
        if pause is None or pause < cfg.spreading_pause_fraction:
            return None
        ce = ratio(p.counter("ecn_marked"), p.counter("rx_packets")) or 0.0
        sent = pc.tx_packets if pc.tx_packets is not None else p.counter("tx_packets")
        handled = ratio(p.counter("cnp_handled"), sent) or 0.0
        if ce > cfg.spreading_max_ce_fraction or handled > cfg.spreading_max_cnp_per_packet:
            return None  # its own flows are marked: part of the congestion, not a bystander
        if not sent:
            return None  # nothing transmitted at all: the PFC storm detector's case
        return {
            "interval_s": round(dt, 3),
            "rx_pause_fraction": round(min(pause, 1.0), 4),
            "rx_pause_frames": pc.rx_pause_frames,
            "tx_packets": sent,
            "ce_fraction": round(ce, 6),
            "cnp_handled_per_packet": round(handled, 6),
            "pause_fraction_threshold": cfg.spreading_pause_fraction,
        }

    def _step(self, p: PortInput, dt: float) -> None:
        for pc in p.priorities:
            key = (p.device, p.port, pc.priority)
            st = self._state.setdefault(key, _Victim())
            if key in self._stormy:
                continue  # a storm's edge inside this tick: ambiguous, judge the next one
            ev = self.victim_evidence(p, pc, dt)
            if ev is not None:
                st.active, st.clear, st.evidence = True, 0, ev
            elif st.active:
                st.clear += 1
                if st.clear >= self.cfg.spreading_exit_ticks:
                    st.active, st.clear, st.evidence = False, 0, None

    def _finding(self, host: str, p: PortInput, key: tuple[str, int, int], st: _Victim) -> Candidate | None:
        ev = st.evidence
        if not st.active or ev is None:
            return None
        device, port, prio = key
        severity = Severity.CRITICAL if ev["rx_pause_fraction"] >= _CRITICAL_PAUSE else Severity.WARNING
        text = (
            f"{device}/{port} prio {prio} is paused {ev['rx_pause_fraction']:.0%} of the time while its "
            f"own traffic is barely marked (CE {ev['ce_fraction']:.2%}): a victim of congestion "
            "spreading (PFC head-of-line blocking from congestion elsewhere), not its source; first "
            "check the congested port upstream: congestion findings on hosts behind the same ToR/spine "
            "and the switch's pause counters"
        )
        return Candidate(KIND_SPREADING, port_scope(host, p, prio), severity, text, ev)

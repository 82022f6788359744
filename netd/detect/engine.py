"""The engine: runs every detector on each input and keeps findings through their lifecycle.

Lifecycle, by ``(kind, scope)`` so that one anomaly is one finding however often it is reported:

* **opened** — a detector reports a key that has no open finding; counted in the totals;
* **escalated** / **deescalated** — its severity changed (each severity a finding reaches is counted
  once); otherwise each report just refreshes evidence and last-seen time (``updates``);
* **resolved** — its detector no longer reports it: ``cleared``, ``port disappeared`` (a tick without
  the port), or ``superseded by <kind>`` (a more specific finding on the same port explains it);
* **reopened** — the same key returns within ``reopen_window`` seconds of resolving: the same finding
  (same id) comes back instead of a new one, so a flapping condition does not inflate the totals.

Suppression (deduplication across kinds): a PFC storm explains the pause that looks like spreading; a
NIC pause storm explains receive-side congestion; a link that is down explains its flaps and stalled
counters; congestion explains a CNP baseline shift (from the scorer's first tick at the level).

Wall times are anchored at the evaluation that opened a finding and advanced by the monotonic clock,
so a stepped wall clock never makes a finding end before it started. The engine does no I/O: the
runtime logs the events it returns and publishes :meth:`state`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Collection, Sequence
from types import MappingProxyType

from netd.config.detect import DetectConfig
from netd.detect.base import Detector
from netd.detect.baseline import KIND_BASELINE, BaselineDetector
from netd.detect.config import ConfigDetector
from netd.detect.congestion import KIND_CONGESTION, CongestionDetector, congested_ports
from netd.detect.counters import KIND_STALLED, CounterHealthDetector
from netd.detect.findings import AnomalyState, Candidate, Finding, FindingEvent, Scope, Severity
from netd.detect.inputs import DetectInput, InputPath
from netd.detect.link import KIND_LINK_DOWN, KIND_LINK_FLAP, LinkDetector
from netd.detect.loss import LossDetector
from netd.detect.pfc import KIND_PAUSE_STORM, KIND_PFC_STORM, PfcStormDetector
from netd.detect.spreading import KIND_SPREADING, SpreadingDetector
from netd.model.snapshot import frozen_map

__all__ = ["SUPPRESSES", "DetectionEngine", "default_detectors"]

Key = tuple[str, Scope]

SUPPRESSES: dict[str, tuple[str, ...]] = {
    KIND_PFC_STORM: (KIND_SPREADING,),
    KIND_PAUSE_STORM: (KIND_CONGESTION,),
    KIND_LINK_DOWN: (KIND_LINK_FLAP, KIND_STALLED),
    KIND_CONGESTION: (KIND_BASELINE,),
}


def default_detectors(cfg: DetectConfig) -> list[Detector]:
    return [
        PfcStormDetector(cfg),
        CongestionDetector(cfg),
        SpreadingDetector(cfg),
        LossDetector(cfg),
        LinkDetector(cfg),
        CounterHealthDetector(cfg),
        BaselineDetector(cfg),
        ConfigDetector(cfg),
    ]


def _explains(by: Scope, other: Scope) -> bool:
    same_port = (by.host, by.device, by.port) == (other.host, other.device, other.port)
    return same_port and (by.priority is None or other.priority is None or by.priority == other.priority)


def suppress(
    candidates: list[Candidate], congested: Collection[tuple[str, int]] = ()
) -> tuple[list[Candidate], dict[Key, str]]:
    """Drop candidates that a more specific one on the same port explains; say which explained which.

    ``congested``: (device, port) the congestion scorer holds congested this tick
    (:func:`~netd.detect.congestion.congested_ports`). Congestion explains what it suppresses there from
    the first tick at the level, not only once its finding has waited out ``congestion_sustain``: an
    incast's receiver sends CNPs far above its history at once, and is congested, not shifted."""
    kept: list[Candidate] = []
    why: dict[Key, str] = {}
    for c in candidates:
        by = next(
            (
                s.kind
                for s in candidates
                if c.kind in SUPPRESSES.get(s.kind, ()) and _explains(s.scope, c.scope)
            ),
            None,
        )
        if (
            by is None
            and c.kind in SUPPRESSES[KIND_CONGESTION]
            and (c.scope.device, c.scope.port) in congested
        ):
            by = KIND_CONGESTION
        if by is None:
            kept.append(c)
        else:
            why[c.key] = f"superseded by {by}"
    return kept, why


class DetectionEngine:
    def __init__(self, cfg: DetectConfig, host: str, detectors: Sequence[Detector] | None = None) -> None:
        self.cfg = cfg
        self.host = host
        self.detectors = list(detectors) if detectors is not None else default_detectors(cfg)
        self._last: dict[int, list[Candidate]] = {}  # per detector: its last report (kept if it raises)
        self._open: dict[Key, Finding] = {}
        self._closed: dict[Key, Finding] = {}  # last resolved finding per key, while it may reopen
        self._recent: deque[Finding] = deque(maxlen=cfg.history)
        self._totals: Counter[tuple[str, str]] = Counter()
        self._counted: dict[str, set[Severity]] = {}
        # every detector's error count exists from the start, at 0 (a counter that appears on the first
        # error hides that error from rate() and increase())
        self._errors: Counter[str] = Counter({type(d).__name__: 0 for d in self.detectors})
        self._evaluations = 0
        self._congested: set[tuple[str, int]] = set()  # ports the scorer held congested at the last tick
        # pfc_at_rest() and pfc_confirm_in() as of the last evaluation (unset: not asked since): a
        # detector's state moves only in evaluate(), and the fast path asks both at every sample, ten
        # times a second (asking the countdowns of 16 ports took ~50 µs)
        self._pfc_at_rest: bool | None = None
        self._pfc_confirm_in: tuple[float | None] | None = None
        self._state = AnomalyState(host=host)

    def state(self) -> AnomalyState:
        return self._state

    def pfc_at_rest(self) -> bool:
        """Whether every PFC-storm detector is at rest (:meth:`PfcStormDetector.at_rest`)."""
        rest = self._pfc_at_rest
        if rest is None:
            rest = self._pfc_at_rest = all(
                d.at_rest() for d in self.detectors if isinstance(d, PfcStormDetector)
            )
        return rest

    def pfc_confirm_in(self) -> float | None:
        """Seconds until a sample could complete a pending PFC countdown (:meth:`PfcStormDetector.
        confirm_in`), or None when none is pending."""
        known = self._pfc_confirm_in
        if known is None:
            times = [d.confirm_in() for d in self.detectors if isinstance(d, PfcStormDetector)]
            known = self._pfc_confirm_in = (min((t for t in times if t is not None), default=None),)
        return known[0]

    def evaluate(self, inp: DetectInput) -> list[FindingEvent]:
        self._pfc_at_rest = self._pfc_confirm_in = None
        candidates: list[Candidate] = []
        for i, d in enumerate(self.detectors):
            try:
                self._last[i] = d.evaluate(inp)
            except Exception:  # a detector bug must not resolve (or lose) every finding
                self._errors[type(d).__name__] += 1
            candidates += self._last.get(i, [])
        if inp.path is InputPath.TICK:  # PFC samples carry no levels: the last tick's hold until the next
            self._congested = congested_ports(inp, self.cfg)
        kept, superseded = suppress(candidates, self._congested)
        events: list[FindingEvent] = []
        for c in kept:
            event = self._report(c, inp)
            if event is not None:
                events.append(event)
        reported = {c.key for c in kept}
        for key in [k for k in self._open if k not in reported]:
            events.append(self._resolve(key, inp, superseded.get(key) or self._why_gone(key, inp)))
        for key in [k for k, f in self._closed.items() if inp.monotonic - _end(f) > self.cfg.reopen_window]:
            del self._closed[key]
        self._evaluations += 1
        self._publish(inp)
        return events

    def _report(self, c: Candidate, inp: DetectInput) -> FindingEvent | None:
        now = inp.monotonic
        f = self._open.get(c.key)
        if f is None:
            old = self._closed.pop(c.key, None)
            window = self.cfg.reopen_window
            if old is not None and window > 0 and now - _end(old) <= window:  # the same finding returns
                if old in self._recent:
                    self._recent.remove(old)
                f = self._open[c.key] = dataclasses.replace(
                    old, ended_at=None, ended_monotonic=None, resolution=None, reopened=old.reopened + 1
                )
                return FindingEvent("reopened", self._refresh(f, c, now, update=False))
            f = Finding(
                id=Finding.make_id(c.kind, c.scope, now),
                kind=c.kind,
                scope=c.scope,
                severity=c.severity,
                peak_severity=c.severity,
                explanation=c.explanation,
                evidence=frozen_map(c.evidence),
                first_evidence=frozen_map(c.evidence),
                started_at=inp.timestamp,
                last_seen_at=inp.timestamp,
                started_monotonic=now,
                last_seen_monotonic=now,
            )
            self._open[c.key] = f
            self._count(f, c.severity)
            return FindingEvent("opened", f)
        before = f.severity
        f = self._refresh(f, c, now, update=True)
        if f.severity is before:
            return None
        return FindingEvent("escalated" if f.severity.rank > before.rank else "deescalated", f)

    def _refresh(self, f: Finding, c: Candidate, now: float, update: bool) -> Finding:
        peak = c.severity if c.severity.rank > f.peak_severity.rank else f.peak_severity
        f = dataclasses.replace(
            f,
            severity=c.severity,
            peak_severity=peak,
            explanation=c.explanation,
            evidence=frozen_map(c.evidence),
            last_seen_monotonic=now,
            last_seen_at=f.started_at + (now - f.started_monotonic),
            updates=f.updates + update,
        )
        self._open[c.key] = f
        self._count(f, c.severity)
        return f

    def _count(self, f: Finding, severity: Severity) -> None:
        seen = self._counted.setdefault(f.id, set())
        if severity not in seen:
            seen.add(severity)
            self._totals[(f.kind, severity.value)] += 1

    def _why_gone(self, key: Key, inp: DetectInput) -> str:
        scope = key[1]
        if (
            inp.path is InputPath.TICK
            and scope.device is not None
            and inp.port(scope.device, scope.port or 0) is None
        ):
            return "port disappeared"
        return "cleared"

    def _resolve(self, key: Key, inp: DetectInput, reason: str) -> FindingEvent:
        f = self._open.pop(key)
        end = max(inp.monotonic, f.last_seen_monotonic)
        f = dataclasses.replace(
            f, ended_monotonic=end, ended_at=f.started_at + (end - f.started_monotonic), resolution=reason
        )
        self._closed[key] = f
        self._recent.append(f)
        if len(self._counted) > 4 * (len(self._open) + len(self._closed)) + 64:  # keep this map bounded
            live = {x.id for x in (*self._open.values(), *self._closed.values())}
            self._counted = {i: s for i, s in self._counted.items() if i in live}
        return FindingEvent("resolved", f)

    def _publish(self, inp: DetectInput) -> None:
        active = sorted(self._open.values(), key=lambda f: (-f.severity.rank, f.started_monotonic, f.kind))
        self._state = AnomalyState(
            host=self.host,
            evaluated_at=inp.timestamp,
            active=tuple(active),
            recent=tuple(reversed(self._recent)),
            totals=MappingProxyType(dict(self._totals)),
            evaluations=self._evaluations,
            detector_errors=MappingProxyType(dict(self._errors)),
        )


def _end(f: Finding) -> float:
    return f.ended_monotonic if f.ended_monotonic is not None else f.last_seen_monotonic

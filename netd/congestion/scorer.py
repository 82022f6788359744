"""Scores over time: smoothing, levels with hysteresis, PFC-storm flags, and the per-scope report.

Per scope key (a port, a ToR, a spine) the reported ``smoothed`` score is an EWMA of the tick scores
(``alpha`` 0.5: half of it is the last tick). Its **level** (ok < busy < congested < severe; entered
at 0.25, 0.5, 0.8) rises as soon as the smoothed score reaches a level's threshold, and falls only
after the smoothed score has stayed below that threshold minus ``margin`` (0.1) for ``hold_ticks``
(3) consecutive updates, so a score hovering at a boundary does not flap.

A port is **stormed** (PFC storm: paused almost continuously) while its pause fraction is at least
``storm_pause_fraction`` (0.9); the flag clears after ``hold_ticks`` updates below half of that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from netd.congestion.score import Components, ScoreModel, aggregate
from netd.model.snapshot import frozen_map

__all__ = ["LEVELS", "CongestionReport", "CongestionScorer", "Levels", "ScoreInput", "ScopeScore"]

LEVELS = ("ok", "busy", "congested", "severe")


@dataclass(frozen=True, slots=True)
class Levels:
    busy: float = 0.25
    congested: float = 0.5
    severe: float = 0.8
    margin: float = 0.1
    hold_ticks: int = 3
    alpha: float = 0.5
    storm_pause_fraction: float = 0.9

    @property
    def enter(self) -> tuple[float, ...]:
        return (0.0, self.busy, self.congested, self.severe)


@dataclass(frozen=True, slots=True)
class ScoreInput:
    """One host port as the scorer sees it (built from a snapshot, or from Prometheus in fabric mode)."""

    host: str
    device: str
    port: int
    components: Components
    up: bool = True
    netdev: str | None = None
    tor: str | None = None
    spine: str | None = None
    rail: int | None = None
    storm_events: bool = False  # the NIC itself reported a pause storm this tick

    @property
    def name(self) -> str:
        return f"{self.host}:{self.device}/{self.port}"


@dataclass(frozen=True, slots=True)
class ScopeScore:
    scope: str  # "port", "tor", "spine"
    name: str  # "host:device/port", a ToR, a spine
    score: float  # this update
    smoothed: float
    level: str
    since: float  # when the current level was entered (the report clock)
    signals: Mapping[str, float | None] = field(default_factory=frozen_map)
    contributions: Mapping[str, float] = field(default_factory=frozen_map)
    labels: Mapping[str, str] = field(default_factory=frozen_map)
    up: bool = True
    stormed: bool = False
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CongestionReport:
    timestamp: float
    ports: tuple[ScopeScore, ...] = ()
    tors: tuple[ScopeScore, ...] = ()
    spines: tuple[ScopeScore, ...] = ()

    def scope(self, scope: str) -> tuple[ScopeScore, ...]:
        return {"port": self.ports, "tor": self.tors, "spine": self.spines}[scope]


class _Track:
    __slots__ = ("below", "level", "since", "smoothed", "storm", "storm_below")

    def __init__(self, score: float, now: float) -> None:
        self.smoothed = score
        self.level = 0
        self.below = 0
        self.since = now
        self.storm = False
        self.storm_below = 0


class CongestionScorer:
    """Stateful: call :meth:`update` once per tick (or fabric refresh) with every port's input."""

    def __init__(self, model: ScoreModel | None = None, levels: Levels | None = None) -> None:
        self.model = model or ScoreModel()
        self.levels = levels or Levels()
        self._tracks: dict[tuple[str, str], _Track] = {}

    def _step(self, scope: str, name: str, score: float, now: float) -> _Track:
        lv = self.levels
        t = self._tracks.get((scope, name))
        if t is None:
            t = self._tracks[(scope, name)] = _Track(score, now)
        else:
            t.smoothed = lv.alpha * score + (1 - lv.alpha) * t.smoothed
        target = max(i for i, threshold in enumerate(lv.enter) if t.smoothed >= threshold)
        if target > t.level:
            t.level, t.below, t.since = target, 0, now
        elif target < t.level and t.smoothed < lv.enter[t.level] - lv.margin:
            t.below += 1
            if t.below >= lv.hold_ticks:
                settle = max(i for i, threshold in enumerate(lv.enter) if t.smoothed + lv.margin >= threshold)
                t.level, t.below, t.since = min(settle, t.level - 1), 0, now
        else:
            t.below = 0
        return t

    def _storm(self, t: _Track, p: ScoreInput) -> bool:
        lv = self.levels
        pause = p.components.pause_fraction or 0.0
        if pause >= lv.storm_pause_fraction or p.storm_events:
            t.storm, t.storm_below = True, 0
        elif t.storm and pause < lv.storm_pause_fraction / 2:
            t.storm_below += 1
            if t.storm_below >= lv.hold_ticks:
                t.storm, t.storm_below = False, 0
        return t.storm

    def update(self, inputs: Sequence[ScoreInput], now: float) -> CongestionReport:
        seen: set[tuple[str, str]] = set()
        ports: list[ScopeScore] = []
        by_tor: dict[str, list[ScopeScore]] = {}
        for p in inputs:
            score, parts = self.model.port(p.components, p.up)
            t = self._step("port", p.name, score, now)
            seen.add(("port", p.name))
            labels = {
                "host": p.host,
                "device": p.device,
                "port": str(p.port),
                "netdev": p.netdev or "",
                "tor": p.tor or "",
                "spine": p.spine or "",
                "rail": "" if p.rail is None else str(p.rail),
            }
            s = ScopeScore(
                "port",
                p.name,
                score,
                t.smoothed,
                LEVELS[t.level],
                t.since,
                frozen_map(p.components.as_dict()),
                frozen_map(parts),
                frozen_map(labels),
                up=p.up,
                stormed=self._storm(t, p),
            )
            ports.append(s)
            if p.tor:
                by_tor.setdefault(p.tor, []).append(s)
        tors = [self._group("tor", name, members, now, seen) for name, members in sorted(by_tor.items())]
        by_spine: dict[str, list[ScopeScore]] = {}
        for tor in tors:
            for spine in filter(None, tor.labels.get("spine", "").split("+")):
                by_spine.setdefault(spine, []).append(tor)
        spines = [
            self._group("spine", name, members, now, seen) for name, members in sorted(by_spine.items())
        ]
        for key in [k for k in self._tracks if k not in seen]:
            del self._tracks[key]  # a port or switch that went away starts afresh if it returns
        return CongestionReport(now, tuple(ports), tuple(tors), tuple(spines))

    def _group(
        self, scope: str, name: str, members: list[ScopeScore], now: float, seen: set[tuple[str, str]]
    ) -> ScopeScore:
        up = [m for m in members if m.up]
        scores = [m.score for m in up]
        score = aggregate(scores)
        t = self._step(scope, name, score, now)
        seen.add((scope, name))
        signals: dict[str, float | None] = {
            "mean": sum(scores) / len(scores) if scores else None,
            "max": max(scores) if scores else None,
            "members": float(len(members)),
            "members_down": float(sum(1 for m in members if not m.up)),
            "members_congested": float(sum(1 for m in up if m.level in ("congested", "severe"))),
            "members_stormed": float(sum(1 for m in members if m.stormed)),
        }
        spines = "+".join(sorted({s for m in members for s in m.labels.get("spine", "").split("+") if s}))
        labels = {"tor": name, "spine": spines} if scope == "tor" else {"spine": name}
        return ScopeScore(
            scope,
            name,
            score,
            t.smoothed,
            LEVELS[t.level],
            t.since,
            frozen_map(signals),
            frozen_map({}),
            frozen_map(labels),
            up=bool(up) or not members,
            stormed=any(m.stormed for m in members),
            members=tuple(m.name for m in members),
        )

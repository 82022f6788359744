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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, itemgetter
from types import MappingProxyType
from typing import cast

import numpy as np

from netd.congestion.score import SIGNALS, Components, ScoreModel, aggregate
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


_SMOOTHED, _LEVEL, _BELOW, _SINCE, _STORM, _STORM_BELOW = range(6)  # the rows of a track state


class _Tracks:
    """Every track (per port, ToR, spine: ``(scope, name)``) of the last update: ``rows`` maps a key
    to its column of ``state`` (smoothed, level, below, since, storm, storm_below; float64, the
    counts and flags exactly). A key missing from an update is dropped: it starts afresh if it returns."""

    __slots__ = ("rows", "state")

    def __init__(self, rows: dict[tuple[str, str], int], state: np.ndarray) -> None:
        self.rows, self.state = rows, state


def _highest(values: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per value, the highest index of a threshold it reaches (``max(i for i, t in ... if v >= t)``)."""
    reached = np.where(values >= thresholds[:, None], np.arange(len(thresholds))[:, None], -1)
    out = np.maximum.reduce(reached, axis=0, initial=-1)
    if len(out) and np.minimum.reduce(out) < 0:  # as max() of nothing: a NaN score has no level
        raise ValueError(f"no level for score {values[out < 0][0]!r} (thresholds {thresholds.tolist()})")
    return out


class _Groups:
    """ToRs over their ports, or spines over their ToRs, sorted by name: each group's score is the
    aggregate of its up members' scores of this update (so it is known before any track steps)."""

    def __init__(self, groups: dict[str, list[int]], scores: list[float], up: list[bool]) -> None:
        self.names = sorted(groups)
        self.members = [groups[name] for name in self.names]
        self.up_scores = [[scores[i] for i in idx if up[i]] for idx in self.members]
        self.scores = [aggregate(s) for s in self.up_scores]
        self.up = [bool(s) or not idx for s, idx in zip(self.up_scores, self.members, strict=True)]
        self.member_up = up

    def report(
        self,
        scope: str,
        state: tuple[list[float], list[str], list[float]],
        labels: list[dict[str, str]],
        member_names: list[str],
        member_congested: list[bool],
        member_stormed: list[bool],
    ) -> list[ScopeScore]:
        """The groups' scores; ``state``: (smoothed, level, since) of each group's track."""
        up_congested = [u and c for u, c in zip(self.member_up, member_congested, strict=True)]
        out = []
        for g, (idx, scores) in enumerate(zip(self.members, self.up_scores, strict=True)):
            stormed = sum(map(member_stormed.__getitem__, idx))
            signals: dict[str, float | None] = {
                "mean": sum(scores) / len(scores) if scores else None,
                "max": max(scores) if scores else None,
                "members": float(len(idx)),
                "members_down": float(len(idx) - len(scores)),
                "members_congested": float(sum(map(up_congested.__getitem__, idx))),
                "members_stormed": float(stormed),
            }
            out.append(
                ScopeScore(
                    scope,
                    self.names[g],
                    self.scores[g],
                    state[0][g],
                    state[1][g],
                    state[2][g],
                    MappingProxyType(signals),
                    MappingProxyType({}),
                    MappingProxyType(labels[g]),
                    up=self.up[g],
                    stormed=stormed > 0,
                    members=tuple(map(member_names.__getitem__, idx)),
                )
            )
        return out


_BITS = np.array([1, 2, 4, 8])  # the signals that counted for a port, as one code (SIGNALS order)
_DOWN = 16  # the code of a port whose link is down
_PICKS = [[j for j in range(len(SIGNALS)) if code >> j & 1] for code in range(16)] + [[0]]
_KEYS = [tuple(SIGNALS[j] for j in pick) for pick in _PICKS[:16]] + [("link_down",)]
_PortKey = tuple[str, str, int, str | None, str | None, str | None, int | None]
_PORT_KEY = attrgetter("host", "device", "port", "netdev", "tor", "spine", "rail")


class CongestionScorer:
    """Stateful: call :meth:`update` once per tick (or fabric refresh) with every port's input.

    One implementation for 16 ports (a host) and 40,000 (`netd fabric` at 5000 nodes): the score
    formula (:meth:`ScoreModel.ports`), the smoothing, the levels' hysteresis and the storm flags of
    every port, ToR and spine run as one pass of numpy over arrays with a column per track; what
    stays per port in Python is building the report's objects. A port's label map is kept from one
    update to the next while the fields it is made of are unchanged (it is read-only)."""

    def __init__(self, model: ScoreModel | None = None, levels: Levels | None = None) -> None:
        self.model = model or ScoreModel()
        self.levels = levels or Levels()
        self._tracks = _Tracks({}, np.zeros((6, 0)))
        self._labels: dict[_PortKey, tuple[str, Mapping[str, str]]] = {}

    def update(self, inputs: Sequence[ScoreInput], now: float) -> CongestionReport:
        n = len(inputs)
        comps = list(map(attrgetter("components"), inputs))
        columns = [list(map(attrgetter(name), comps)) for name in SIGNALS]
        values = np.array(columns, dtype=float).reshape(len(SIGNALS), n)  # None: NaN
        present = np.isfinite(values)  # None is NaN here
        if sum(map(list.count, columns, repeat(None))) != values.size - np.count_nonzero(present):
            # a value that is not a finite number: absent, like None (the score skips it, and the
            # report's signals must stay JSON)
            columns = [[v if v is None or math.isfinite(v) else None for v in column] for column in columns]

        ups = list(map(attrgetter("up"), inputs))
        up = np.array(ups, dtype=bool).reshape(n)
        rates = np.array(list(map(attrgetter("rx_packets_per_s", "tx_packets_per_s"), comps)), dtype=float)
        score, parts, used = self.model.ports(values, *rates.reshape(n, 2).T)
        score = np.where(up, score, 1.0)
        scores = score.tolist()
        names, labels, port_keys = self._port_labels(inputs)

        # a ToR's score is its up ports' of this update, a spine's its ToRs': known before any step
        by_tor: dict[str, list[int]] = {}
        for i, tor in enumerate(map(attrgetter("tor"), inputs)):
            if tor:
                by_tor.setdefault(tor, []).append(i)
        up_list = up.tolist()
        tors = _Groups(by_tor, scores, up_list)
        tor_spines = [
            "+".join(
                sorted(
                    {s for label in {port_keys[i][5] for i in idx} if label for s in label.split("+") if s}
                )
            )
            for idx in tors.members
        ]
        by_spine: dict[str, list[int]] = {}
        for i, label in enumerate(tor_spines):
            for spine in filter(None, label.split("+")):
                by_spine.setdefault(spine, []).append(i)
        spines = _Groups(by_spine, tors.scores, tors.up)

        keys = list(zip(repeat("port"), names))
        keys += [("tor", name) for name in tors.names] + [("spine", name) for name in spines.names]
        pause = np.zeros(len(keys))
        pause[:n] = np.where(present[2], values[2], 0.0)  # pause_fraction or 0.0
        events = np.zeros(len(keys), dtype=bool)
        events[:n] = list(map(attrgetter("storm_events"), inputs))
        every = np.concatenate((score, np.array(tors.scores + spines.scores, dtype=float)))
        state = self._step(keys, every, pause, events, now)
        smoothed, since = state[_SMOOTHED].tolist(), state[_SINCE].tolist()
        level = state[_LEVEL].astype(np.intp)
        level_names = list(map(LEVELS.__getitem__, level.tolist()))
        congested = (level >= LEVELS.index("congested")).tolist()
        stormed = (state[_STORM] > 0).tolist()

        contributions = self._contributions(up, used, parts)
        signals = list(
            map(MappingProxyType, map(dict, map(zip, repeat(SIGNALS), zip(*columns, strict=True))))
        )
        ports = list(
            map(
                ScopeScore,
                repeat("port", n),
                names,
                scores,
                smoothed[:n],
                level_names[:n],
                since[:n],
                signals,
                contributions,
                labels,
                ups,
                stormed[:n],
            )
        )
        at = n + len(tors.names)
        tor_labels = [
            {"tor": name, "spine": label} for name, label in zip(tors.names, tor_spines, strict=True)
        ]
        tor_scores = tors.report(
            "tor",
            (smoothed[n:at], level_names[n:at], since[n:at]),
            tor_labels,
            names,
            congested[:n],
            stormed[:n],
        )
        spine_scores = spines.report(
            "spine",
            (smoothed[at:], level_names[at:], since[at:]),
            [{"spine": name} for name in spines.names],
            tors.names,
            congested[n:at],
            [t.stormed for t in tor_scores],
        )
        return CongestionReport(now, tuple(ports), tuple(tor_scores), tuple(spine_scores))

    def _port_labels(
        self, inputs: Sequence[ScoreInput]
    ) -> tuple[list[str], list[Mapping[str, str]], list[_PortKey]]:
        """Each port's name, label map and identity (host, device, port, netdev, tor, spine, rail).
        A port's map is the last update's while the fields it is made of are the same."""
        keys = list(map(_PORT_KEY, inputs))
        hits = list(map(self._labels.get, keys))
        for i, hit in enumerate(hits):
            if hit is None:
                p = inputs[i]
                labels = {
                    "host": p.host,
                    "device": p.device,
                    "port": str(p.port),
                    "netdev": p.netdev or "",
                    "tor": p.tor or "",
                    "spine": p.spine or "",
                    "rail": "" if p.rail is None else str(p.rail),
                }
                hits[i] = (p.name, MappingProxyType(labels))
        found = cast(list[tuple[str, Mapping[str, str]]], hits)
        self._labels = dict(zip(keys, found, strict=True))
        return list(map(itemgetter(0), found)), list(map(itemgetter(1), found)), keys

    def _step(
        self,
        keys: list[tuple[str, str]],
        score: np.ndarray,
        pause: np.ndarray,
        events: np.ndarray,
        now: float,
    ) -> np.ndarray:
        """Advance the track of each key by one update: the state of each, in the order given. A key
        given twice (a port listed twice) advances twice, in order, as if one input at a time."""
        rows = dict(zip(keys, range(len(keys)), strict=True))
        old = self._tracks
        if len(rows) == len(keys):
            rounds = None
        else:
            rows = {key: i for i, key in enumerate(dict.fromkeys(keys))}
            column = np.array([rows[key] for key in keys], dtype=np.intp)
            seen: dict[tuple[str, str], int] = {}
            occurrence = []  # how many times the key came before
            for key in keys:
                seen[key] = seen.get(key, -1) + 1
                occurrence.append(seen[key])
            occ = np.array(occurrence)
            rounds = [np.flatnonzero(occ == k) for k in range(int(occ.max()) + 1)]
        prev = np.array(list(map(old.rows.get, rows, repeat(-1))), dtype=np.intp).reshape(len(rows))
        known = prev >= 0
        state = np.zeros((6, len(rows)))
        state[:, known] = old.state[:, prev[known]]
        state[_SINCE, ~known] = now  # a new track: smoothed = its score, level ok, since now
        if rounds is None:
            state = self._advance(state, ~known, score, pause, events, now)
            out = state
        else:
            fresh = ~known
            out = np.empty((6, len(keys)))
            for sel in rounds:
                col = column[sel]
                state[:, col] = self._advance(
                    state[:, col], fresh[col], score[sel], pause[sel], events[sel], now
                )
                fresh[col] = False
                out[:, sel] = state[:, col]
        self._tracks = _Tracks(rows, state)
        return out

    def _advance(
        self,
        state: np.ndarray,
        fresh: np.ndarray,
        score: np.ndarray,
        pause: np.ndarray,
        events: np.ndarray,
        now: float,
    ) -> np.ndarray:
        """One update of some tracks (columns of ``state``): the EWMA; the level (up at once to the
        highest threshold reached; down, one level below the highest reached with ``margin``, once
        ``hold_ticks`` updates in a row were ``margin`` under the current level's threshold); the
        PFC-storm flag (set while paused ``storm_pause_fraction`` of the time or the NIC says so,
        cleared after ``hold_ticks`` updates in a row under half of that)."""
        lv = self.levels
        enter = np.array(lv.enter, dtype=float)
        smoothed = np.where(fresh, score, lv.alpha * score + (1 - lv.alpha) * state[_SMOOTHED])
        level = state[_LEVEL]
        target = _highest(smoothed, enter)
        rise = target > level
        fall = (target < level) & (smoothed < enter[level.astype(np.intp)] - lv.margin)
        below = np.where(fall, state[_BELOW] + 1, 0.0)
        settle = fall & (below >= lv.hold_ticks)
        new_level = np.where(rise, target, level)
        since = np.where(rise | settle, now, state[_SINCE])
        if settle.any():
            new_level[settle] = np.minimum(_highest(smoothed[settle] + lv.margin, enter), level[settle] - 1)
            below[settle] = 0
        storm = state[_STORM] > 0
        hit = (pause >= lv.storm_pause_fraction) | events
        calm = ~hit & storm & (pause < lv.storm_pause_fraction / 2)
        storm_below = np.where(hit, 0.0, state[_STORM_BELOW] + calm)
        cleared = calm & (storm_below >= lv.hold_ticks)
        storm_below[cleared] = 0
        out = np.empty_like(state)
        out[_SMOOTHED], out[_LEVEL], out[_BELOW], out[_SINCE] = smoothed, new_level, below, since
        out[_STORM], out[_STORM_BELOW] = (hit | storm) & ~cleared, storm_below
        return out

    def _contributions(
        self, up: np.ndarray, used: np.ndarray, parts: np.ndarray
    ) -> list[Mapping[str, float]]:
        """Each port's contributions: the signals that counted, or ``link_down`` (1.0); built for all
        the ports with the same signals at once."""
        codes = np.where(up, np.dot(_BITS, used), _DOWN)
        parts = np.where(up, parts, 1.0)  # a down port's first "part" is link_down's 1.0
        kinds = set(codes.tolist())
        if len(kinds) == 1:  # every port the same signals (the usual case)
            code = kinds.pop()
            rows = parts[_PICKS[code]].T.tolist()
            return list(map(MappingProxyType, map(dict, map(zip, repeat(_KEYS[code]), rows))))
        out: list[Mapping[str, float]] = [MappingProxyType({})] * len(codes)
        for code in kinds:
            where = np.flatnonzero(codes == code)
            rows = parts[_PICKS[code]][:, where].T.tolist()
            maps = map(MappingProxyType, map(dict, map(zip, repeat(_KEYS[code]), rows)))
            for i, m in zip(where.tolist(), maps, strict=True):
                out[i] = m
        return out

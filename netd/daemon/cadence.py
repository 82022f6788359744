"""The calm cadence: while nothing on the host asks for a prompt tick, the loop passes over tick slots.

A tick costs the same whether or not anything moved (docs/benchmarks.md, round 13: the reads of ~500
counter files and the per-port work around them), and on a calm host nearly all of it confirms that
nothing happened. So, like the PFC fast path's calm cadence, the tick has one: once the host has been
:func:`calm` for :data:`CALM_AFTER` ticks in a row, the loop ticks only every ``calm_interval``
seconds, passing over the slots in between. Each passed slot still takes a fast-path sample, so PFC
pause is looked for as often as before, and looks at the :data:`MOVERS` counters. Anything that is
not calm (a congestion signal, an open finding, a port changing state, a held or reset reading, a
failed source; in a passed slot, pause seen by the fast path, a link event or a MOVERS counter that
moved) brings back a tick at every slot at once: that slot or the next ticks, and the streak starts
again.

What it costs: congestion, loss, pause and kernel link events are seen at the same slot as when every
slot ticks; what only a whole tick sees (the other error counters, a port's state on a tree without
kernel link events) up to ``calm_interval`` after it starts instead of ``interval``
(docs/detection.md, Tick cadence).

Pure: values in, a verdict out; the loop (netd.daemon.loop) owns the one mutable
:class:`CalmCadence`.
"""

from __future__ import annotations

from collections.abc import Iterable

from netd.congestion.score import SIGNALS
from netd.congestion.scorer import ScopeScore
from netd.daemon.state import PublishedState

__all__ = ["CALM_AFTER", "MOVERS", "CalmCadence", "calm", "longest_tick_s", "slots_per_calm_tick"]

# Calm ticks in a row before slots are passed over: the scorer's smoothing (half of a score is the
# last tick's) has decayed from any episode, and a level's fall (hold_ticks, 3) is behind it.
CALM_AFTER = 5

# RDMA counters (vocabulary names) looked at in every passed slot (RdmaSysfs.moved: their files
# only, compared unparsed): the first signs of congestion (CE-marked packets received, CNPs handled)
# and of loss (out-of-sequence packets, retransmissions). One that moved makes that slot tick, so
# such an episode is seen as soon as when every slot ticks. ~4 files a port, a few % of a tick.
MOVERS = frozenset({"ecn_marked", "cnp_handled", "out_of_sequence", "retransmits"})


def slots_per_calm_tick(interval_s: float, calm_interval_s: float) -> int:
    """Tick slots one calm tick spans: ``calm_interval`` in whole intervals (at least 1: no
    stretch). Slots keep the loop on the interval's grid, so a tick that is due again comes at
    the next slot, never between two."""
    if calm_interval_s <= interval_s:
        return 1
    return max(1, int(calm_interval_s / interval_s + 1e-9))


def longest_tick_s(interval_s: float, calm_interval_s: float) -> float:
    """The longest time between two ticks of a loop that keeps up: what freshness checks allow."""
    return interval_s * slots_per_calm_tick(interval_s, calm_interval_s)


def _quiet(scores: Iterable[ScopeScore]) -> bool:
    """No port with a congestion, pause or loss signal, a level above ok, or a storm. A port that is
    down is skipped: its level is its being down (the scorer counts a down link as severe), which
    says nothing new while it stays down (calm() compares every port's state with the last tick's),
    and a host with an uncabled port would otherwise never be calm."""
    for s in scores:
        if not s.up:
            continue
        if s.level != "ok" or s.stormed:
            return False
        signals = s.signals
        for name in SIGNALS:
            if signals.get(name):  # 0 and None (not reported, no rate yet) are quiet
                return False
    return True


def calm(now: PublishedState, before: PublishedState | None) -> bool:
    """Whether the tick that published ``now`` (after ``before``) saw nothing that wants the next
    tick at the next slot: no open finding, no congestion, pause or loss signal on any port, no
    port that changed state or rate, no reading held for confirmation or confirmed as a reset, no
    failed source or unreadable file. A first tick is never calm: nothing to compare it with."""
    if before is None:
        return False
    if now.anomalies is not None and now.anomalies.active:
        return False
    if now.congestion is not None and not _quiet(now.congestion.ports):
        return False
    obs = now.observation
    if not all(s.ok for s in obs.snapshot.sources):
        return False
    if any(v.held for v in obs.netdevs.values()):
        return False
    links = {}
    for v in before.observation.ports:
        p = v.sample
        links[p.device, p.port] = (p.state, p.phys_state, p.rate_gbps)
    for v in obs.ports:
        p = v.sample
        if v.held or v.resets or p.read_errors:
            return False
        if links.get((p.device, p.port)) != (p.state, p.phys_state, p.rate_gbps):
            return False  # a new port, or a link that changed
    return len(links) == len(obs.ports)  # and none vanished


class CalmCadence:
    """Which tick slots the loop passes over. Owned by the loop's thread."""

    def __init__(self, slots_per_tick: int) -> None:
        self.slots_per_tick = max(1, slots_per_tick)
        self._streak = 0  # calm ticks in a row
        self._passed = 0  # slots passed over since the last tick

    @property
    def stretched(self) -> bool:
        """Ticks are ``slots_per_tick`` slots apart now (the host has been calm long enough)."""
        return self.slots_per_tick > 1 and self._streak >= CALM_AFTER

    def ticked(self, was_calm: bool) -> None:
        """A tick ran; ``was_calm``: :func:`calm` of what it published."""
        self._streak = self._streak + 1 if was_calm else 0
        self._passed = 0

    def may_pass(self) -> bool:
        """Whether the slot due now may pass with no tick: ticks are stretched, and it is not the
        calm tick's own slot. It passes unless something wants its tick (:meth:`interrupted`)."""
        return self.stretched and self._passed < self.slots_per_tick - 1

    def passed(self) -> None:
        """The slot due now passed with no tick."""
        self._passed += 1

    def interrupted(self) -> None:
        """Something wants the slot's tick (pause, a counter that moved): the calm is over, and the
        streak starts again from the next calm tick."""
        self._streak = 0

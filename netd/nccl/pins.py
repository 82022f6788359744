"""The pin authority: one table per communicator, the same for every rank — or none for all.

Every rank of a communicator registers under ``(comm_id, n_ranks, n_nodes)`` with a random
member id and waits. The first registration creates the pin: it records the asker's table
(``offer``, possibly none) and starts the window. Then exactly one of:

* **complete** — all ``n_ranks`` distinct members registered before the window closed: every
  member gets APPLY with the first asker's table (NEUTRAL if the first asker had none);
* **abandoned** — the window closed first: every member, including late ones, gets NEUTRAL.

The verdict is final and the same for everyone, which is what makes the plugin's rule provable:
a rank that never registered anywhere keeps the pin from completing, so when it leaves NCCL
untouched, so does every peer. An extra member after completion (a colliding comm id) gets FAIL.

Asyncio, one event loop per authority: the daemon's socket server owns one for single-node
communicators; the HTTP route owns one for multi-node communicators (the pin service). Memory is
bounded: decided pins are kept ``keep_s`` then dropped; new pins beyond ``max_pins`` are refused
with NEUTRAL (the asker is then not registered, so that stays consistent too).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netd.nccl.pin_wire import PinStatus

__all__ = ["PinAuthority", "PinKey", "PinVerdict"]


@dataclass(frozen=True, slots=True)
class PinKey:
    comm_id: int
    n_ranks: int
    n_nodes: int

    def __str__(self) -> str:
        return f"comm {self.comm_id:016x} ({self.n_ranks} ranks, {self.n_nodes} nodes)"


@dataclass(frozen=True, slots=True)
class PinVerdict:
    status: PinStatus
    reason: str
    table: bytes | None = None
    pinned_at_ns: int = 0
    pinned_by: str = ""

    @staticmethod
    def neutral(reason: str) -> PinVerdict:
        return PinVerdict(PinStatus.NEUTRAL, reason)

    @staticmethod
    def fail(reason: str) -> PinVerdict:
        return PinVerdict(PinStatus.FAIL, reason)


@dataclass(slots=True)
class _Pin:
    key: PinKey
    offer: bytes | None
    pinned_by: str
    pinned_at_ns: int
    deadline: float
    members: set[int] = field(default_factory=set)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    verdict: PinVerdict | None = None
    decided_at: float = 0.0


class PinAuthority:
    def __init__(
        self,
        window_s: float = 3.0,
        keep_s: float = 600.0,
        max_pins: int = 65536,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.window_s = window_s
        self.keep_s = keep_s
        self.max_pins = max_pins
        self._clock = clock
        self._wall_ns = wall_ns
        self._pins: dict[PinKey, _Pin] = {}

    async def join(self, key: PinKey, member: int, offer: bytes | None, asker: str = "") -> PinVerdict:
        now = self._clock()
        self._expire(now)
        pin = self._pins.get(key)
        if pin is None:
            if len(self._pins) >= self.max_pins:
                return PinVerdict.neutral(
                    f"pin authority holds {self.max_pins} pins; {key} was not registered, "
                    "so none of its ranks is pinned"
                )
            pin = _Pin(key, offer, asker, self._wall_ns(), now + self.window_s)
            self._pins[key] = pin
        if pin.verdict is None and now >= pin.deadline:
            self._abandon(pin, now)
        if pin.verdict is not None:
            if member in pin.members or pin.verdict.status is not PinStatus.APPLY:
                return pin.verdict
            return PinVerdict.fail(
                f"{key} already has all {key.n_ranks} ranks pinned; "
                "another communicator with the same id asked"
            )
        pin.members.add(member)
        if len(pin.members) >= key.n_ranks:
            self._complete(pin, now)
        else:
            try:
                await asyncio.wait_for(pin.done.wait(), max(pin.deadline - self._clock(), 0.0))
            except TimeoutError:
                if pin.verdict is None:
                    self._abandon(pin, self._clock())
        assert pin.verdict is not None
        return pin.verdict

    def _decide(self, pin: _Pin, verdict: PinVerdict, now: float) -> None:
        pin.verdict = verdict
        pin.decided_at = now
        pin.done.set()

    def _complete(self, pin: _Pin, now: float) -> None:
        if pin.offer is None:
            verdict = PinVerdict.neutral(
                f"all ranks asked, but {pin.pinned_by or 'the first asker'} had no table"
            )
        else:
            verdict = PinVerdict(
                PinStatus.APPLY,
                f"pinned by {pin.pinned_by or 'the first asker'} for all ranks",
                pin.offer,
                pin.pinned_at_ns,
                pin.pinned_by,
            )
        self._decide(pin, verdict, now)

    def _abandon(self, pin: _Pin, now: float) -> None:
        self._decide(
            pin,
            PinVerdict.neutral(
                f"only {len(pin.members)} of {pin.key.n_ranks} ranks asked within {self.window_s:g} s"
            ),
            now,
        )

    def _expire(self, now: float) -> None:
        old = [k for k, p in self._pins.items() if p.verdict is not None and now - p.decided_at > self.keep_s]
        for k in old:
            del self._pins[k]

    def pins(self) -> list[dict[str, object]]:
        """What GET /v1/nccl/pins shows: every pin still held, newest first."""
        out = []
        for p in sorted(self._pins.values(), key=lambda p: -p.pinned_at_ns):
            v = p.verdict
            out.append(
                {
                    "comm_id": f"{p.key.comm_id:016x}",
                    "n_ranks": p.key.n_ranks,
                    "n_nodes": p.key.n_nodes,
                    "members": len(p.members),
                    "pinned_by": p.pinned_by,
                    "pinned_at_ns": p.pinned_at_ns,
                    "state": "pending" if v is None else v.status.name.lower(),
                    "reason": None if v is None else v.reason,
                }
            )
        return out

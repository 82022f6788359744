"""The pin authority: one table per communicator, the same for every rank — or none for all.

Every rank of a communicator registers under ``(comm_id, n_ranks, n_nodes)`` with a random
member id and waits. The first registration creates the pin: it records the asker's table
(``offer``, possibly none) and its deadline. Then exactly one of:

* **complete** — all ``n_ranks`` distinct members registered before the deadline: every member
  gets APPLY with the first asker's table (NEUTRAL if the first asker had none, or if members
  disagree on the static table they pinned — ``digest`` 0 is "the daemon's table");
* **abandoned** — the deadline passed first: every member, including late ones, gets NEUTRAL.

The verdict is final and the same for everyone, which is what makes the plugin's rule provable:
a rank that never registered anywhere keeps the pin from completing, so when it leaves NCCL
untouched, so does every peer. The deadline is the window after the first asker, tightened by
each member's own budget (minus ``margin_s``): registered members get their verdict in time.

Registrations are idempotent and generations make reruns safe: a member already in the pin gets
its verdict again; a new member after the pin *completed* cannot belong to that communicator
(all its ranks are in), so it opens the next generation (a rerun with the same NCCL_COMM_ID); a new
member shortly after an *abandoned* pin may be a late rank of it, so it gets that NEUTRAL.
A member whose caller goes away (cancelled wait) before the decision is withdrawn: the pin then
cannot complete without it. The authority never answers FAIL (a relay without a verdict does).

Asyncio, one event loop per authority; memory is bounded (decided pins are kept ``keep_s``; new
pins beyond ``max_pins`` are answered NEUTRAL without registering anyone).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from netd.nccl.pin_wire import PinStatus

__all__ = ["PinAuthority", "PinKey", "PinVerdict", "unless_gone", "until_decided"]

# A late rank of an abandoned pin arrives within the plugin's timeout of its peers (at most a
# minute, NETD_TUNER_TIMEOUT_MS's ceiling); after that a registration is a new communicator.
_LATE_S = 60.0


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
    generation: int = 0
    digest: int = 0  # APPLY of a static pin: the digest every member pinned

    @staticmethod
    def neutral(reason: str, generation: int = 0) -> PinVerdict:
        return PinVerdict(PinStatus.NEUTRAL, reason, generation=generation)

    @staticmethod
    def unknown(reason: str) -> PinVerdict:
        """The asker may be registered but no verdict came: its plugin leaves NCCL alone and warns."""
        return PinVerdict(PinStatus.FAIL, reason)


@dataclass(slots=True)
class _Pin:
    key: PinKey
    generation: int
    offer: bytes | None
    digest: int
    pinned_by: str
    pinned_at_ns: int
    deadline: float
    members: set[int] = field(default_factory=set)
    mixed: bool = False
    # the verdict, for every member waiting (created in the authority's loop)
    future: asyncio.Future[PinVerdict] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    timer: asyncio.TimerHandle | None = None
    verdict: PinVerdict | None = None
    decided_at: float = 0.0
    complete: bool = False


class PinAuthority:
    def __init__(
        self,
        window_s: float = 3.0,
        keep_s: float = 600.0,
        max_pins: int = 65536,
        clock: Callable[[], float] = time.monotonic,
        wall_ns: Callable[[], int] = time.time_ns,
        margin_s: float = 0.05,
    ) -> None:
        self.window_s = window_s
        self.keep_s = keep_s
        self.max_pins = max_pins
        self.margin_s = margin_s
        self._clock = clock
        self._wall_ns = wall_ns
        self._pins: dict[PinKey, _Pin] = {}
        self._generations: dict[PinKey, int] = {}
        self._expired_at = float("-inf")

    async def join(
        self,
        key: PinKey,
        member: int | Sequence[int],
        offer: bytes | None,
        asker: str = "",
        *,
        digest: int = 0,
        budget_s: float | None = None,
    ) -> PinVerdict:
        """Register ``member`` (or several, from one host) and wait for the pin's verdict.

        ``budget_s``: how long the caller can wait from now; the pin is decided before that."""
        members = [member] if isinstance(member, int) else list(member)
        got = self.register(key, members, offer, asker, digest=digest, budget_s=budget_s)
        if isinstance(got, PinVerdict):
            return got
        try:
            return await asyncio.shield(got)  # one caller going away does not cancel the others'
        except asyncio.CancelledError:
            self.withdraw(key, members, got)  # the caller went away undecided: withdraw its ranks
            raise

    def register(
        self,
        key: PinKey,
        members: Sequence[int],
        offer: bytes | None | Callable[[], bytes | None],
        asker: str = "",
        *,
        digest: int = 0,
        budget_s: float | None = None,
    ) -> PinVerdict | asyncio.Future[PinVerdict]:
        """:meth:`join` without the wait: the verdict if there is one already, else the pin's shared
        future. Never cancel that future (every member waits on it): a caller that stops waiting
        calls :meth:`withdraw`. For callers that cannot afford a task per registration.

        ``offer`` may be a function that decodes and checks it: called only when this registration
        opens a pin (only the first asker's offer is pinned); what it raises propagates, with
        nothing registered."""
        now = self._clock()
        self._expire(now)
        pin = self._pins.get(key)
        if pin is not None and pin.verdict is not None:
            if all(m in pin.members for m in members):
                return pin.verdict  # a retry: the same answer
            if not pin.complete and now - pin.decided_at <= _LATE_S:
                return pin.verdict  # maybe a late rank of the abandoned pin: it is NEUTRAL too
            pin = None  # a completed pin's ranks are all in: this is the next communicator
        if pin is None:
            if len(self._pins) >= self.max_pins:
                return PinVerdict.neutral(
                    f"pin authority holds {self.max_pins} pins; {key} was not registered"
                )
            pin = self._open(key, offer, digest, asker, now)
        if budget_s is not None:
            self._tighten(pin, now + budget_s - self.margin_s)
        if now >= pin.deadline:
            if pin.members:
                self._abandon(pin, now)
                return pin.verdict  # type: ignore[return-value]
            return PinVerdict.neutral(f"{key}: no time left to pin (budget {budget_s} s)")
        pin.mixed |= digest != pin.digest
        pin.members.update(members)
        if len(pin.members) >= key.n_ranks:
            self._complete(pin, now)
            return pin.verdict  # type: ignore[return-value]
        return pin.future

    def withdraw(self, key: PinKey, members: Sequence[int], future: asyncio.Future[PinVerdict]) -> None:
        """Take ``members`` out of the still undecided pin whose future ``register`` returned."""
        pin = self._pins.get(key)
        if pin is not None and pin.future is future and pin.verdict is None:
            pin.members.difference_update(members)

    def _open(
        self,
        key: PinKey,
        offer: bytes | None | Callable[[], bytes | None],
        digest: int,
        asker: str,
        now: float,
    ) -> _Pin:
        if callable(offer):
            offer = offer()  # before anything changes: a refused offer registers nothing
        generation = self._generations.get(key, 0) + 1
        self._generations[key] = generation
        pin = _Pin(key, generation, offer, digest, asker, self._wall_ns(), now + self.window_s)
        self._pins[key] = pin
        self._arm(pin)
        return pin

    def _arm(self, pin: _Pin) -> None:
        if pin.timer is not None:
            pin.timer.cancel()
        loop = asyncio.get_running_loop()
        delay = max(pin.deadline - self._clock(), 0.0)
        pin.timer = loop.call_later(delay, self._on_deadline, pin)

    def _tighten(self, pin: _Pin, deadline: float) -> None:
        if deadline < pin.deadline and pin.verdict is None:
            pin.deadline = deadline
            self._arm(pin)

    def _on_deadline(self, pin: _Pin) -> None:
        if pin.verdict is None:
            self._abandon(pin, self._clock())

    def _decide(self, pin: _Pin, verdict: PinVerdict, now: float) -> None:
        pin.verdict = verdict
        pin.decided_at = now
        if pin.timer is not None:
            pin.timer.cancel()
            pin.timer = None
        if not pin.future.done():
            pin.future.set_result(verdict)

    def _complete(self, pin: _Pin, now: float) -> None:
        pin.complete = True
        by = pin.pinned_by or "the first asker"
        g = pin.generation
        if pin.mixed:
            verdict = PinVerdict.neutral("ranks pinned different tables (static file vs netd's)", g)
        elif pin.digest:
            verdict = PinVerdict(
                PinStatus.APPLY,
                "every rank pinned the same static table",
                None,
                pin.pinned_at_ns,
                by,
                g,
                pin.digest,
            )
        elif pin.offer is None:
            verdict = PinVerdict.neutral(f"all ranks asked, but {by} had no table", g)
        else:
            verdict = PinVerdict(
                PinStatus.APPLY,
                f"pinned by {by} for all ranks",
                pin.offer,
                pin.pinned_at_ns,
                pin.pinned_by,
                g,
            )
        self._decide(pin, verdict, now)

    def _abandon(self, pin: _Pin, now: float) -> None:
        self._decide(
            pin,
            PinVerdict.neutral(
                f"only {len(pin.members)} of {pin.key.n_ranks} ranks asked in time", pin.generation
            ),
            now,
        )

    def _expire(self, now: float) -> None:
        if now - self._expired_at < 1.0:  # a scan per second, not per registration
            return
        self._expired_at = now
        old = [k for k, p in self._pins.items() if p.verdict is not None and now - p.decided_at > self.keep_s]
        for k in old:
            del self._pins[k]
            self._generations.pop(k, None)

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
                    "generation": p.generation,
                    "members": len(p.members),
                    "pinned_by": p.pinned_by,
                    "pinned_at_ns": p.pinned_at_ns,
                    "state": "pending" if v is None else v.status.name.lower(),
                    "reason": None if v is None else v.reason,
                }
            )
        return out


async def unless_gone(work: asyncio.Future[PinVerdict], gone: Awaitable[Any]) -> PinVerdict | None:
    """``work``'s verdict, or None when ``gone`` (the asker's connection closing) completes first:
    the wait is then cancelled, which withdraws the asker's ranks from a pin still undecided."""
    if work.done():
        return work.result()
    watcher: asyncio.Future[Any] = asyncio.ensure_future(gone)
    try:
        await asyncio.wait([work, watcher], return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if work.done():
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    return None


async def until_decided(verdict: asyncio.Future[PinVerdict], gone: Awaitable[Any]) -> PinVerdict | None:
    """``verdict``'s result, or None when ``gone`` completes first.

    :func:`unless_gone` for a pin's shared future from :meth:`PinAuthority.register`: it is never
    cancelled here (the caller withdraws when this gives None or is cancelled), and the wait costs
    one task and one future, not three tasks: it runs per host request on the service's one loop."""
    if verdict.done():
        if asyncio.iscoroutine(gone):
            gone.close()  # never started: close it rather than leave it "never awaited"
        return verdict.result()
    loop = asyncio.get_running_loop()
    watcher: asyncio.Future[Any] = asyncio.ensure_future(gone)
    waiter = loop.create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    verdict.add_done_callback(wake)
    watcher.add_done_callback(wake)
    try:
        await waiter
    finally:
        verdict.remove_done_callback(wake)
        watcher.cancel()
    return verdict.result() if verdict.done() else None

"""What the topology, congestion and scheduler routes read: one host's view, or the cluster's.

A :class:`ServiceView` hands out an immutable :class:`ClusterSnapshot` (topology + congestion report +
where it came from). ``netd run`` serves :class:`HostView` (this host, from the daemon's published
state); ``netd fabric`` serves the cluster view built from Prometheus (netd.cluster.view) in a process of
its own (netd.cluster.remote), or, with no Prometheus configured, a HostView whose ``note`` says so.

A snapshot built in another process arrives encoded: its topology and report are :class:`Deferred`,
decoded by the first reader that needs them (a 5000-node report is ~60 ms of decoding, which the
scheduler extender never pays: it reads the snapshot's :class:`EncodedScores`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, cast

from netd.congestion.scorer import CongestionReport
from netd.daemon.state import PublishedState
from netd.model.topology import Topology

__all__ = ["ClusterSnapshot", "Deferred", "EncodedScores", "HostView", "ServiceView"]

T = TypeVar("T")
_UNSET = object()


class Deferred(Generic[T]):
    """A value made on first use by ``load`` (once, whichever thread asks first; the others wait)."""

    __slots__ = ("_load", "_lock", "_value")

    def __init__(self, load: Callable[[], T]) -> None:
        self._load: Callable[[], T] | None = load
        self._lock = threading.Lock()
        self._value: object = _UNSET

    @property
    def done(self) -> bool:
        return self._value is not _UNSET

    def get(self) -> T:
        if self._value is _UNSET:
            with self._lock:
                if self._value is _UNSET and self._load is not None:
                    self._value = self._load()
                    self._load = None  # what it closed over (the encoded bytes) can go
        return cast(T, self._value)


@dataclass(frozen=True, slots=True)
class EncodedScores:
    """A congestion report's score table as the extender's workers read it, encoded where the report
    was built (``netd.api.extender_worker.encode_scores``): the listener only forwards the bytes."""

    port_count: int
    data: bytes | memoryview  # a view of the bytes received (netd.api.snapshot_wire): not copied


class ClusterSnapshot:
    """``topology`` and ``congestion`` may be given :class:`Deferred` (decoded when first read);
    ``scores``: the report's score table, when it was encoded elsewhere (else the extender builds it
    from ``congestion``). Immutable, like the values it holds."""

    __slots__ = ("_congestion", "_topology", "emulated", "note", "scores", "timestamp", "view")
    view: str  # "host": this host only; "fabric": every host Prometheus knows
    timestamp: float  # wall clock of the data
    emulated: bool
    note: str | None  # said to every client, e.g. "no Prometheus configured: this host only"
    scores: EncodedScores | None
    _topology: Topology | None | Deferred[Topology | None]
    _congestion: CongestionReport | None | Deferred[CongestionReport | None]

    def __init__(
        self,
        view: str,
        timestamp: float,
        emulated: bool,
        topology: Topology | None | Deferred[Topology | None],
        congestion: CongestionReport | None | Deferred[CongestionReport | None],
        note: str | None = None,
        scores: EncodedScores | None = None,
    ) -> None:
        for name, value in (
            ("view", view),
            ("timestamp", timestamp),
            ("emulated", emulated),
            ("note", note),
            ("scores", scores),
            ("_topology", topology),
            ("_congestion", congestion),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ClusterSnapshot is immutable (cannot set {name})")

    @property
    def topology(self) -> Topology | None:
        t = self._topology
        return t.get() if isinstance(t, Deferred) else t

    @property
    def congestion(self) -> CongestionReport | None:
        c = self._congestion
        return c.get() if isinstance(c, Deferred) else c

    def at_hand(self) -> bool:
        """Whether reading ``topology`` and ``congestion`` costs nothing (no decoding left): a route on
        the event loop asks, and decodes in a thread when not."""
        return not any(isinstance(x, Deferred) and not x.done for x in (self._topology, self._congestion))

    def with_note(self, note: str | None) -> ClusterSnapshot:
        """The same data (decoded or not) with another note."""
        return ClusterSnapshot(
            self.view, self.timestamp, self.emulated, self._topology, self._congestion, note, self.scores
        )

    def __repr__(self) -> str:
        return f"ClusterSnapshot(view={self.view!r}, timestamp={self.timestamp!r}, note={self.note!r})"


class ServiceView(Protocol):
    def current(self) -> ClusterSnapshot | None:
        """The latest snapshot, or None before the first one exists."""
        ...

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        """Nodes already running pods of pod group ``group`` (node -> pods); None when unknowable."""
        ...


class HostView:
    """This host's view, from the daemon's latest published state (no copy: the values are frozen)."""

    def __init__(self, state: Callable[[], PublishedState | None], note: str | None = None) -> None:
        self._state = state
        self.note = note
        self._memo: tuple[PublishedState, ClusterSnapshot] | None = None

    def current(self) -> ClusterSnapshot | None:
        st = self._state()
        if st is None:
            return None
        memo = self._memo
        if memo is not None and memo[0] is st:
            return memo[1]
        snap = st.observation.snapshot
        out = ClusterSnapshot("host", snap.timestamp, snap.emulated, st.topology, st.congestion, self.note)
        self._memo = (st, out)
        return out

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        return None  # one host cannot know where other pods run

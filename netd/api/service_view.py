"""What the topology, congestion and scheduler routes read: one host's view, or the cluster's.

A :class:`ServiceView` hands out an immutable :class:`ClusterSnapshot` (topology + congestion report +
where it came from). ``netd run`` serves :class:`HostView` (this host, from the daemon's published
state); ``netd fabric`` serves the cluster view built from Prometheus (netd.cluster.view), or, with no
Prometheus configured, a HostView whose ``note`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from netd.congestion.scorer import CongestionReport
from netd.daemon.state import PublishedState
from netd.model.topology import Topology

__all__ = ["ClusterSnapshot", "HostView", "ServiceView"]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    view: str  # "host": this host only; "fabric": every host Prometheus knows
    timestamp: float  # wall clock of the data
    emulated: bool
    topology: Topology | None
    congestion: CongestionReport | None
    note: str | None = None  # said to every client, e.g. "no Prometheus configured: this host only"


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

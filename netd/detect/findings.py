"""Findings: what detectors report, with scope, severity, evidence and a one-line explanation.

A detector returns :class:`Candidate` values (what is wrong *now*); the engine turns them into
:class:`Finding` values with a lifecycle — opened, updated (new evidence or severity), resolved —
deduplicated by ``(kind, scope)``. Everything here is immutable; the engine replaces a finding with
an updated copy, and publishes an :class:`AnomalyState` that readers (API, exporter, CLI) share.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from netd.model.snapshot import frozen_map

__all__ = ["AnomalyState", "Candidate", "Evidence", "Finding", "FindingEvent", "Scope", "Severity"]

Evidence = Mapping[str, Any]  # counter deltas, rates, fractions, the thresholds they crossed


class Severity(enum.Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


@dataclass(frozen=True, slots=True)
class Scope:
    """Where: the host, and as far as known the RDMA device/port, its netdev, a priority, and a
    ``subject`` (a counter or source name) when one port can have several findings of a kind."""

    host: str
    device: str | None = None
    port: int | None = None
    netdev: str | None = None
    priority: int | None = None
    subject: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields by name, in declaration order (the API document and the log line share it)."""
        return {
            "host": self.host,
            "device": self.device,
            "port": self.port,
            "netdev": self.netdev,
            "priority": self.priority,
            "subject": self.subject,
        }


@dataclass(frozen=True, slots=True)
class Candidate:
    """A detector's statement that something is wrong now."""

    kind: str
    scope: Scope
    severity: Severity
    explanation: str
    evidence: Evidence = field(default_factory=frozen_map)

    @property
    def key(self) -> tuple[str, Scope]:
        return (self.kind, self.scope)


@dataclass(frozen=True, slots=True)
class Finding:
    """One anomaly over its life. Wall times are for humans; durations come from the monotonic clock."""

    id: str
    kind: str
    scope: Scope
    severity: Severity
    peak_severity: Severity
    explanation: str
    evidence: Evidence
    first_evidence: Evidence
    started_at: float  # wall clock of the evaluation that opened it
    last_seen_at: float
    started_monotonic: float
    last_seen_monotonic: float
    ended_at: float | None = None
    ended_monotonic: float | None = None
    resolution: str | None = None  # why it ended: "cleared", "port disappeared", "superseded by ..."
    updates: int = 0
    reopened: int = 0

    @property
    def key(self) -> tuple[str, Scope]:
        return (self.kind, self.scope)

    @property
    def active(self) -> bool:
        return self.ended_monotonic is None

    @property
    def duration_s(self) -> float:
        end = self.last_seen_monotonic if self.ended_monotonic is None else self.ended_monotonic
        return max(0.0, end - self.started_monotonic)

    @staticmethod
    def make_id(kind: str, scope: Scope, started_monotonic: float) -> str:
        text = f"{kind}|{scope}|{started_monotonic:.6f}"
        return hashlib.blake2s(text.encode(), digest_size=6).hexdigest()

    def document(self) -> dict[str, Any]:
        """The JSON shape served by /v1/anomalies and printed by `netd anomalies --json`."""
        return {
            "id": self.id,
            "kind": self.kind,
            "status": "active" if self.active else "resolved",
            "severity": self.severity.value,
            "peak_severity": self.peak_severity.value,
            "scope": self.scope.as_dict(),
            "explanation": self.explanation,
            "started_at": self.started_at,
            "last_seen_at": self.last_seen_at,
            "ended_at": self.ended_at,
            "duration_s": round(self.duration_s, 3),
            "resolution": self.resolution,
            "updates": self.updates,
            "reopened": self.reopened,
            "evidence": dict(self.evidence),
            "first_evidence": dict(self.first_evidence),
        }


@dataclass(frozen=True, slots=True)
class FindingEvent:
    """A lifecycle step: ``opened``, ``escalated``, ``deescalated``, ``reopened`` or ``resolved``."""

    action: str
    finding: Finding


@dataclass(frozen=True, slots=True)
class AnomalyState:
    """What the engine publishes after each evaluation: readers never see a half-updated engine."""

    host: str
    evaluated_at: float | None = None
    active: tuple[Finding, ...] = ()
    recent: tuple[Finding, ...] = ()  # resolved, newest first
    totals: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (kind, severity) -> n
    evaluations: int = 0
    fast_interval_s: float = 0.0  # the PFC fast path's interval; 0 when it is off
    fast_samples: int = 0  # fast-path samples taken since start
    fast_calm_samples: int = 0  # of those, put aside unevaluated: nothing paused (docs/detection.md)
    fast_cpu_seconds: float = 0.0  # CPU time those samples cost (read + evaluate)
    detector_errors: Mapping[str, int] = field(default_factory=frozen_map)  # detector -> exceptions

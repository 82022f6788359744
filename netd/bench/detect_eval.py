"""Scoring findings against labelled faults: precision, recall, detection latency, false alarms.

Matching is by kind and scope (host and port index; priority and subject where the label names them):

* a label is **detected** when a finding overlaps ``[start, end + late_s]``; its detection latency is
  the first such finding's opening time minus the fault's start (0 when it was already open);
* a finding is **true** when it overlaps some label that way, otherwise it is a **false alarm**.

``late_s`` (a couple of ticks) admits the finding of a fault that ended between two ticks. Findings
resolve on the detectors' own clocks (a flap finding stays open for its window), so a finding may
outlive its label; that is not penalised.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netd.emulated.faults import Label

__all__ = ["Observed", "score"]


@dataclass
class Observed:
    """A finding as the benchmark saw it, in emulation seconds."""

    kind: str
    host: int
    port: int | None
    priority: int | None
    subject: str | None
    opened_s: float
    closed_s: float | None = None  # None: still open when the trace ended


def _same_scope(f: Observed, label: Label) -> bool:
    if (f.kind, f.host, f.port) != (label.kind, label.host, label.port):
        return False
    if label.priority is not None and f.priority != label.priority:
        return False
    return label.subject is None or f.subject == label.subject


def _overlaps(f: Observed, label: Label, late_s: float, end_s: float) -> bool:
    closed = end_s if f.closed_s is None else f.closed_s
    return f.opened_s <= label.end_s + late_s and closed >= label.start_s


def _quantile(values: list[float], q: float) -> float | None:
    return None if not values else round(float(np.quantile(values, q)), 3)


def score(
    labels: Sequence[Label],
    findings: Sequence[Observed],
    *,
    host_hours: float,
    end_s: float,
    late_s: float = 2.0,
    kinds: Iterable[str] = (),
) -> list[dict[str, Any]]:
    """One row per kind: labelled kinds, kinds in ``kinds``, and any kind that raised a finding."""
    by_kind_labels: dict[str, list[Label]] = defaultdict(list)
    by_kind_findings: dict[str, list[Observed]] = defaultdict(list)
    for label in labels:
        by_kind_labels[label.kind].append(label)
    for f in findings:
        by_kind_findings[f.kind].append(f)
    rows = []
    for kind in sorted(set(by_kind_labels) | set(by_kind_findings) | set(kinds)):
        ls, fs = by_kind_labels[kind], by_kind_findings[kind]
        latencies = []
        for label in ls:
            hits = [f for f in fs if _same_scope(f, label) and _overlaps(f, label, late_s, end_s)]
            if hits:
                latencies.append(max(0.0, min(f.opened_s for f in hits) - label.start_s))
        true = [f for f in fs if any(_same_scope(f, lb) and _overlaps(f, lb, late_s, end_s) for lb in ls)]
        false = len(fs) - len(true)
        rows.append(
            {
                "kind": kind,
                "labels": len(ls),
                "detected": len(latencies),
                "findings": len(fs),
                "false_alarms": false,
                "precision": round(len(true) / len(fs), 4) if fs else None,
                "recall": round(len(latencies) / len(ls), 4) if ls else None,
                "median_detection_latency_s": _quantile(latencies, 0.5),
                "p95_detection_latency_s": _quantile(latencies, 0.95),
                "false_alarms_per_hour": round(false / host_hours, 3) if host_hours > 0 else None,
            }
        )
    return rows

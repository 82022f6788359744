"""Percentiles, fairness and convergence from recorded samples."""

from __future__ import annotations

import numpy as np
import pytest

from netd.lab.dataplane import QBUCKET_BYTES
from netd.lab.runner import Sample
from netd.lab.summary import convergence_s, jain_index, percentile_kb


def test_jain_index() -> None:
    assert jain_index([10, 10, 10, 10]) == pytest.approx(1.0)
    assert jain_index([40, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([]) is None and jain_index([0, 0]) is None


def test_percentile_interpolates_within_buckets() -> None:
    hist = np.zeros(256)
    hist[0] = 50  # 0..2 KB
    hist[10] = 50  # 20..22 KB
    assert percentile_kb(hist, 0.25) == pytest.approx(0.5 * QBUCKET_BYTES / 1000, abs=0.1)
    assert percentile_kb(hist, 0.99) == pytest.approx((10 + 0.98) * QBUCKET_BYTES / 1000, abs=0.1)
    assert percentile_kb(np.zeros(256), 0.5) is None


def _samples(rates_by_time: list[tuple[float, list[float]]], dt: float = 0.05) -> list[Sample]:
    """Samples whose per-flow delivered bytes grow at the given Mb/s from each time on."""
    out, delivered, t = [], np.zeros(len(rates_by_time[0][1])), 0.0
    end = rates_by_time[-1][0]
    while t <= end + 1e-9:
        rates = next(r for start, r in reversed(rates_by_time) if t >= start - 1e-9)
        out.append(Sample(round(t, 3), list(rates), delivered.astype(int).tolist(), {}))
        delivered = delivered + np.array(rates) * 1e6 / 8 * dt
        t += dt
    return out


def test_convergence_waits_for_fair_and_full() -> None:
    # symmetric but starved start (fair, not full), then unfair, then fair and full from 2 s
    samples = _samples(
        [(0.0, [5.0] * 4), (1.0, [60.0, 20.0, 10.0, 5.0]), (2.0, [24.0] * 4), (4.0, [24.0] * 4)]
    )
    t = convergence_s(samples, [0, 1, 2, 3], capacity_mbps=100.0)
    assert t is not None and 2.4 <= t <= 2.6  # the first 0.5 s window entirely after 2 s


def test_convergence_is_none_when_never_fair() -> None:
    samples = _samples([(0.0, [80.0, 10.0, 5.0, 5.0]), (3.0, [80.0, 10.0, 5.0, 5.0])])
    assert convergence_s(samples, [0, 1, 2, 3], capacity_mbps=100.0) is None

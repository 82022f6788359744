"""netd_bpf_map_evictions_total is a counter: the estimate behind it never makes it go down."""

from __future__ import annotations

import pytest

bcc_source = pytest.importorskip("netd.sources.bpf_bcc")


def test_evictions_never_decrease_when_the_map_scan_catches_up() -> None:
    source = object.__new__(bcc_source.BccBpfSource)  # only the bookkeeping, no programs loaded
    source._evictions = {}
    # created - live as ticks see it: the live count is refreshed by a scan every few seconds, so the
    # difference dips each time a scan catches up with flows created since the last one
    estimates = [0, 4, 9, 6, 6, 12, 10, 15]
    reported = [source._evicted("netd_roce_flows", e) for e in estimates]
    assert reported == [0, 4, 9, 9, 9, 12, 12, 15]
    assert all(b >= a for a, b in zip(reported, reported[1:], strict=False))
    assert source._evicted("netd_tcp_retrans", -3) == 0  # a fresh map starts at zero, never below

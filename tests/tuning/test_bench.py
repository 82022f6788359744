"""`netd bench tune-faults` as a user runs it: JSON with the issue's keys, every case accounted for."""

from __future__ import annotations

import json

import pytest

from netd.cli import main

pytestmark = pytest.mark.slow  # forks a child per kill trial on three hosts


def test_bench_prints_the_counts_and_meets_its_targets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "tune-faults", "--kills", "4", "--eio", "3", "--enospc", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kills"] == doc["restored"] == 12  # recovery_needed: stops on the way, counted besides
    assert (doc["lost"], doc["corrupt_history"], doc["empty_after_kill"]) == (0, 0, 0)
    assert doc["eio_cases"] == doc["eio_restored"] == 9
    assert doc["enospc_cases"] == doc["enospc_refused"] == 6
    assert set(doc["hosts"]) == {"debugfs", "ofed", "emulated"}
    assert all(h["call_points"] > 50 for h in doc["hosts"].values())
    assert main(["bench", "tune-faults", "--kills", "0"]) == 2
    assert "--kills must be at least 1" in capsys.readouterr().err

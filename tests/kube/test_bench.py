"""`netd bench export`: the JSON an operator reads, counted from the benchmark's documented fabric."""

from __future__ import annotations

import json

import pytest

from netd.cli import main


@pytest.mark.slow  # a second of export work
def test_bench_export_json(capsys):
    assert main(["bench", "export", "--hosts", "96", "--repeat", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # 96 hosts in units of 32 -> 3 ToR groups (8 rail ToRs each), all under one group of 32 spines
    assert out["hosts"] == 96 and out["ports"] == 96 * 8
    assert out["hypernodes"] == 3 + 1
    assert out["labels"] == 96 * 2  # ToR group and spine group; 8 rails each, so no rail label
    assert out["seconds"] > 0 and set(out) >= {"hosts", "hypernodes", "labels", "seconds"}


def test_bench_export_refuses_no_hosts(capsys):
    assert main(["bench", "export", "--hosts", "0"]) == 2
    assert "--hosts must be at least 1" in capsys.readouterr().err

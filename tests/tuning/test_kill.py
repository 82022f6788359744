"""Real SIGKILLs at random points of `apply` and of the recovery after it, on both tree kinds and on
the emulated fabric's own tree: afterwards every value is back (or committed and then rolled back),
no file was ever left without a number, the history parses and rollback works."""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import netd.tuning.params as params_module
from netd.emulated.fabric_host import EmulatedFabric
from netd.tuning.files import Files, write_all
from netd.tuning.torture import Host, build_host, count_calls, kill_trial

pytestmark = pytest.mark.slow  # ~40 forked children per host kind

TRIALS = 40  # per host: 120 kills of an apply, and about 40 of a recovery


def torture(host: Host, tmp: Path, seed: int) -> Counter[str]:
    calls = count_calls(host, tmp / "scratch")
    assert calls > 50  # the kill points cover the journal, six device writes and the commit
    rng, total = random.Random(seed), Counter[str]()
    for i in range(TRIALS):
        total += kill_trial(host, tmp / f"journal-{i}", rng, calls)
    return total


@pytest.fixture
def emulated(tmp_path: Path) -> Iterator[EmulatedFabric]:
    fabric = EmulatedFabric(tmp_path / "emu", tors=1, hosts_per_tor=2, ports_per_host=2, seed=5)
    yield fabric
    fabric.close()


@pytest.mark.parametrize("kind", ["debugfs", "ofed"])
def test_kill_anywhere_loses_nothing_on_a_tree(tmp_path: Path, kind: str) -> None:
    tree = build_host(tmp_path / "host", kind)
    try:
        host = Host(kind, tmp_path / "host")
        before = host.values()
        total = torture(host, tmp_path, seed=len(kind))
        assert total["kills"] == TRIALS and total["recovery_kills"] > 0
        assert total["restored"] == TRIALS, total
        assert total["empty_after_kill"] == 0
        assert host.values() == before
    finally:
        tree.close()


def test_kill_anywhere_loses_nothing_on_the_emulated_fabric(tmp_path: Path, emulated: EmulatedFabric) -> None:
    host = Host("emulated", emulated.host_root(0))
    emulated.advance(1.0)
    before, params = host.values(), emulated.fabric.params
    total = torture(host, tmp_path, seed=7)
    assert total["kills"] == TRIALS and total["restored"] == TRIALS, total
    assert total["empty_after_kill"] == 0
    emulated.advance(1.0)  # the emulator reads host 0's tree back: the fabric runs as before
    assert host.values() == before and emulated.fabric.params == params


def test_the_kill_trials_catch_a_writer_that_truncates_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is not vacuous: `echo N > file` (truncate, then write) is caught leaving files empty."""

    def truncating(files: Files, path: Path, data: bytes, mode: int = 0o600) -> None:
        fd = files.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            write_all(files, fd, data)
        finally:
            files.close(fd)

    monkeypatch.setattr(params_module, "atomic_replace", truncating)
    tree = build_host(tmp_path / "host", "ofed")
    try:
        assert torture(Host("ofed", tmp_path / "host"), tmp_path, seed=2)["empty_after_kill"] > 0
    finally:
        tree.close()

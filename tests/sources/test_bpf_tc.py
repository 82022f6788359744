"""Ownership of the tc attachments: a live netd's state file is respected, a dead one's is recovered."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from netd.errors import SourceError
from netd.sources.bpf_tc import Interface, TcAttacher, owner_alive, read_owner
from netd.sources.procfs import proc_stat
from tests.blocking import within


def _start_time(pid: int) -> str:
    st = proc_stat(pid)
    assert st is not None
    return st.start


def test_interface_names() -> None:
    assert Interface.parse("eth0") == Interface("eth0", None)
    assert Interface.parse("lab-b/veth1") == Interface("veth1", "lab-b")
    assert str(Interface("veth1", "lab-b")) == "lab-b/veth1" and str(Interface("eth0")) == "eth0"


def test_a_live_owner_is_not_fought(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.05)
        state = tmp_path / "bpf.json"
        state.write_text(json.dumps({"pid": other.pid, "start": _start_time(other.pid), "attachments": []}))
        assert owner_alive(other.pid, _start_time(other.pid)) and read_owner(state) == other.pid
        with pytest.raises(SourceError, match=f"netd process {other.pid} owns the eBPF probes"):
            TcAttacher(state)
        assert state.exists()
        # the same pid with another start time is a reused pid: its attachments are stale
        state.write_text(json.dumps({"pid": other.pid, "start": "1", "attachments": []}))
        assert read_owner(state) is None
        TcAttacher(state)
        assert not state.exists()
    finally:
        other.kill()
        other.wait()


def test_a_dead_owner_is_recovered_even_when_its_interfaces_are_gone(tmp_path: Path) -> None:
    state = tmp_path / "bpf.json"
    entry = {"name": "nbgone0", "netns": None, "hook": "ingress", "program": "netd_roce_ingress"}
    state.write_text(json.dumps({"pid": 2**22 + 7, "start": "5", "attachments": [entry]}))
    attacher = TcAttacher(state)
    assert attacher.replaced == [] and not state.exists()  # nothing to clean on a vanished interface


@pytest.mark.parametrize("kind", ["not json", "fifo", "directory"])
def test_an_unreadable_state_file_is_ignored(tmp_path: Path, kind: str) -> None:
    # A FIFO there would hold the daemon's eBPF start in open() for a writer that never comes.
    state = tmp_path / "bpf.json"
    if kind == "fifo":
        os.mkfifo(state)
    elif kind == "directory":
        state.mkdir()
    else:
        state.write_text("{not json")
    assert within(10, lambda: (TcAttacher(state).attachments, read_owner(state))) == ([], None)

"""pid_alive: what the lab's teardown waits on, with processes exiting under it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netd.lab.netns import pid_alive

# /proc/<pid>/stat as the kernel writes it: "pid (comm) state ..." and 49 more fields; comm may hold ") "
_REST = " 0" * 49
STAT_CASES = [
    ("1234 (sleep) S 1 1234 1234 0 -1" + _REST, True),
    ("1234 (agent) R 1 1234" + _REST, True),
    ("1234 (agent) Z 1 1234" + _REST, False),  # exited, not yet reaped
    ("1234 (a) Z) S 1 1234" + _REST, True),  # the last ") " ends comm
    ("", False),  # the task went away while it was read
    ("1234 (agent) R 1", False),  # cut short: not a stat this kernel writes
]


@pytest.mark.parametrize(("stat", "alive"), STAT_CASES)
def test_pid_alive_reads_the_state_after_comm(tmp_path: Path, stat: str, alive: bool) -> None:
    pid = os.getpid()  # a process that answers signal 0, so the stat decides
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / "stat").write_text(stat)
    assert pid_alive(pid, proc=tmp_path) is alive


def test_a_process_gone_between_the_signal_and_the_read_is_not_alive(tmp_path: Path) -> None:
    """The race CI hit: signal 0 still found the task, its stat no longer readable."""
    assert pid_alive(os.getpid(), proc=tmp_path) is False  # no <pid>/stat under this root


def test_real_processes_running_zombie_and_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert pid_alive(child.pid)
        assert child.stdin is not None
        child.stdin.close()  # it exits; not reaped yet, so a zombie
        deadline = time.monotonic() + 10
        while pid_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not pid_alive(child.pid)
        assert Path(f"/proc/{child.pid}/stat").exists()  # still there, as a zombie
    finally:
        child.wait(10)
    assert not pid_alive(child.pid)

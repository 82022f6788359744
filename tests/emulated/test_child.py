"""The emulated fabric in a child process: lockstep with the daemon, same trees, clean ends."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from netd.emulated.child import EmulatorProcess
from netd.emulated.fabric_host import EmulatedFabric
from netd.errors import NetdError

OPTIONS = {"tors": 1, "hosts_per_tor": 2, "ports_per_host": 2, "seed": 5, "sim_ms_per_tick": 5.0}


def _counter(root: Path, name: str) -> int:
    return int((root / "class/infiniband/mlx5_0/ports/1/counters" / name).read_text())


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def child(tmp_path: Path):
    proc = EmulatorProcess(tmp_path / "emu", **OPTIONS)
    yield proc
    proc.close()


def test_renders_what_the_in_process_emulator_renders(child: EmulatorProcess, tmp_path: Path):
    inline = EmulatedFabric(tmp_path / "inline", **OPTIONS)  # same seed and shape
    try:
        for _ in range(3):
            child.advance(0.5)
            inline.advance(0.5)
        child.advance(0.1, sim_ms=1.0, render=(1,))  # a fast-path step: host 1's tree only
        inline.advance(0.1, sim_ms=1.0, render=(1,))
        for host in (0, 1):
            assert _tree(child.host_root(host)) == _tree(inline.host_root(host))
        assert _counter(child.host_root(0), "port_xmit_data") > 0  # the fabric really ran
        assert child.elapsed_s == pytest.approx(1.6) and child.n_hosts == 2
        assert child.host_name(1) == "emu-host1"
    finally:
        inline.close()


def test_advance_returns_after_the_trees_are_written(child: EmulatorProcess):
    root = child.host_root(0)
    before = _counter(root, "port_xmit_data")
    child.advance(1.0)
    assert _counter(root, "port_xmit_data") > before


def test_start_up_errors_surface_in_the_daemon(child: EmulatorProcess):
    with pytest.raises(NetdError, match="another netd is running the emulated fabric"):
        EmulatorProcess(child.state_dir, **OPTIONS)
    with pytest.raises(NetdError, match="out of range"):
        child.host_root(2)


def test_a_dead_child_is_an_error_not_a_hang(child: EmulatorProcess):
    os.kill(child._proc.pid, signal.SIGKILL)
    child._proc.wait()
    with pytest.raises(NetdError, match="emulated fabric process exited"):
        child.advance(0.5)


def test_close_ends_the_child_and_frees_the_state_dir(tmp_path: Path):
    first = EmulatorProcess(tmp_path / "emu", **OPTIONS)
    proc = first._proc
    first.close()
    assert proc is not None and proc.returncode == 0
    second = EmulatorProcess(tmp_path / "emu", **OPTIONS)  # the lock went with the child
    second.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_ctrl_c_sigterm_or_sighup_to_the_group_does_not_kill_the_child(child: EmulatorProcess, sig):
    # a terminal's Ctrl-C, systemd stopping the service's cgroup, or a reload sent to the whole group
    os.kill(child._proc.pid, sig)
    child.advance(0.5)  # still answering: the daemon decides when it stops


def test_a_dead_child_is_restarted_after_a_backoff(tmp_path: Path):
    now = [0.0]
    child = EmulatorProcess(tmp_path / "emu", clock=lambda: now[0], **OPTIONS)
    root = child.host_root(0)
    try:
        child.advance(0.5)
        os.kill(child._proc.pid, signal.SIGKILL)
        with pytest.raises(NetdError, match="exited.*restart attempt 1 in 0.5 s"):
            child.advance(0.5)
        with pytest.raises(NetdError, match="restart attempt 1"):  # within the backoff: no new child
            child.advance(0.5)
        assert child._proc is None and child.restarts == 0
        now[0] += 0.5
        child.advance(0.5)  # restarted: lockstep again, on the same trees
        assert child.restarts == 1 and _counter(root, "port_xmit_data") > 0
        os.kill(child._proc.pid, signal.SIGKILL)  # dying again right away: the backoff starts over
        with pytest.raises(NetdError, match="restart attempt 1 in 0.5 s"):
            child.advance(0.5)
    finally:
        child.close()


def test_a_child_that_cannot_restart_backs_off_further(tmp_path: Path):
    now = [0.0]
    child = EmulatorProcess(tmp_path / "emu", clock=lambda: now[0], **OPTIONS)
    try:
        child._spec = child._spec.replace('"tors": 1', '"tors": 0')  # the next start fails
        os.kill(child._proc.pid, signal.SIGKILL)
        with pytest.raises(NetdError, match="attempt 1 in 0.5 s"):
            child.advance(0.5)
        waits = []
        for _ in range(3):
            now[0] += 100.0
            with pytest.raises(NetdError, match="restarting the emulated fabric process failed") as failed:
                child.advance(0.5)
            waits.append(str(failed.value).rsplit(" in ", 1)[1])
        assert waits == ["1 s", "2 s", "4 s"]
    finally:
        child.close()

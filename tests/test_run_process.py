"""`netd run` as a real process: emulated fabric on a loopback listener, read by `netd status` and HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.processes import Child, stop, wait_ready

pytestmark = pytest.mark.slow  # runs `netd run` as a process


@pytest.fixture
def daemon(tmp_path: Path, free_port: int):
    env = {**os.environ, "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"), "NETD_SYSFS_ROOT": str(tmp_path)}
    proc = Child(
        [sys.executable, "-m", "netd", "run", "--listen", f"127.0.0.1:{free_port}", "--interval", "0.5"],
        env=env,
        start_new_session=True,  # its own process group, as systemd gives a service
    )
    url = f"http://127.0.0.1:{free_port}"
    try:
        wait_ready(url, proc)
        yield proc, url, env
    finally:
        stop(proc, timeout=15)


def test_emulated_fabric_end_to_end(daemon, free_port):
    proc, url, env = daemon
    time.sleep(1.2)  # at least two ticks, so there are rates
    metrics = httpx.get(url + "/metrics", timeout=5).text
    assert 'emulated="true"' in metrics
    assert "netd_fabric_emulated 1.0" in metrics
    assert 'netd_rdma_rx_bytes_total{device="mlx5_0",port="1"}' in metrics
    assert 'netd_pfc_pause_frames_total{direction="rx",netdev="ens1f0np0",priority="3"}' in metrics
    assert 'netd_source_up{source="rdma"} 1.0' in metrics

    status = subprocess.run(
        [sys.executable, "-m", "netd", "status", "--listen", f"127.0.0.1:{free_port}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert status.returncode == 0, status.stderr
    assert "EMULATED FABRIC" in status.stdout
    assert "mlx5_0/1" in status.stdout and "mlx5_1/1" in status.stdout
    emulator = [pid for pid in _children(proc.pid) if "netd.emulated.child" in _cmdline(pid)]
    assert len(emulator) == 1  # the fabric runs in its own process (netd.emulated.child)

    os.killpg(proc.pid, signal.SIGTERM)  # as systemd stops a service: the whole group at once
    proc.wait(timeout=15)
    err = proc.stderr_text()
    assert proc.returncode == 0, err
    assert "EMULATED FABRIC" in err  # the banner says so
    assert "Traceback" not in err and "emulated fabric:" not in err  # the child waited for the daemon
    assert not Path(f"/proc/{emulator[0]}").exists() or "netd.emulated.child" not in _cmdline(emulator[0])


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # a thread that ended since the listing
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_a_second_daemon_on_the_same_port_fails_clearly(daemon, free_port, tmp_path: Path):
    _, _, env = daemon
    env = {**env, "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu2")}
    second = subprocess.run(
        [sys.executable, "-m", "netd", "run", "--listen", f"127.0.0.1:{free_port}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 2
    assert f"netd: cannot listen on 127.0.0.1:{free_port}: Address already in use" in second.stderr
    assert "EMULATED" not in second.stderr  # failed before starting anything

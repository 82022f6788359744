"""`netd run` on the emulated fabric as a real process: /v1/qos, /v1/qos/fabric, the metrics, and
`netd qos --fabric` against it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.processes import Child, stop, wait_ready

pytestmark = pytest.mark.slow  # runs `netd run` as a process


def test_emulated_fabric_serves_qos_and_the_audit(tmp_path: Path, free_port: int) -> None:
    env = {
        **os.environ,
        "NETD_CONFIG": "/dev/null",
        "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"),
        "NETD_SYSFS_ROOT": str(tmp_path),
    }
    listen = f"127.0.0.1:{free_port}"
    proc = Child([sys.executable, "-m", "netd", "run", "--listen", listen], env=env)
    url = f"http://{listen}"
    try:
        wait_ready(url, proc)
        host = httpx.get(url + "/v1/qos", timeout=10).json()
        audit = httpx.get(url + "/v1/qos/fabric", timeout=30).json()
        metrics = httpx.get(url + "/metrics", timeout=10).text
        cli = subprocess.run(
            [sys.executable, "-m", "netd", "qos", "--fabric", "--listen", listen],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        stop(proc)
    stderr = proc.stderr_text()
    assert host["host"] == "emu-host0" and len(host["ports"]) == 2
    assert host["ports"][0]["settings"]["pfc"] == "3" and host["local_findings"] == []
    assert audit["hosts"] == 8 and audit["ports"] == 16
    assert [f["host"] for f in audit["findings"]] == ["emu-host2", "emu-host5", "emu-host7"]
    assert (
        'netd_qos_setting_info{device="mlx5_0",netdev="ens1f0np0",port="1",setting="trust",value="dscp"} 1.0'
        in (metrics)
    )
    assert cli.returncode == 1  # hosts differ
    assert "emu-host7  (tor emu-tor1)" in cli.stdout
    assert "fix: dcb pfc set dev ens1f0np0 prio-pfc all:off 3:on" in cli.stdout
    assert "QoS: 2 ports read every 60 s; GET /v1/qos and /v1/qos/fabric" in stderr

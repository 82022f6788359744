"""`netd qos` as a user runs it: a real process over an emulated host's tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netd.emulated.qos_state import render_qos
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree


def _netd(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NETD_CONFIG": "/dev/null"}
    return subprocess.run([sys.executable, "-m", "netd", *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_netd_qos_table_and_json(tmp_path: Path) -> None:
    with SysfsTree(tmp_path) as tree:
        tree.add_device(DeviceSpec(name="mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0"))
        render_qos(tmp_path, [("mlx5_0", "ens1f0np0")], ("trust_pcp",))
        table = _netd("qos", "--sysfs-root", str(tmp_path))
        doc = _netd("qos", "--sysfs-root", str(tmp_path), "--json")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[1:3]
    assert header.split()[:5] == ["DEVICE", "NETDEV", "TRUST", "DSCP->PRIO", "PFC"]
    assert row.split()[:5] == ["mlx5_0", "ens1f0np0", "pcp", "none", "3"]
    assert "local inconsistencies: none" in table.stdout
    assert doc.returncode == 0
    assert json.loads(doc.stdout)["ports"][0]["settings"]["trust"] == "pcp"


@pytest.mark.slow
def test_netd_qos_errors_are_one_line(tmp_path: Path) -> None:
    empty = _netd("qos", "--sysfs-root", str(tmp_path))
    assert empty.returncode == 2 and empty.stderr.count("\n") == 1 and "no RDMA devices" in empty.stderr
    fabric = _netd("qos", "--fabric", "--listen", "127.0.0.1:1")
    assert fabric.returncode == 2 and fabric.stderr.startswith("netd: no netd daemon at 127.0.0.1:1")

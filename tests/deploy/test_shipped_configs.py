"""The configurations netd ships for hosts (`make install`'s /etc/netd/netd.toml, the DaemonSet's
ConfigMap) run a real `netd run` on a host whose RDMA driver loads after netd started: no emulated
fabric, ever, and the devices read from the tick after they appear."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from netd.bench.static_tree import StaticHost
from tests.processes import Child, wait_ready

pytestmark = pytest.mark.slow  # runs `netd run` as a process

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["deploy/netd.toml", "deploy/kubernetes/base/netd.toml"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _lines(text: str, family: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(family + "{")]


@pytest.mark.parametrize("shipped", SHIPPED)
def test_a_driver_that_loads_after_netd_starts_is_read_and_nothing_is_emulated(
    tmp_path: Path, shipped: str
) -> None:
    root = tmp_path / "sys"
    root.mkdir()  # no class/infiniband yet: mlx5_ib not loaded
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("NETD_")},
        "NETD_SYSFS_ROOT": str(root),
        "NETD_LISTEN": f"127.0.0.1:{port}",  # the DaemonSet's 0.0.0.0, kept on loopback here
        "NETD_HOST": "gpu-07",
        "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"),  # where an emulated fabric would write
        "NETD_NCCL_SOCKET": str(tmp_path / "nccl.sock"),
        "NETD_TUNING_STATE_DIR": str(tmp_path / "tuning"),
        "NETD_BPF_STATE_FILE": str(tmp_path / "bpf.json"),
    }
    url = f"http://127.0.0.1:{port}"
    proc = Child([sys.executable, "-m", "netd", "run", "--config", str(REPO / shipped)], env=env)
    host = None
    try:
        wait_ready(url, proc)
        before = httpx.get(url + "/metrics", timeout=5).text
        assert _lines(before, "netd_port_info") == []  # no device, and no simulator standing in for one
        assert not (tmp_path / "emu").exists()

        host = StaticHost(root, 2)  # the driver loads: two dual-port NICs appear
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            host.advance(1.0)
            text = httpx.get(url + "/metrics", timeout=5).text
            if len(_lines(text, "netd_rdma_rx_bytes_total")) == 4:
                break
            time.sleep(1.0)
        info = _lines(text, "netd_port_info")
        assert len(info) == 4 and all('emulated="false"' in i and 'host="gpu-07"' in i for i in info), info
        assert len(_lines(text, "netd_rdma_rx_bytes_total")) == 4
        assert not (tmp_path / "emu").exists()
        assert "EMULATED" not in proc.stderr_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if host is not None:
            host.close()
    assert "Traceback" not in proc.stderr_text()

"""The fabric audit of `netd fabric` through a real Prometheus (Debian's package): three emulated hosts'
QoS exporters on loopback (the real collector over each host's tree, beside the `netd_port_info` join
series a host daemon exports), scraped, queried back and compared."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric

from netd.config.qos import QosConfig
from netd.config.settings import load_config
from netd.emulated.qos_state import render_qos
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.qos.fabric import FabricQos, from_prometheus
from netd.qos.metrics import QosCollector
from netd.qos.service import QosService
from netd.sources.prometheus import PrometheusClient
from tests.integration.netns import wait_for

pytestmark = pytest.mark.slow  # starts Prometheus


class _PortInfo:
    """The identity series netd's core exporter gives every port (host and ToR labels for the join)."""

    def __init__(self, host: str, tor: str) -> None:
        self.host, self.tor = host, tor

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("netd_port_info", "join", labels=["device", "port", "host", "tor"])
        info.add_metric(["mlx5_0", "1", self.host, self.tor], 1)
        yield info


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[str]:
    if shutil.which("prometheus") is None:
        pytest.skip("needs Debian's prometheus package")
    servers = []
    targets = []
    trees = []
    cfg = load_config(environ={})
    for i, drifts in enumerate(((), (), ("trust_pcp", "pfc_priority"))):
        root = tmp_path / f"h{i}"
        tree = SysfsTree(root)
        trees.append(tree)
        tree.add_device(DeviceSpec(name="mlx5_0", netdev="ens1f0np0", pci="0000:41:00.0"))
        render_qos(root, [("mlx5_0", "ens1f0np0")], drifts)
        service = QosService(cfg, root, f"h{i}")
        service.refresh()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(QosCollector(service))
        registry.register(_PortInfo(f"h{i}", "tor0"))
        port = _free_port()
        servers.append(start_http_server(port, "127.0.0.1", registry))
        targets.append(f"'127.0.0.1:{port}'")
    prom_port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\n"
        f"scrape_configs:\n  - job_name: netd\n    static_configs: [{{targets: [{', '.join(targets)}]}}]\n"
    )
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{prom_port}"

    def scraped() -> bool:
        try:
            q = {"query": "count(count by (instance) (netd_qos_setting_info))"}
            r = httpx.get(f"{url}/api/v1/query", params=q, timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return False
        result = r.get("data", {}).get("result") or []
        return bool(result) and result[0]["value"][1] == "3"

    try:
        wait_for(scraped, timeout_s=120, what="Prometheus to scrape the three hosts")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for server, thread in servers:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        for tree in trees:
            tree.close()


def test_the_audit_from_prometheus_names_the_drifted_host(prometheus: str) -> None:
    client = PrometheusClient(prometheus)
    try:
        doc = FabricQos(from_prometheus(client), QosConfig(), origin=prometheus).document()
    finally:
        client.close()
    assert doc["error"] is None and doc["hosts"] == 3 and doc["ports"] == 3
    (finding,) = doc["findings"]
    assert finding["host"] == "h2" and finding["tor"] == "tor0"
    pfc = next(d for d in finding["differences"] if d["setting"] == "pfc")
    assert (pfc["actual"], pfc["expected"], pfc["basis"]) == ("4", "3", "majority of tor tor0 (2/3 ports)")
    assert {d["setting"] for d in finding["differences"]} == {"trust", "dscp_prio", "pfc", "prio_buffer"}

"""Local inconsistencies on one host; the audit over the emulated fabric's own hosts; /v1/qos and metrics."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from netd.config.qos import QosConfig
from netd.config.settings import load_config
from netd.emulated.fabric_host import EmulatedFabric
from netd.emulated.fabric_topology import tor_name
from netd.model.bpf import RoceClassCount
from netd.qos.fabric import FabricQos, from_emulated_trees
from netd.qos.local import local_findings
from netd.qos.metrics import QosCollector
from netd.qos.routes import fabric_qos_router, qos_router
from netd.qos.service import QosService
from netd.sources.qos import PortQos


def _port(**kw: object) -> PortQos:
    base: dict[str, object] = {
        "trust": "dscp",
        "dscp_prio": ((26, 3), (48, 6)),
        "pfc": (3,),
        "ecn": (3,),
        "dcqcn": (3,),
    }
    base.update(kw)
    return PortQos("mlx5_0", 1, "eth0", **base)  # type: ignore[arg-type]


def test_a_consistent_port_has_no_local_findings() -> None:
    """CNPs (DSCP 48, the NIC's np_cnp_dscp default) ride a priority without PFC by design."""
    classes = [RoceClassCount("ingress", 26, 2, 1000, 10**6), RoceClassCount("egress", 48, 0, 10, 640)]
    assert local_findings([_port()], classes) == []


def test_pfc_on_a_priority_without_ecn() -> None:
    (f,) = local_findings([_port(pfc=(3, 4))])
    assert (f.kind, f.priority) == ("pfc_without_ecn", 4)
    base = "/sys/class/net/eth0/ecn"
    assert f.fix == f"echo 1 > {base}/roce_np/enable/4; echo 1 > {base}/roce_rp/enable/4"


def test_roce_seen_on_a_priority_without_pfc() -> None:
    # DSCP 26 maps to 3 but PFC is on 4 only; DSCP 34 is not in the APP table: mlx5's default 34 >> 3 = 4.
    port = _port(pfc=(4,), ecn=(4,), dcqcn=(4,))
    classes = [RoceClassCount("ingress", 26, 2, 500, 5 * 10**5), RoceClassCount("ingress", 34, 2, 7, 7000)]
    (f,) = local_findings([port], classes)
    assert (f.kind, f.priority) == ("roce_on_lossy_priority", 3)
    assert "500 RoCEv2 packets with DSCP 26" in f.message
    assert f.fix == "dcb pfc set dev eth0 prio-pfc all:off 3:on 4:on"


def test_under_pcp_trust_dscp_says_nothing_about_the_priority() -> None:
    port = _port(trust="pcp", dscp_prio=(), pfc=(4,), ecn=(4,), dcqcn=(4,))
    assert local_findings([port], [RoceClassCount("ingress", 26, 2, 500, 1)]) == []


@contextmanager
def _emulated_audit(
    tmp_path: Path, tors: int, hosts_per_tor: int
) -> Iterator[tuple[EmulatedFabric, FabricQos]]:
    fabric = EmulatedFabric(tmp_path / "emu", tors=tors, hosts_per_tor=hosts_per_tor, ports_per_host=1)
    roots = {
        fabric.host_name(h): (fabric.host_root(h), tor_name(h // hosts_per_tor))
        for h in range(fabric.n_hosts)
    }
    try:
        yield fabric, FabricQos(from_emulated_trees(roots), QosConfig(), origin="test")
    finally:
        fabric.close()


def test_one_host_misconfigured_on_purpose_is_exactly_one_finding(tmp_path: Path) -> None:
    """Four hosts on one ToR; the emulator leaves the last in PCP trust with PFC on priority 4."""
    with _emulated_audit(tmp_path, tors=1, hosts_per_tor=4) as (_, audit):
        result = audit.current()
    assert result is not None
    (finding,) = result.findings
    assert finding.host == "emu-host3" and finding.tor == "emu-tor0"
    assert {d.setting for d in finding.differences} == {"trust", "dscp_prio", "pfc", "prio_buffer"}


@pytest.mark.slow
def test_the_default_emulated_fabric_has_three_drifted_hosts(tmp_path: Path) -> None:
    with _emulated_audit(tmp_path, tors=2, hosts_per_tor=4) as (_, audit):
        doc = audit.document()
    assert [f["host"] for f in doc["findings"]] == ["emu-host2", "emu-host5", "emu-host7"]
    assert {d["setting"] for d in doc["findings"][0]["differences"]} == {"dcqcn.rp_ai_rate"}
    assert {d["setting"] for d in doc["findings"][1]["differences"]} == {"dcqcn", "cc_algorithm"}


def test_routes_and_metrics_serve_the_last_reading(tmp_path: Path) -> None:
    with _emulated_audit(tmp_path, tors=1, hosts_per_tor=4) as (fabric, audit):
        cfg = load_config(environ={})
        service = QosService(cfg, fabric.host_root(3), "emu-host3")
        service.refresh()
        app = FastAPI()
        app.include_router(qos_router(service))
        app.include_router(fabric_qos_router(audit))
        client = TestClient(app)
        host = client.get("/v1/qos").json()
        audited = client.get("/v1/qos/fabric").json()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(QosCollector(service))
        text = generate_latest(registry).decode()
    assert host["ports"][0]["settings"]["trust"] == "pcp"
    assert [f["kind"] for f in host["local_findings"]] == ["pfc_without_ecn"]
    assert [f["host"] for f in audited["findings"]] == ["emu-host3"]
    assert (
        'netd_qos_setting_info{device="mlx5_0",netdev="ens1f0np0",port="1",setting="pfc",value="4"} 1.0'
        in text
    )
    assert 'netd_qos_pfc_enabled{device="mlx5_0",port="1",priority="4"} 1.0' in text
    assert 'netd_qos_pfc_enabled{device="mlx5_0",port="1",priority="3"} 0.0' in text
    assert 'netd_qos_mtu_bytes{device="mlx5_0",port="1"} 4200.0' in text
    assert 'netd_qos_local_findings{kind="pfc_without_ecn"} 1.0' in text
    assert "netd_qos_reads_total 1.0" in text


def test_an_unreachable_prometheus_is_said_and_the_last_audit_kept(free_port: int) -> None:
    from netd.qos.fabric import from_prometheus
    from netd.sources.prometheus import PrometheusClient

    client = PrometheusClient(f"http://127.0.0.1:{free_port}", timeout_s=1.0)  # nothing listens there
    try:
        audit = FabricQos(from_prometheus(client), QosConfig(), origin="down", max_age_s=0.0)
        doc = audit.document()
    finally:
        client.close()
    assert "findings" not in doc and doc["origin"] == "down"
    assert doc["error"].startswith(f"prometheus: http://127.0.0.1:{free_port} unreachable")

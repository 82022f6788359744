"""The probes' data above the source: the collector, Prometheus, GET /v1/flows, `netd flows`, the
[bpf] configuration, the daemon's wiring and `netd check`, with a fake source (no kernel needed)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import Collector as PromCollector

from netd.api.app import create_app
from netd.cli import main
from netd.commands.bpf_check import bpf_check
from netd.commands.flows import render_flows
from netd.config.settings import load_config
from netd.daemon import bpf as bpf_wiring
from netd.daemon.state import PublishedState
from netd.errors import ConfigError, SourceError
from netd.exporter import NetdCollector
from netd.exporter.bpf import bpf_families
from netd.model.bpf import (
    BpfSample,
    FlowRecord,
    MapFill,
    PfcCounts,
    ProbeState,
    ProgramStats,
    RoceClassCount,
    TcpEndpoint,
)
from netd.model.snapshot import Snapshot
from netd.series.tracker import SeriesTracker
from netd.sources.bpf import BpfSettings, FakeBpfSource, UnavailableBpfSource
from netd.sources.bpf_layout import EBPF_DIR
from netd.sources.bpf_probes import Environment
from netd.sources.collect import Sampler

NOW = 1_800_000_000.0


def flow(qp: int, **kw: Any) -> FlowRecord:
    base = dict(
        src="::ffff:10.0.0.1",
        dst="::ffff:10.0.0.2",
        dest_qp=qp,
        direction="ingress",
        packets=100,
        bytes=10_000,
        ce=0,
        ect=100,
        cnp=0,
        acks=0,
        naks=0,
        nak_seq=0,
        psn_gaps=0,
        psn_missing=0,
        psn_rewinds=0,
        dscp=26,
        last_opcode=0x0A,
        first_seen=NOW - 60,
        last_seen=NOW - 1,
    )
    return FlowRecord(**(base | kw))  # type: ignore[arg-type]


SAMPLE = FakeBpfSource.attached(
    roce_classes=(RoceClassCount("ingress", 26, 2, 90, 9000), RoceClassCount("ingress", 26, 3, 10, 1000)),
    roce_events={
        ("ingress", "cnp"): 4,
        ("ingress", "nak_seq"): 2,
        ("ingress", "rej_bth"): 1,
        ("ingress", "psn_gap"): 1,
        ("ingress", "flow_new"): 3,
    },
    flows=(
        flow(0x11, ce=10, ect=90),
        flow(0x22, naks=3, nak_seq=3, psn_gaps=2, psn_missing=5, bytes=50_000),
        flow(0x33, src="::ffff:10.0.0.2", dst="::ffff:10.0.0.1", cnp=4, direction="egress", bytes=400),
        flow(0x44, src="fd00::1", dst="fd00::2", packets=5, bytes=500),
    ),
    flows_scanned_at=NOW - 2,
    pfc=(
        PfcCounts(
            "lab/eth1",
            6,
            1,
            256,
            0,
            9,
            0,
            0,
            (0, 0, 0, 9, 0, 0, 0, 0),
            (0, 0, 0, 9 * 65535, 0, 0, 0, 0),
            (0, 0, 0, 2, 0, 0, 0, 0),
        ),
    ),
    tcp_retransmits=7,
    tcp_endpoints=(TcpEndpoint("10.0.0.9", 29500, "ipv4", 7, "ESTABLISHED", NOW - 5, NOW - 3),),
    rdma_events={"qp_create": 2, "qp_create_fail": 1},
    maps=(MapFill("netd_roce_flows", 3, 16384, 0),),
    programs=(ProgramStats("netd_roce_ingress", 1000, 25_000), ProgramStats("netd_pfc_ingress", None, None)),
    run_stats=True,
)


def state_with(bpf: BpfSample | None) -> PublishedState:
    snap = Snapshot(timestamp=NOW, monotonic=100.0, host="h1", bpf=bpf)
    return PublishedState(observation=SeriesTracker().update(snap))


def exposition(sample: BpfSample) -> str:
    class Only(PromCollector):
        def collect(self) -> Iterator[Any]:
            yield from bpf_families(sample)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Only())
    return generate_latest(registry).decode()


def test_prometheus_families_have_no_flow_or_address_labels() -> None:
    text = exposition(SAMPLE)
    for line in (
        'netd_bpf_probe_up{probe="roce"} 1.0',
        'netd_bpf_probe_info{attach="fake",probe="pfc",state="attached"} 1.0',
        'netd_bpf_roce_packets_total{direction="ingress",dscp="26",ecn="ce"} 10.0',
        'netd_bpf_roce_bytes_total{direction="ingress",dscp="26",ecn="ect0"} 9000.0',
        'netd_bpf_roce_cnp_total{direction="ingress"} 4.0',
        'netd_bpf_roce_acks_total{direction="ingress",kind="nak_seq"} 2.0',
        'netd_bpf_roce_psn_gaps_total{direction="ingress"} 1.0',
        'netd_bpf_roce_rejected_packets_total{direction="ingress",kind="bth"} 1.0',
        'netd_bpf_pfc_frames_total{netdev="lab/eth1",priority="3"} 9.0',
        'netd_bpf_pfc_resume_frames_total{netdev="lab/eth1",priority="3"} 2.0',
        'netd_bpf_mac_control_frames_total{kind="pause",netdev="lab/eth1"} 1.0',
        "netd_bpf_tcp_retransmits_total 7.0",
        'netd_bpf_rdma_qp_events_total{kind="create_failed"} 1.0',
        "netd_bpf_run_stats_enabled 1.0",
        'netd_bpf_program_runs_total{program="netd_roce_ingress"} 1000.0',
        'netd_bpf_program_run_seconds_total{program="netd_roce_ingress"} 2.5e-05',
        'netd_bpf_map_entries{map="netd_roce_flows"} 3.0',
        'netd_bpf_map_evictions_total{map="netd_roce_flows"} 0.0',
    ):
        assert line in text, line
    labels = set(re.findall(r'[{,](\w+)="', text))
    assert labels == {
        "probe",
        "state",
        "attach",
        "direction",
        "dscp",
        "ecn",
        "kind",
        "netdev",
        "priority",
        "program",
        "map",
    }
    assert "10.0.0" not in text and "fd00" not in text
    assert 'program="netd_pfc_ingress"' not in text  # no statistics for it: omitted, not 0


def test_an_unattached_probe_exports_only_its_state() -> None:
    sample = UnavailableBpfSource("needs root", BpfSettings(pfc=False)).read()
    text = exposition(sample)
    assert 'netd_bpf_probe_up{probe="roce"} 0.0' in text
    assert 'netd_bpf_probe_info{attach="",probe="pfc",state="disabled"} 1.0' in text
    assert "netd_bpf_roce_packets" not in text and "netd_bpf_tcp_retransmits" not in text


def test_netd_collector_includes_the_probes() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NetdCollector(lambda: state_with(SAMPLE)))
    assert "netd_bpf_tcp_retransmits_total 7.0" in generate_latest(registry).decode()


@pytest.fixture
def client() -> TestClient:
    return TestClient(create_app(lambda: state_with(SAMPLE), lambda: 0.1, 1.0))


def test_flows_endpoint_top_lists(client: TestClient) -> None:
    doc = client.get("/v1/flows", params={"top": 2}).json()
    assert [f["dest_qp"] for f in doc["congested"]] == [0x11, 0x33]  # CE 10, then CNP 4
    assert [f["dest_qp"] for f in doc["victims"]] == [0x22]  # the only one with NAKs and gaps
    assert [f["dest_qp"] for f in doc["flows"]] == [0x11, 0x33] and doc["total_flows"] == 4
    top = doc["congested"][0]
    assert (top["src_ip"], top["dst_ip"], top["ce_fraction"], top["congestion_score"]) == (
        "10.0.0.1",
        "10.0.0.2",
        0.1,
        10,
    )
    assert doc["tcp_retransmits"] == {
        "total": 7,
        "endpoints": [
            {
                "address": "10.0.0.9",
                "port": 29500,
                "family": "ipv4",
                "retransmits": 7,
                "state": "ESTABLISHED",
                "first_seen": NOW - 5,
                "last_seen": NOW - 3,
            }
        ],
    }
    assert {p["probe"] for p in doc["probes"]} == {"roce", "pfc", "tcp_retransmits", "rdma_cm"}


def test_flows_endpoint_sort_and_direction(client: TestClient) -> None:
    doc = client.get("/v1/flows", params={"sort": "bytes", "direction": "ingress"}).json()
    assert [f["dest_qp"] for f in doc["flows"]] == [0x22, 0x11, 0x44]
    assert client.get("/v1/flows", params={"sort": "loudest"}).status_code == 422
    assert client.get("/v1/flows", params={"top": 0}).status_code == 422


def test_flows_endpoint_without_probes() -> None:
    off = TestClient(create_app(lambda: state_with(None), lambda: 0.1, 1.0))
    r = off.get("/v1/flows")
    assert r.status_code == 404 and "[bpf] enabled" in r.json()["detail"]
    assert TestClient(create_app(lambda: None, lambda: None, 1.0)).get("/v1/flows").status_code == 503


def test_render_flows_tables(client: TestClient) -> None:
    text = render_flows(client.get("/v1/flows").json(), now=NOW)
    assert "Top congested flows (CE marks + CNPs):" in text and "Top victim flows" in text
    congested = text.split("Top congested flows")[1].split("Top victim")[0].splitlines()
    assert congested[1].split()[:4] == ["DIR", "SOURCE", "DESTINATION", "QP"]
    assert congested[2].split()[:4] == ["ingress", "10.0.0.1", "10.0.0.2", "0x11"]
    assert "10.0" in congested[2] and "1s ago" in congested[2]
    assert "TCP retransmissions: 7 since the probe was loaded" in text and "29500" in text


def test_netd_flows_command(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fake_get(url: str, params: dict[str, Any], timeout: float) -> httpx.Response:
        assert url == "http://127.0.0.1:9555/v1/flows"
        r = client.get("/v1/flows", params=params)
        return httpx.Response(r.status_code, content=r.content, headers=r.headers)

    monkeypatch.setattr(httpx, "get", fake_get)
    assert main(["flows", "--listen", "127.0.0.1:9555", "--json", "--top", "1", "--sort", "victims"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sort"] == "victims" and [f["dest_qp"] for f in doc["flows"]] == [0x22]

    def refused(url: str, params: dict[str, Any], timeout: float) -> httpx.Response:
        raise httpx.ConnectError("refused")

    monkeypatch.setattr(httpx, "get", refused)
    assert main(["flows", "--listen", "127.0.0.1:9555"]) == 2
    assert "no netd daemon at 127.0.0.1:9555" in capsys.readouterr().err


def test_collector_reads_and_closes_the_source(tmp_path: Path) -> None:
    collector = Sampler(tmp_path, ethtool_enabled=False)
    fake = FakeBpfSource(SAMPLE)
    collector.bpf = fake
    snap = collector.collect()
    assert snap.bpf is SAMPLE and fake.reads == 1
    (status,) = [s for s in snap.sources if s.source == "bpf"]
    assert status.ok and status.items == 4  # attached probes
    collector.close()
    assert fake.closed


def test_a_failing_read_is_a_failed_source_not_a_dead_tick(tmp_path: Path) -> None:
    class Broken(FakeBpfSource):
        def read(self) -> BpfSample:
            raise SourceError("bpf", "BPF_MAP_LOOKUP_BATCH failed: Bad address")

    collector = Sampler(tmp_path, ethtool_enabled=False)
    collector.bpf = Broken(SAMPLE)
    snap = collector.collect()
    (status,) = [s for s in snap.sources if s.source == "bpf"]
    assert snap.bpf is None and not status.ok and "Bad address" in (status.error or "")


def test_bpf_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "netd.toml"
    f.write_text(
        '[bpf]\nenabled = true\ninterfaces = ["eth0", "lab-b/veth1"]\ntcp_attach = "raw_tracepoint"\n'
    )
    cfg = load_config(f, environ={"NETD_BPF_DIRECTIONS": "ingress", "NETD_BPF_FLOW_TABLE_SIZE": "4096"})
    assert (
        cfg.bpf.enabled
        and cfg.bpf.interfaces == ("eth0", "lab-b/veth1")
        and cfg.bpf.directions == ("ingress",)
    )
    s = bpf_wiring.bpf_settings(cfg)
    assert (s.flow_table_size, s.tcp_attach, s.interfaces) == (
        4096,
        "raw_tracepoint",
        ("eth0", "lab-b/veth1"),
    )
    assert "-DNETD_FLOW_TABLE_SIZE=4096" in s.cflags()["roce_parser.c"]
    too_long = "x" * 16
    for bad in (
        'interfaces = ["a/"]',
        f'interfaces = ["{too_long}"]',
        "flow_cache_slots = 1000",
        'tcp_attach = "kprobe"',
    ):
        f.write_text(f"[bpf]\n{bad}\n")
        with pytest.raises(ConfigError, match="bpf"):
            load_config(f, environ={})


def _environment(problems: tuple[str, ...] = ()) -> Environment:
    return Environment(
        not problems,
        "CAP_SYS_ADMIN" if not problems else problems[0],
        True,
        "importable",
        True,
        "headers",
        None,
        None,
        False,
        problems,
    )


def test_wiring_without_bpf_enabled_or_possible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert bpf_wiring.start_bpf(load_config(None, environ={})) is None
    monkeypatch.setattr(
        bpf_wiring, "probe_environment", lambda: _environment(("needs root (CAP_SYS_ADMIN)",))
    )
    cfg = load_config(None, environ={"NETD_BPF_ENABLED": "true", "NETD_BPF_PFC": "false"})
    source = bpf_wiring.start_bpf(cfg)
    assert isinstance(source, UnavailableBpfSource)
    states = {p.probe: (p.state, p.detail) for p in source.read().probes}
    assert states["roce"] == ("disabled", "needs root (CAP_SYS_ADMIN)")
    assert states["pfc"] == ("disabled", "disabled in configuration")


def test_check_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    import netd.commands.bpf_check as check

    monkeypatch.setattr(check, "probe_environment", lambda: _environment(("needs root (CAP_SYS_ADMIN)",)))
    lines, failed = bpf_check(load_config(None, environ={}))
    assert not failed and lines[0] == (
        "info",
        "bpf",
        "disabled ([bpf] enabled = true loads the probes; docs/ebpf.md)",
    )
    assert ("absent", "bpf privileges", "needs root (CAP_SYS_ADMIN)") in lines
    (tcp,) = [line for line in lines if line[1] == "bpf tcp_retransmits"]
    assert tcp[0] == "absent" and "no kernel BTF" in tcp[2]  # the built environment: no BTF, no tracefs
    cfg = load_config(None, environ={"NETD_BPF_ENABLED": "true", "NETD_BPF_INTERFACES": "eth0"})
    lines, failed = bpf_check(cfg)
    assert failed and ("FAIL", "bpf privileges", "needs root (CAP_SYS_ADMIN)") in lines
    assert ("absent", "bpf interface eth0", "cannot look it up without privileges") in lines


def test_check_names_the_program_sources_it_cannot_find(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import netd.commands.bpf_check as check

    monkeypatch.setattr(check, "probe_environment", lambda: _environment(("needs root (CAP_SYS_ADMIN)",)))
    lines, _ = bpf_check(load_config(None, environ={}))
    assert ("ok", "bpf sources", str(EBPF_DIR)) in lines  # this checkout's ebpf/
    (tmp_path / "roce_parser.c").write_text("")  # an install that shipped one file of five
    monkeypatch.setattr(check, "EBPF_DIR", tmp_path)
    missing = "pfc_counter.c, tcp_retrans.c, rdma_events.c, netd_bpf.h"
    want = f"{tmp_path}: no {missing} (make install puts them there)"
    lines, failed = bpf_check(load_config(None, environ={}))
    assert ("absent", "bpf sources", want) in lines and not failed
    lines, failed = bpf_check(load_config(None, environ={"NETD_BPF_ENABLED": "true"}))
    assert ("FAIL", "bpf sources", want) in lines and failed


def test_probe_state_helpers() -> None:
    assert (
        SAMPLE.probe("roce") == ProbeState("roce", "attached", "fake", "fake") and SAMPLE.probe("x") is None
    )
    f = flow(1, ce=5, cnp=2, naks=1, psn_gaps=2, psn_rewinds=3)
    assert (f.ce_fraction, f.congestion_score, f.victim_score) == (0.05, 7, 6)


def test_banner_line() -> None:
    assert bpf_wiring.bpf_banner(None, "http://h:1") == []
    (line,) = bpf_wiring.bpf_banner(UnavailableBpfSource("needs root").read(), "http://h:1")
    assert line == (
        "  eBPF probes: roce disabled, pfc disabled, tcp_retransmits disabled, rdma_cm disabled. "
        "Flows: http://h:1/v1/flows or `netd flows`; details: `netd check`."
    )
    (line,) = bpf_wiring.bpf_banner(SAMPLE, "http://h:1")
    assert line.startswith("  eBPF probes: roce attached (fake), pfc attached (fake)")

"""Fabric mode against a real Prometheus (Debian's package) scraping two netd daemons on loopback that
emulate different hosts of one fabric (host 0 under emu-tor0, host 5 under emu-tor1), plus a stand-in
kube-state-metrics that says where a pod group already runs."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from netd.cluster.view import FabricView
from netd.config.service import ClusterConfig
from netd.congestion.scorer import CongestionScorer
from tests.integration.netns import wait_for
from tests.processes import Child, stop

pytestmark = pytest.mark.slow  # starts Prometheus and netd processes

GROUP = "scheduling.x-k8s.io/pod-group"
KSM = """# TYPE kube_pod_info gauge
kube_pod_info{namespace="train",pod="job-a-0",node="emu-host5",uid="u0"} 1
kube_pod_info{namespace="train",pod="other-0",node="emu-host0",uid="u1"} 1
# TYPE kube_pod_labels gauge
kube_pod_labels{namespace="train",pod="job-a-0",uid="u0",label_scheduling_x_k8s_io_pod_group="job-a"} 1
kube_pod_labels{namespace="train",pod="other-0",uid="u1",label_scheduling_x_k8s_io_pod_group="other"} 1
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: Child) -> str:
    """Stop ``proc``; what it wrote to stderr."""
    stop(proc)
    return proc.stderr_text()


def _netd(args: list[str], env: dict[str, str]) -> Child:
    return Child([sys.executable, "-m", "netd", *args], env=env)


class _Ksm(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server's naming
        body = KSM.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("prometheus") is None:
        pytest.skip("needs Debian's prometheus package")
    tmp = tmp_path_factory.mktemp("fabric")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    ports = [_free_port() for _ in range(3)]
    procs: list[Child] = []
    ksm = ThreadingHTTPServer(("127.0.0.1", 0), _Ksm)
    threading.Thread(target=ksm.serve_forever, daemon=True).start()
    try:
        for i, (host_index, port) in enumerate(((0, ports[0]), (5, ports[1]))):
            host_env = env | {
                "NETD_EMULATOR_STATE_DIR": str(tmp / f"emu{i}"),
                "NETD_EMULATOR_HOST_INDEX": str(host_index),
                "NETD_NCCL_SOCKET": str(tmp / f"nccl{i}.sock"),  # each emulated host has its own
            }
            args = ["run", "--fabric", "emulated", "--interval", "0.5", "--listen", f"127.0.0.1:{port}"]
            procs.append(_netd(args, host_env))
        config = tmp / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: netd\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{ports[0]}', '127.0.0.1:{ports[1]}']}}]\n"
            f"  - job_name: kube-state-metrics\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{ksm.server_address[1]}']}}]\n"
        )
        procs.append(
            Child(
                [
                    "prometheus",
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{ports[2]}",
                    "--log.level=warn",
                ]
            )
        )
        url = f"http://127.0.0.1:{ports[2]}"

        def scraped() -> bool:
            try:
                q = {"query": "count(netd_port_congestion_signal) and count(kube_pod_labels)"}
                r = httpx.get(f"{url}/api/v1/query", params=q, timeout=2).json()
                series = httpx.get(
                    f"{url}/api/v1/query", params={"query": "netd_port_info"}, timeout=2
                ).json()
            except (httpx.HTTPError, ValueError):
                return False
            return bool(r["data"]["result"]) and len(series["data"]["result"]) == 4

        wait_for(scraped, timeout_s=180, what="Prometheus to scrape both netd instances")
        time.sleep(2)  # a few samples for avg_over_time
        yield url
    finally:
        for p in procs:
            _stop(p)
        ksm.shutdown()
        ksm.server_close()


def test_fabric_view_scores_every_tor_from_prometheus(cluster: str):
    view = FabricView(ClusterConfig(prometheus_url=cluster, window="10s"), CongestionScorer())
    try:
        snap = view.refresh()
        assert snap is not None and snap.view == "fabric" and snap.emulated and snap.note is None
        topo = snap.topology
        assert topo is not None and topo.hosts == ("emu-host0", "emu-host5")
        assert {p.host: p.tor for p in topo.ports} == {"emu-host0": "emu-tor0", "emu-host5": "emu-tor1"}
        assert [(s.name, s.spines) for s in topo.tors.values()] == [
            ("emu-tor0", ("emu-spine0",)),
            ("emu-tor1", ("emu-spine0",)),
        ]
        report = snap.congestion
        assert report is not None and len(report.ports) == 4
        assert [t.name for t in report.tors] == ["emu-tor0", "emu-tor1"] and [
            s.name for s in report.spines
        ] == ["emu-spine0"]
        assert all(set(p.signals) >= {"ce_fraction", "cnp_per_packet"} for p in report.ports)
        assert all(p.signals["ce_fraction"] is not None for p in report.ports)  # averaged from both hosts
        assert report.spines[0].members == ("emu-tor0", "emu-tor1")
        assert view.peers(GROUP, "job-a") == {"emu-host5": 1} and view.peers(GROUP, "nobody") == {}
    finally:
        view.close()


def test_netd_fabric_serves_the_cluster_view(cluster: str, tmp_path: Path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")} | {"NETD_CLUSTER_WINDOW": "10s"}
    proc = _netd(["fabric", "--prometheus", cluster, "--listen", f"127.0.0.1:{port}"], env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: _ready(base, proc), timeout_s=120, what="netd fabric"
        )  # slow starts on a busy CI box
        tors = httpx.get(f"{base}/v1/congestion", params={"scope": "tor", "sort": "name"}).json()
        assert tors["view"] == "fabric" and [t["name"] for t in tors["items"]] == ["emu-tor0", "emu-tor1"]
        topo = httpx.get(f"{base}/v1/topology").json()
        assert topo["hosts"] == ["emu-host0", "emu-host5"] and topo["ports"]["total"] == 4
        pod = {"metadata": {"name": "job-a-1", "labels": {GROUP: "job-a"}}}
        names = ["emu-host0", "emu-host5", "not-in-netd"]
        grouped = httpx.post(f"{base}/scheduler/prioritize", json={"Pod": pod, "NodeNames": names}).json()
        alone = httpx.post(
            f"{base}/scheduler/prioritize", json={"Pod": {"metadata": {}}, "NodeNames": names}
        ).json()
        g, a = ({h["Host"]: h["Score"] for h in x} for x in (grouped, alone))
        assert g["emu-host5"] >= a["emu-host5"] and g["emu-host0"] <= a["emu-host0"]  # peers pull to emu-tor1
        assert g["not-in-netd"] == 0  # unknown: lowest (scheduler.unknown_nodes)
        metrics = httpx.get(f"{base}/metrics").text
        assert (
            'netd_fabric_tor_congestion_score{tor="emu-tor1"}' in metrics
            and "netd_fabric_hosts 2.0" in metrics
        )
        assert httpx.get(f"{base}/v1/ports").status_code == 404  # per-host routes live on each host
        # the fabric service is the NCCL pin authority for multi-node communicators
        assert httpx.get(f"{base}/v1/nccl/pins").json()["pins"] == []
        assert httpx.post(f"{base}/v1/nccl/pins", json={}).status_code in (401, 403)  # token required
        # the view is refreshed by a process of its own; killed, it is replaced and the view goes on
        (view_pid,) = _children(proc.pid, "netd.cluster.refresher")
        os.kill(view_pid, signal.SIGKILL)
        wait_for(
            lambda: "netd_fabric_view_restarts_total 1.0" in httpx.get(f"{base}/metrics").text,
            timeout_s=60,
            what="the view process to be replaced",
        )
        (new_pid,) = _children(proc.pid, "netd.cluster.refresher")
        assert new_pid != view_pid
        again = httpx.post(f"{base}/scheduler/prioritize", json={"Pod": pod, "NodeNames": names}).json()
        assert {h["Host"] for h in again} == set(names)
        wait_for(lambda: _ready(base, proc), timeout_s=60, what="netd fabric ready after the restart")
    finally:
        err = _stop(proc)
    assert proc.returncode == 0, err
    assert "the cluster view from" in err and "the fabric view process" in err  # its replacement, logged
    assert not _children(proc.pid, "netd.cluster.refresher")  # gone with the service


def _children(pid: int, module: str) -> list[int]:
    """Child processes of ``pid`` running ``python -m module``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:  # exited meanwhile
            continue
        if ppid == pid and module.encode() in argv:
            found.append(int(entry))
    return found


def _ready(base: str, proc: Child | None = None) -> bool:
    if proc is not None and proc.poll() is not None:
        raise AssertionError(f"netd exited with {proc.returncode}: {_stop(proc)}")
    try:
        return httpx.get(f"{base}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_netd_fabric_without_prometheus_says_it_serves_one_host(tmp_path: Path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    env["NETD_EMULATOR_STATE_DIR"] = str(tmp_path / "emu")
    env["NETD_NCCL_SOCKET"] = str(tmp_path / "nccl.sock")
    proc = _netd(["fabric", "--listen", f"127.0.0.1:{port}", "--sysfs-root", str(tmp_path)], env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(base, proc), timeout_s=120, what="netd fabric (host view)")
        doc = httpx.get(f"{base}/v1/congestion").json()
        assert doc["view"] == "host" and "no Prometheus configured" in doc["note"]
        assert "no Prometheus configured" in httpx.get(f"{base}/v1/topology").json()["note"]
    finally:
        err = _stop(proc)
    assert proc.returncode == 0 and "no Prometheus configured" in err


def test_queries_paged_by_tor_give_the_same_view(cluster: str):
    at = time.time()  # both views evaluate every query at this instant, as one refresh's pages do
    whole = FabricView(
        ClusterConfig(prometheus_url=cluster, window="10s", tors_per_query=0),
        CongestionScorer(),
        clock=lambda: at,
    )
    paged = FabricView(
        ClusterConfig(prometheus_url=cluster, window="10s", tors_per_query=1),
        CongestionScorer(),
        clock=lambda: at,
    )
    try:
        a, b = whole.refresh(), paged.refresh()
        assert a is not None and b is not None and a.congestion is not None and b.congestion is not None
        assert whole.stats.queries == 3 and paged.stats.queries == 1 + 3 * 2  # the ToR list, then 2 pages
        assert a.topology is not None and b.topology is not None
        assert a.topology.ports == b.topology.ports
        key = lambda r: sorted((p.name, sorted(p.signals.items())) for p in r.ports)  # noqa: E731
        assert key(a.congestion) == key(b.congestion)
    finally:
        whole.close()
        paged.close()


class _Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # answers after the client gave up
        time.sleep(1.5)
        with contextlib.suppress(OSError):
            self.send_response(200)
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_slow_and_unreachable_prometheus_keep_the_last_good_view(cluster: str):
    from netd.cluster.cli import _readiness
    from netd.sources.prometheus import PrometheusClient

    cfg = ClusterConfig(prometheus_url=cluster, window="10s", query_timeout=0.3)
    view = FabricView(cfg, CongestionScorer())
    slow = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    try:
        good = view.refresh()
        assert good is not None and view.stats.prometheus == "ok"
        view.client.close()
        view.client = PrometheusClient(f"http://127.0.0.1:{slow.server_address[1]}", 0.3)
        kept = view.refresh()
        assert view.stats.prometheus == "slow" and "slow" in (view.stats.last_error or "")
        assert kept is not None and kept.congestion is good.congestion and kept.timestamp == good.timestamp
        assert kept.note is not None and "Prometheus slow" in kept.note and "last good view" in kept.note
        ready, details = _readiness(view, 120.0)()
        assert ready and details["prometheus_state"] == "slow" and details["view_age_s"] >= 0
        view.client.close()
        view.client = PrometheusClient(f"http://127.0.0.1:{_free_port()}", 0.3)  # nothing listens
        view.refresh()
        assert view.stats.prometheus == "unreachable" and "unreachable" in (view.stats.last_error or "")
        assert view.current() is not None and view.current().congestion is good.congestion  # type: ignore[union-attr]
        assert not _readiness(view, 0.001)()[0]  # past stale_after the view no longer counts as ready
    finally:
        view.close()
        slow.shutdown()
        slow.server_close()


def test_hosts_not_scraped_lately_are_left_out_as_unknown(cluster: str):
    from netd.congestion.scheduling import NodeIndex

    # every host's last scrape is up to a scrape interval (1 s) old: with a 1 ms limit all are silent
    silent = FabricView(
        ClusterConfig(prometheus_url=cluster, window="10s", host_stale_after=0.001), CongestionScorer()
    )
    live = FabricView(ClusterConfig(prometheus_url=cluster, window="10s"), CongestionScorer())
    try:
        gone, here = silent.refresh(), live.refresh()
        assert gone is not None and gone.topology is not None and gone.topology.hosts == ()
        assert silent.stats.silent_hosts == 2 and gone.note is not None and "2 hosts left out" in gone.note
        assert here is not None and here.topology is not None and len(here.topology.hosts) == 2
        assert live.stats.silent_hosts == 0
        _, _, unknown = NodeIndex(gone.congestion).filter(["emu-host0", "emu-host5"])
        assert unknown == 2  # a host whose netd went silent is an unknown node, not a calm one
    finally:
        silent.close()
        live.close()

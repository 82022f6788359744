"""`netd fabric publish` against a recorded transport at the HTTP boundary (tests/kube/apiserver.py):
the requests the official client sends as netd drives it, and every object checked against the
published schemas. No API server runs here; docs/deploy.md says what was run against a live one."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from netd.api.service_view import ClusterSnapshot
from netd.config.kube import KubeConfig
from netd.congestion.score import Components
from netd.congestion.scorer import CongestionScorer, ScoreInput
from netd.kube.client import HYPERNODES, KubeClient
from netd.kube.service import Publisher, TokenBucket
from netd.model.topology import Topology
from tests.kube.apiserver import FakeApiServer
from tests.kube.fabrics import fabric
from tests.kube.schemas import check

HOSTS = {f"host{i}": [(f"leaf{i // 2}", 0)] for i in range(4)}
UPLINKS = {"leaf0": ("spine1",), "leaf1": ("spine1",)}


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Cluster:
    """The cluster view the publisher reads: a topology and per-port health the test controls."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self.down: set[str] = set()
        self.stormed: set[str] = set()
        self.scorer = CongestionScorer()
        self.now = 0.0

    def snapshot(self) -> ClusterSnapshot:
        inputs = [
            ScoreInput(
                host=p.host,
                device=p.device,
                port=p.port,
                components=Components(0.0, 0.0, 0.0, 0.0),
                up=p.host not in self.down,
                tor=p.tor,
                storm_events=p.host in self.stormed,
            )
            for p in self.topology.ports
        ]
        self.now += 1.0
        report = self.scorer.update(inputs, self.now)
        return ClusterSnapshot("fabric", self.now, False, self.topology, report)


@pytest.fixture
def server() -> FakeApiServer:
    return FakeApiServer()


def _publisher(server: FakeApiServer, cluster: Cluster, cfg: KubeConfig, dry_run: bool = False, clock=None):
    conf = k8s.Configuration(host="https://kube.test:6443")
    conf.api_key = {"BearerToken": "t0ken"}
    conf.api_key_prefix = {"BearerToken": "Bearer"}
    api = k8s.ApiClient(conf)
    api.rest_client.pool_manager = server  # the HTTP boundary
    clock = clock or Clock()
    bucket = TokenBucket(1000.0, clock=clock, sleep=clock.sleep)
    return Publisher(KubeClient(api, dry_run=dry_run), cfg, cluster.snapshot, bucket=bucket, clock=clock)


def test_first_round_applies_every_object_with_the_real_request_shape(server):
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    r = _publisher(server, cluster, KubeConfig()).publish()
    assert r.errors == []
    writes = server.writes()
    assert r.writes == len(writes) == 4 + 1 + 3 + 4  # labels, the Topology, 2+1 HyperNodes, conditions
    for req in writes:
        assert req.method == "PATCH"
        assert req.headers["Content-Type"] == "application/apply-patch+yaml"
        assert req.headers["authorization"] == "Bearer t0ken"
        assert req.query == {"fieldManager": "netd", "force": "true"}
        check(req.body)
    paths = {req.path for req in writes}
    assert "/api/v1/nodes/host0" in paths and "/api/v1/nodes/host0/status" in paths
    assert "/apis/kueue.x-k8s.io/v1beta1/topologies/netd-roce" in paths
    assert f"{HYPERNODES}/netd-spine-spine1" in paths
    listing = [q for q in server.requests if q.method == "GET" and q.path == HYPERNODES]
    assert listing[0].query == {"labelSelector": "app.kubernetes.io/managed-by=netd"}
    status = next(q.body for q in writes if q.path == "/api/v1/nodes/host0/status")
    (cond,) = status["status"]["conditions"]
    assert (
        cond["type"] == "RoCEDegraded" and cond["status"] == "False" and cond["reason"] == "RoCEPortsHealthy"
    )


def test_only_changes_are_written(server):
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    pub = _publisher(server, cluster, KubeConfig())
    pub.publish()
    before = len(server.writes())
    r = pub.publish()
    assert r.writes == 0 and len(server.writes()) == before and r.unchanged == 12
    # host3 is recabled to leaf0: its labels and both ToR HyperNodes change, nothing else
    cluster.topology = fabric({**HOSTS, "host3": [("leaf0", 0)]}, UPLINKS)
    r = pub.publish()
    assert sorted(q.path for q in server.writes()[before:]) == [
        "/api/v1/nodes/host3",
        f"{HYPERNODES}/netd-tor-leaf0",
        f"{HYPERNODES}/netd-tor-leaf1",
    ]


def test_stale_hypernodes_of_netd_are_deleted_others_kept(server):
    server.add(
        f"{HYPERNODES}/netd-tor-old",
        {
            "kind": "HyperNode",
            "metadata": {"name": "netd-tor-old", "labels": {"app.kubernetes.io/managed-by": "netd"}},
        },
    )
    server.add(f"{HYPERNODES}/ufm-s1", {"kind": "HyperNode", "metadata": {"name": "ufm-s1", "labels": {}}})
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    pub = _publisher(server, cluster, KubeConfig())
    r = pub.publish()
    assert r.deleted == 1
    assert f"{HYPERNODES}/netd-tor-old" not in server.objects and f"{HYPERNODES}/ufm-s1" in server.objects
    # leaf1's hosts leave: its HyperNode goes, without listing again
    cluster.topology = fabric({h: v for h, v in HOSTS.items() if v[0][0] == "leaf0"}, {"leaf0": ("spine1",)})
    r = pub.publish()
    assert r.deleted == 1 and f"{HYPERNODES}/netd-tor-leaf1" not in server.objects
    assert [q.method for q in server.requests if q.path == HYPERNODES] == ["GET"]


def test_dry_run_sends_dry_run_all_and_stores_nothing(server):
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    r = _publisher(server, cluster, KubeConfig(), dry_run=True).publish()
    assert r.writes == 12 and r.errors == []
    assert all(q.query.get("dryRun") == "All" for q in server.writes())
    assert server.objects == {}


def test_writes_are_rate_limited():
    clock = Clock()
    bucket = TokenBucket(2.0, clock=clock, sleep=clock.sleep)
    for _ in range(10):
        bucket.take()
    assert bucket.waited_s == pytest.approx(4.0)  # a burst of 2, then one every 0.5 s


def test_a_refused_write_is_reported_and_the_round_goes_on(server):
    server.missing_paths = {"/apis/topology.volcano.sh/", "/apis/kueue.x-k8s.io/"}  # no Volcano, no Kueue
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    r = _publisher(server, cluster, KubeConfig()).publish()
    assert r.writes == 8  # labels and conditions still land
    assert len(r.errors) == 4 and all("HTTP 404" in e for e in r.errors)


def _node(server: FakeApiServer, name: str, taints: list[dict]) -> None:
    server.add(
        f"/api/v1/nodes/{name}",
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"taints": taints}},
    )


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def test_taint_and_condition_follow_health_with_hysteresis(server):
    for i in range(4):
        _node(server, f"host{i}", [GPU_TAINT])
    clock = Clock()
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    cfg = KubeConfig(taint=True, degrade_after=60, recover_after=120)
    pub = _publisher(server, cluster, cfg, clock=clock)
    node = "/api/v1/nodes/host1"

    def taints() -> list[dict]:
        return server.objects[node]["spec"]["taints"]

    def cond() -> dict:
        return server.objects[node]["status"]["conditions"][0]

    pub.publish()
    cluster.down = {"host1"}
    pub.publish()
    assert cond()["status"] == "False" and taints() == [GPU_TAINT]  # bad, but not for 60 s yet
    clock.t += 61
    r = pub.publish()
    assert r.errors == []
    assert (
        cond()["status"] == "True" and cond()["reason"] == "RoCEPortDown" and "mlx5_0/1" in cond()["message"]
    )
    assert taints() == [GPU_TAINT, {"key": "netd.io/roce-degraded", "value": "true", "effect": "NoSchedule"}]
    patch = [q for q in server.writes() if q.headers["Content-Type"] == "application/json-patch+json"]
    assert (
        len(patch) == 1
        and patch[0].body[0]["op"] == "test"
        and patch[0].body[0]["path"] == "/metadata/resourceVersion"
    )
    check(server.objects[node])
    cluster.down = set()
    pub.publish()  # good from now
    clock.t += 60
    pub.publish()
    assert cond()["status"] == "True" and len(taints()) == 2  # good for 60 s of the 120 needed
    clock.t += 61
    pub.publish()
    assert cond()["status"] == "False" and taints() == [GPU_TAINT]  # the other owner's taint stays
    assert server.objects["/api/v1/nodes/host0"]["spec"]["taints"] == [GPU_TAINT]  # never touched


def test_a_pfc_storm_degrades_too(server):
    clock = Clock()
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    pub = _publisher(server, cluster, KubeConfig(degrade_after=0), clock=clock)
    cluster.stormed = {"host2"}
    pub.publish()
    cond = server.objects["/api/v1/nodes/host2"]["status"]["conditions"][0]
    assert cond["status"] == "True" and cond["reason"] == "PFCStorm"


def test_a_concurrent_node_update_wins_and_the_taint_is_retried(server):
    for i in range(4):
        _node(server, f"host{i}", [])
    clock = Clock()
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    pub = _publisher(server, cluster, KubeConfig(taint=True, degrade_after=0), clock=clock)
    cluster.down = {"host0"}
    real = server.request
    raced = []

    def racing(method, url, body=None, headers=None, **kw):
        if headers and headers.get("Content-Type") == "application/json-patch+json" and not raced:
            raced.append(url)  # another controller writes the node between netd's GET and PATCH
            _node(server, "host0", [GPU_TAINT])
        return real(method, url, body=body, headers=headers, **kw)

    server.request = racing  # type: ignore[method-assign]
    r = pub.publish()
    assert any("taint not changed" in e for e in r.errors)
    assert server.objects["/api/v1/nodes/host0"]["spec"]["taints"] == [GPU_TAINT]
    r = pub.publish()
    assert r.errors == []
    assert server.objects["/api/v1/nodes/host0"]["spec"]["taints"][-1]["key"] == "netd.io/roce-degraded"
    assert GPU_TAINT in server.objects["/api/v1/nodes/host0"]["spec"]["taints"]

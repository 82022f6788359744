"""The cluster view's Prometheus side with a stand-in HTTP transport: joins, failures, notes, peers."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import httpx
import pytest

from netd.cluster.peers import kube_label_name
from netd.cluster.view import FabricView
from netd.config.service import ClusterConfig
from netd.congestion.scorer import CongestionScorer, Levels
from netd.errors import SourceError
from netd.sources.prometheus import PrometheusClient, promql_string


def _vector(*series: tuple[dict[str, str], float]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1700000000.0, str(v)]} for m, v in series],
        },
    }


def _info(host: str, device: str, tor: str, state: str = "ACTIVE") -> tuple[dict[str, str], float]:
    return (
        {
            "__name__": "netd_port_info",
            "job": "netd",
            "instance": f"{host}:9469",
            "host": host,
            "device": device,
            "port": "1",
            "netdev": "eth0",
            "tor": tor,
            "spine": "spine-1",
            "rail": "0",
            "state": state,
            "emulated": "false",
        },
        1.0,
    )


def _signal(host: str, device: str, signal: str, value: float) -> tuple[dict[str, str], float]:
    return (
        {"job": "netd", "instance": f"{host}:9469", "device": device, "port": "1", "signal": signal},
        value,
    )


class FakePrometheus:
    def __init__(self) -> None:
        self.fail = False
        self.queries: list[str] = []
        info = (_info("a", "mlx5_0", "leaf-1"), _info("b", "mlx5_0", "leaf-2", "DOWN"))
        self.answers = {
            "count by (tor)": _vector(({"tor": "leaf-1"}, 1.0), ({"tor": "leaf-2"}, 1.0)),  # the ToR pages
            # the ports with when each was last scraped (the view's clock is 1234.0: both are fresh)
            "timestamp(netd_port_info": _vector(*((labels, 1230.0) for labels, _ in info)),
            "netd_port_info": _vector(*info),
            "avg_over_time": _vector(
                _signal("a", "mlx5_0", "ce_fraction", 0.05), _signal("a", "mlx5_0", "pause_fraction", 0.0)
            ),
            "netd_port_pfc_stormed": _vector(),
            "count by (node)": _vector(({"node": "a"}, 2.0)),
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.url.query.decode())["query"][0]
        self.queries.append(query)
        if self.fail:
            return httpx.Response(503, json={"status": "error", "error": "overloaded"})
        for prefix, answer in self.answers.items():
            if query.startswith(prefix):
                return httpx.Response(200, json=answer)
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"})


@pytest.fixture
def fake() -> FakePrometheus:
    return FakePrometheus()


def _view(fake: FakePrometheus) -> FabricView:
    cfg = ClusterConfig(prometheus_url="http://prom:9090", window="30s")
    client = PrometheusClient(cfg.prometheus_url, transport=httpx.MockTransport(fake))
    return FabricView(cfg, CongestionScorer(levels=Levels(alpha=1.0)), client=client, clock=lambda: 1234.0)


def test_refresh_joins_info_and_signals(fake):
    snap = _view(fake).refresh()
    assert snap is not None and snap.view == "fabric" and snap.timestamp == 1234.0 and not snap.emulated
    assert any(q.startswith("avg_over_time(netd_port_congestion_signal[30s])") for q in fake.queries)
    ports = {p.name: p for p in snap.congestion.ports}
    assert ports["a:mlx5_0/1"].score == pytest.approx(0.8) and ports["a:mlx5_0/1"].labels["tor"] == "leaf-1"
    assert not ports["b:mlx5_0/1"].up and ports["b:mlx5_0/1"].score == 1.0  # DOWN in netd_port_info
    assert [t.name for t in snap.congestion.tors] == ["leaf-1", "leaf-2"]
    assert snap.topology.hosts == ("a", "b") and snap.topology.tors["leaf-1"].spines == ("spine-1",)


def test_a_failed_refresh_keeps_the_last_data_and_says_so(fake):
    view = _view(fake)
    assert view.refresh() is not None
    fake.fail = True
    snap = view.refresh()
    assert snap is not None and "overloaded" in (snap.note or "") and "last good view" in (snap.note or "")
    assert (
        view.stats.errors == 1 and view.stats.refreshes == 2 and "overloaded" in (view.stats.last_error or "")
    )
    fresh = _view(fake)
    assert fresh.refresh() is None and fresh.current() is None  # nothing to fall back on


def test_empty_prometheus_is_noted(fake):
    fake.answers["count by (tor)"] = fake.answers["timestamp(netd_port_info"] = _vector()
    fake.answers["netd_port_info"] = _vector()
    snap = _view(fake).refresh()
    assert snap is not None and "no netd_port_info series yet" in (snap.note or "")


def test_peers_query_and_cache(fake):
    view = _view(fake)
    assert view.peers("scheduling.x-k8s.io/pod-group", 'job "a"') == {"a": 2}
    (q,) = [q for q in fake.queries if q.startswith("count by (node)")]
    assert 'label_scheduling_x_k8s_io_pod_group="job \\"a\\""' in q and 'kube_pod_info{node!=""}' in q
    view.peers("scheduling.x-k8s.io/pod-group", 'job "a"')
    assert len([q for q in fake.queries if q.startswith("count by")]) == 1  # cached for a refresh interval
    fake.fail = True
    assert view.peers("scheduling.x-k8s.io/pod-group", "other") is None  # unknowable, not "no peers"


def test_client_errors_are_source_errors(fake):
    client = PrometheusClient("http://prom:9090", transport=httpx.MockTransport(fake))
    with pytest.raises(SourceError, match="parse error"):
        client.query("rate(")
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    odd = PrometheusClient(
        "http://p", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=matrix))
    )
    with pytest.raises(SourceError, match="not a vector"):
        odd.query("x[1m]")
    html = PrometheusClient(
        "http://p", transport=httpx.MockTransport(lambda r: httpx.Response(502, text="<h1>"))
    )
    with pytest.raises(SourceError, match="without JSON"):
        html.query("up")


def _answering(doc: object) -> PrometheusClient:
    return PrometheusClient(
        "http://p", transport=httpx.MockTransport(lambda r: httpx.Response(200, json=doc))
    )


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ([], "JSON that is not an object"),  # another API, or a proxy's, at the configured address
        ("up", "JSON that is not an object"),
        ({"status": "success", "data": []}, "returned None, not a vector"),
        ({"status": "success", "data": {"resultType": "vector", "result": {"a": 1}}}, "not a vector"),
    ],
)
def test_answers_of_the_wrong_shape_are_source_errors(doc: object, why: str) -> None:
    # the client's promise: whatever comes back, a SourceError naming the query (an AttributeError
    # told the operator nothing)
    with pytest.raises(SourceError, match=why):
        _answering(doc).query("up")


def test_malformed_samples_are_skipped_and_the_rest_kept() -> None:
    good = {"metric": {"host": "h1"}, "value": [0, "2"]}
    result = [
        {"metric": [1], "value": [0, "1"]},
        "x",
        {"value": [0, "NaN"]},
        {"metric": None, "value": [0]},
        good,
    ]
    doc = {"status": "success", "data": {"resultType": "vector", "result": result}}
    assert _answering(doc).query("up") == [({"host": "h1"}, 2.0)]


def test_names_and_literals():
    assert kube_label_name("scheduling.x-k8s.io/pod-group") == "label_scheduling_x_k8s_io_pod_group"
    assert promql_string('a"b\\c') == '"a\\"b\\\\c"'
    assert json.loads(promql_string("plain")) == "plain"


def test_a_port_is_joined_on_its_labels_and_a_label_prometheus_dropped_is_empty():
    from netd.cluster.view import _key

    full = {"job": "netd", "instance": "a:9469", "device": "mlx5_0", "port": "1", "signal": "ce_fraction"}
    assert _key(full) == ("netd", "a:9469", "mlx5_0", "1")
    assert _key({"instance": "a:9469", "port": "1"}) == ("", "a:9469", "", "1")  # empty labels are absent


def test_signals_are_the_first_fields_of_components_in_order():  # the view builds Components positionally
    import dataclasses

    from netd.congestion.score import SIGNALS, Components

    assert tuple(f.name for f in dataclasses.fields(Components))[: len(SIGNALS)] == SIGNALS

"""Every route of the daemon's app over real HTTP (uvicorn on loopback): documents, paging, filters,
problem+json errors, auth on a mutating route, and the non-loopback warning."""

from __future__ import annotations

import os
import socket
import sys
import time

import httpx
import pytest
from fastapi import Depends

from netd.api.app import create_app
from netd.api.auth import token_guard
from netd.api.exposure import exposure_warning, is_loopback
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from tests.api.conftest import serving, write_host_topology
from tests.processes import Child, stop, wait_ready

pytestmark = pytest.mark.slow  # serves over real sockets

PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory):
    state_dir = tmp_path_factory.mktemp("emu")
    cfg = load_config(
        None, environ={}, overrides={"fabric": "emulated", "emulator": {"state_dir": state_dir}}
    )
    daemon, _ = build_daemon(cfg)
    daemon.tick()
    time.sleep(0.05)
    daemon.tick()
    yield daemon, cfg
    daemon.close()


@pytest.fixture(scope="module")
def emulated_base(emulated):
    daemon, cfg = emulated
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with serving(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval), port) as base:
        yield base


def test_every_read_route_on_the_emulated_fabric(emulated, free_port):
    daemon, cfg = emulated
    app = create_app(daemon.state, daemon.last_tick_age_s, cfg.interval, scheduler=cfg.scheduler)
    with serving(app, free_port) as base, httpx.Client(base_url=base) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json()["ready"] is True
        metrics = c.get("/metrics").text
        assert 'rail="0",spine="emu-spine0",state="ACTIVE",tor="emu-tor0"} 1.0' in metrics
        assert 'netd_port_congestion_score{device="mlx5_0",port="1"}' in metrics
        assert 'netd_port_congestion_signal{device="mlx5_1",port="1",signal="ce_fraction"}' in metrics
        assert c.get("/v1/ports").json()["host"] == "emu-host0"
        assert c.get("/v1/ports/mlx5_1/1").json()["netdev"] == "ens1f1np1"

        topo = c.get("/v1/topology").json()
        assert (topo["view"], topo["emulated"], topo["hosts"]) == ("host", True, ["emu-host0"])
        assert [t["name"] for t in topo["tors"]] == ["emu-tor0", "emu-tor1"]
        assert topo["spines"] == [
            {"name": "emu-spine0", "tors": ["emu-tor0", "emu-tor1"], "mgmt_address": None}
        ]
        assert [r["rail"] for r in topo["rails"]] == [0, 1]
        port = topo["ports"]["items"][0]
        assert (port["tor"], port["tor_port"], port["spine"], port["placed_by"]) == (
            "emu-tor0",
            "Ethernet0",
            "emu-spine0",
            "lldp",
        )
        assert port["neighbors"][0]["mgmt_address"] == "192.0.2.10" and port["gids"][0]["type"] == "RoCE v2"
        assert {s["source"] for s in topo["sources"]} == {"lldp:file", "topology-file"}

        for scope, expected in (("port", 2), ("tor", 1), ("spine", 1)):
            doc = c.get("/v1/congestion", params={"scope": scope}).json()
            assert doc["scope"] == scope and doc["total"] == expected and doc["view"] == "host"
            item = doc["items"][0]
            assert 0 <= item["score"] <= 1 and item["level"] in ("ok", "busy", "congested", "severe")
        ports = c.get("/v1/congestion").json()["items"]
        assert set(ports[0]["signals"]) == {
            "ce_fraction",
            "cnp_per_packet",
            "pause_fraction",
            "loss_per_packet",
        }
        assert ports[0]["smoothed"] >= ports[1]["smoothed"]  # most congested first
        assert c.get("/openapi.json").json()["paths"]["/v1/congestion"]["get"]["responses"]["422"]


def test_paging_and_filters(emulated_base):
    with httpx.Client(base_url=emulated_base) as c:
        first = c.get("/v1/topology", params={"limit": 1}).json()["ports"]
        assert (first["total"], first["next_offset"], len(first["items"])) == (2, 1, 1)
        second = c.get("/v1/topology", params={"limit": 1, "offset": 1}).json()["ports"]
        assert second["next_offset"] is None and second["items"][0]["device"] == "mlx5_1"
        assert c.get("/v1/topology", params={"rail": 1}).json()["ports"]["items"][0]["device"] == "mlx5_1"
        assert c.get("/v1/topology", params={"tor": "emu-tor1"}).json()["ports"]["total"] == 0
        by_name = c.get("/v1/congestion", params={"sort": "name", "limit": 1, "offset": 1}).json()
        assert by_name["items"][0]["name"] == "emu-host0:mlx5_1/1" and by_name["total"] == 2
        assert c.get("/v1/congestion", params={"host": "emu-host0", "scope": "tor"}).json()["total"] == 1
        assert c.get("/v1/congestion", params={"min_score": 1.0}).json()["total"] == 0
        spines = c.get("/v1/congestion", params={"scope": "spine", "rail": 1}).json()["items"]
        assert [s["name"] for s in spines] == ["emu-spine0"]  # the spine above rail 1's ports
        assert c.get("/v1/congestion", params={"scope": "tor", "rail": 7}).json()["total"] == 0
        assert c.get("/v1/congestion", params={"offset": 50}).json()["items"] == []


@pytest.mark.parametrize(
    ("method", "path", "status", "detail"),
    [
        ("GET", "/v1/congestion?limit=0", 422, "query.limit"),
        ("GET", "/v1/congestion?scope=rack", 422, "query.scope"),
        ("GET", "/v1/congestion?min_score=2", 422, "query.min_score"),
        ("GET", "/v1/topology?rail=x", 422, "query.rail"),
        ("GET", "/v1/ports/mlx5_0/x", 422, "path.port"),
        ("GET", "/v1/ports/mlx5_9/1", 404, "no RDMA port mlx5_9/1"),
        ("GET", "/v1/nothing", 404, None),
        ("POST", "/v1/topology", 405, None),
    ],
)
def test_bad_requests_are_problem_details(emulated_base, method, path, status, detail):
    r = httpx.request(method, emulated_base + path)
    assert r.status_code == status and r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["status"] == status and body["title"] and body["instance"] == path.split("?")[0]
    if detail:
        assert detail in body["detail"]
    if status == 422:
        assert body["type"] == "urn:netd:problem:invalid-request" and body["errors"][0]["location"]


def test_no_tick_yet_is_503_problem(free_port):
    app = create_app(lambda: None, lambda: None, 1.0)
    with serving(app, free_port) as base:
        for path in ("/v1/topology", "/v1/congestion", "/v1/ports"):
            r = httpx.get(base + path)
            assert r.status_code == 503 and r.headers["content-type"] == PROBLEM
        # the extender answers without data: nothing vetoed, every node unknown (lowest: 0)
        args = {"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n1"]}
        assert httpx.post(base + "/scheduler/filter", json=args).json()["NodeNames"] == ["n1"]
        assert httpx.post(base + "/scheduler/prioritize", json=args).json() == [{"Host": "n1", "Score": 0}]


def test_mutating_route_needs_the_bearer_token(free_port):
    def make(token: str | None):
        app = create_app(lambda: None, lambda: None, 1.0)

        @app.post("/v1/test-mutation", dependencies=[Depends(token_guard(token))])
        def mutate() -> dict[str, bool]:
            return {"done": True}

        return app

    with serving(make("s3cret"), free_port) as base:
        missing = httpx.post(base + "/v1/test-mutation")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert missing.headers["content-type"] == PROBLEM and "s3cret" not in missing.text
        wrong = httpx.post(base + "/v1/test-mutation", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = httpx.post(base + "/v1/test-mutation", headers={"Authorization": "Bearer s3cret"})
        assert ok.json() == {"done": True}
    with serving(make(None), free_port) as base:
        r = httpx.post(base + "/v1/test-mutation", headers={"Authorization": "Bearer anything"})
        assert r.status_code == 403 and "no API token configured" in r.json()["detail"]


def test_hardware_host_serves_its_captured_topology(mlx5_host, free_port):
    root, _ = mlx5_host
    write_host_topology(root, tor=0)
    cfg = load_config(None, environ={}, overrides={"sysfs_root": root, "host": "gpu-01"})
    daemon, choice = build_daemon(cfg)
    try:
        assert not choice.emulated
        daemon.tick()
        with serving(create_app(daemon.state, daemon.last_tick_age_s, cfg.interval), free_port) as base:
            topo = httpx.get(base + "/v1/topology").json()
        assert topo["emulated"] is False and {p["tor"] for p in topo["ports"]["items"]} == {"leaf-1"}
        assert topo["tors"][0]["spines"] == ["spine-1"] and topo["tors"][0]["mgmt_address"] == "192.0.2.21"
    finally:
        daemon.close()


def test_exposure_warning_rules():
    assert (
        is_loopback("127.0.0.1")
        and is_loopback("::1")
        and is_loopback("localhost")
        and is_loopback("127.3.2.1")
    )
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("node-1.example")
    assert exposure_warning("127.0.0.1", 9469, False) is None
    assert exposure_warning("0.0.0.0", 9469, True) is None
    assert "no API token is configured" in (exposure_warning("0.0.0.0", 9469, False) or "")


def test_run_on_a_wildcard_address_warns(tmp_path, free_port):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    env["NETD_EMULATOR_STATE_DIR"] = str(tmp_path / "emu")
    env["NETD_NCCL_SOCKET"] = str(tmp_path / "nccl.sock")  # not the machine-wide default
    listen = f"0.0.0.0:{free_port}"
    proc = Child(
        [sys.executable, "-m", "netd", "run", "--listen", listen, "--sysfs-root", str(tmp_path)], env=env
    )
    try:  # netd's start is slow on a busy 2-core box (eBPF compiles)
        wait_ready(f"http://127.0.0.1:{free_port}", proc, timeout_s=120, path="/healthz")
    finally:
        stop(proc)
    err = proc.stderr_text()
    assert proc.returncode == 0, err
    assert "WARNING: listening on 0.0.0.0" in err and "no API token is configured" in err
    assert "Topology: http://0.0.0.0" in err

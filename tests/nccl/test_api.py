"""/v1/nccl on the daemon's app: the pin endpoint (token), the table, pins and env documents."""

from __future__ import annotations

import base64
import hashlib

import pytest
from fastapi.testclient import TestClient

from netd.api.app import create_app
from netd.nccl.nccl_env import recommend
from netd.nccl.pins import PinAuthority
from netd.nccl.publisher import HintPublisher
from netd.nccl.routes import nccl_router
from netd.nccl.table import HintTable, pack_table, unpack_table
from tests.nccl.hosts import CONGESTED, host_state

TOKEN = "api-test-token"


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    return host_state(tmp_path_factory.mktemp("h") / "a", "hostA", **CONGESTED)


def _app(state, token=TOKEN):
    publisher = HintPublisher(lambda: state, valid_for_s=30.0)
    router = nccl_router(
        token=token,
        authority=PinAuthority(window_s=5.0),
        current=publisher.current,
        env=lambda: recommend(state.observation, {}, "/run/netd/nccl.sock"),
    )
    return create_app(lambda: state, lambda: 0.1, 1.0, routers=(router,)), publisher


def _pin_body(offer: bytes | None = None, **over):
    body = {
        "comm_id": "c0ffee",
        "n_ranks": 1,
        "n_nodes": 1,
        "members": ["1"],
        "host": "hostA",
        "table": None if offer is None else base64.b64encode(offer).decode(),
    }
    body.update(over)
    return body


def test_pin_endpoint_needs_the_token(state):
    app, _ = _app(state)
    with TestClient(app) as client:
        assert client.post("/v1/nccl/pins", json=_pin_body()).status_code == 401
        bad = client.post("/v1/nccl/pins", json=_pin_body(), headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and "nope" not in bad.text
    app, _ = _app(state, token=None)
    with TestClient(app) as client:
        assert client.post("/v1/nccl/pins", json=_pin_body()).status_code == 403


def test_pin_endpoint_pins_and_answers_the_same_verdict(state):
    app, publisher = _app(state)
    table = publisher.table_bytes()
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app) as client:
        first = client.post("/v1/nccl/pins", json=_pin_body(table), headers=headers).json()
        again = client.post("/v1/nccl/pins", json=_pin_body(), headers=headers).json()
        pins = client.get("/v1/nccl/pins").json()
    assert first["status"] == "apply" and base64.b64decode(first["table"]) == table
    assert first["comm_id"] == "0000000000c0ffee" and first["pinned_by"] == "hostA"
    assert again == first  # the same member asking again gets the same final verdict
    assert pins["pins"][0]["state"] == "apply" and pins["pins"][0]["members"] == 1


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"n_nodes": 3, "n_ranks": 2}, "exceeds n_ranks"),
        ({"comm_id": "not-hex"}, "comm_id"),
        ({"members": ["1" * 17]}, "members"),
        ({"members": []}, "members"),
        ({"n_ranks": 0}, "n_ranks"),
        ({"table": "!!!not base64!!!"}, "table"),
        ({"table": base64.b64encode(b"x" * 100).decode()}, "bad magic"),
        ({"table": base64.b64encode(b"x" * 10).decode()}, "truncated"),
        ({"extra": 1}, "extra"),
    ],
)
def test_pin_endpoint_validates(state, over, words):
    app, _ = _app(state)
    with TestClient(app) as client:
        r = client.post("/v1/nccl/pins", json=_pin_body(**over), headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 422
    assert words in r.text


def test_table_document_and_bytes(state):
    app, _ = _app(state)
    with TestClient(app) as client:
        doc = client.get("/v1/nccl/table").json()
        raw = client.get("/v1/nccl/table", params={"format": "binary"})
    assert raw.headers["content-type"] == "application/octet-stream"
    table = unpack_table(raw.content)
    assert doc["version"] == raw.headers["x-netd-table-version"] == f"{table.version:016x}"
    assert doc["sha256"] == hashlib.sha256(raw.content).hexdigest()
    assert doc["hint_count"] == table.hint_count() == len(doc["hints"]) > 0
    assert doc["conditions"]["ports"][0]["pause_fraction"] == pytest.approx(0.2)
    assert doc["valid_for_s"] == 30.0
    assert {"n_nodes", "collective", "bytes", "nominal_us", "effective_us", "hint"} <= set(doc["hints"][0])


def test_env_document(state):
    app, _ = _app(state)
    with TestClient(app) as client:
        doc = client.get("/v1/nccl/env").json()
    assert doc["env"]["NCCL_TUNER_PLUGIN"] == "netd"
    assert doc["env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1"


def test_no_tick_yet_is_503():
    router = nccl_router(token=None, authority=PinAuthority(), current=lambda: None, env=lambda: None)
    app = create_app(lambda: None, lambda: None, 1.0, routers=(router,))
    with TestClient(app) as client:
        assert client.get("/v1/nccl/table").status_code == 503
        assert client.get("/v1/nccl/env").status_code == 503
        assert client.get("/v1/nccl/pins").json()["pins"] == []


def test_pin_service_only_router_has_no_host_routes():
    router = nccl_router(token=None, authority=PinAuthority())
    assert {r.path for r in router.routes} == {"/v1/nccl/pins"}  # type: ignore[attr-defined]


def test_packed_default_table_is_accepted_by_the_endpoint(state):
    app, _ = _app(state)
    with TestClient(app) as client:
        r = client.post(
            "/v1/nccl/pins",
            json=_pin_body(pack_table(HintTable()), comm_id="1"),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert r.status_code == 200 and r.json()["status"] == "apply"

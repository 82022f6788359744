"""schemathesis over the served OpenAPI schema: generated requests for every operation, against the real
app over loopback HTTP with a ticking emulated daemon behind it, must never get a server error; the
routes of this feature must also answer as the schema says (status codes, content types, bodies)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from netd.api.app import create_app
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from tests.api.conftest import serving

pytestmark = pytest.mark.slow  # generates hundreds of requests

# Held to every check; routes other features add to the same app are held here to "never a server
# error" (their own suites check their conformance).
OWN = {"/v1/topology", "/v1/congestion", "/scheduler/filter", "/scheduler/prioritize", "/healthz", "/readyz"}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    overrides = {
        "fabric": "emulated",
        "interval": 0.5,
        "emulator": {"state_dir": tmp_path_factory.mktemp("fz")},
    }
    cfg = load_config(None, environ={}, overrides=overrides)
    daemon, _ = build_daemon(cfg)
    daemon.tick()
    time.sleep(0.05)
    daemon.tick()
    stop = threading.Event()
    loop = threading.Thread(target=daemon.run, args=(stop,), daemon=True)
    loop.start()  # the daemon keeps ticking while requests run, as under `netd run`
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(daemon.state, daemon.last_tick_age_s, cfg.interval, scheduler=cfg.scheduler)
    try:
        with serving(app, port) as base:
            yield schemathesis.openapi.from_url(f"{base}/openapi.json")
    finally:
        stop.set()
        loop.join(timeout=10)
        daemon.close()


def _runner(operation: schemathesis.APIOperation, checks: list | None) -> Callable[[], None]:  # type: ignore[type-arg]
    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy())
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=checks)

    return run


def test_no_server_error_and_schema_conformance(api_schema: schemathesis.BaseSchema) -> None:
    # schemathesis' own pytest plugin does not load under this pytest: drive its strategies directly
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= OWN
    for operation in operations:
        _runner(operation, None if operation.path in OWN else [not_a_server_error])()


@pytest.fixture(scope="module")
def fabric_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    from netd.api.service_view import HostView
    from netd.cluster.app import create_fabric_app
    from netd.cluster.metrics import FabricCollector
    from netd.cluster.view import FabricView
    from netd.config.service import ClusterConfig
    from netd.congestion.scorer import CongestionScorer
    from netd.nccl.pins import PinAuthority
    from netd.nccl.routes import nccl_router

    # the fabric's own collector over a view that never refreshed (its Prometheus is never asked)
    idle = FabricView(ClusterConfig(prometheus_url="http://127.0.0.1:9"), CongestionScorer())
    pins = nccl_router(token="s3cret", authority=PinAuthority(window_s=0.2))
    cfg = load_config(
        None,
        environ={},
        overrides={"fabric": "emulated", "emulator": {"state_dir": tmp_path_factory.mktemp("fb")}},
    )
    daemon, _ = build_daemon(cfg)
    daemon.tick()
    # the fabric app over a view with a topology and scores (the emulated host's, as `netd fabric`
    # serves without Prometheus), with the fabric's own collector over a view that never refreshed
    app = create_fabric_app(
        HostView(daemon.state), lambda: (True, {}), FabricCollector(idle), cfg.scheduler, routers=[pins]
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        with serving(app, port) as base:
            yield schemathesis.openapi.from_url(f"{base}/openapi.json")
    finally:
        idle.close()
        daemon.close()


def test_fabric_app_no_server_error_and_schema_conformance(fabric_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in fabric_schema.get_all_operations()]
    assert {op.path for op in operations} >= OWN
    for operation in operations:
        _runner(operation, None if operation.path in OWN else [not_a_server_error])()

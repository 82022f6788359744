"""/metrics over real HTTP: rendered once per published state however often it is scraped, gzip and
OpenMetrics when asked (checked with Python's gzip and prometheus_client's own OpenMetrics parser),
HEAD with the GET's headers, and the listener's own defence counters."""

from __future__ import annotations

import gzip
import time

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from netd.api.app import create_app
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from tests.api.conftest import serving

pytestmark = pytest.mark.slow  # an emulated daemon and a real listener

OPENMETRICS = "application/openmetrics-text"


@pytest.fixture
def daemon(tmp_path):
    cfg = load_config(None, environ={}, overrides={"fabric": "emulated", "emulator": {"state_dir": tmp_path}})
    d, _ = build_daemon(cfg)
    d.tick()
    yield d
    d.close()


def test_rendered_once_per_tick_in_every_negotiated_form(daemon, free_port):
    app = create_app(daemon.state, daemon.last_tick_age_s, 1.0)
    cache = app.state.metrics
    identity = {"Accept-Encoding": "identity"}  # httpx asks for gzip unless told otherwise
    with serving(app, free_port) as base, httpx.Client(base_url=base, headers=identity) as c:
        plain = [c.get("/metrics") for _ in range(20)]
        assert cache.renders == 1 and len({r.content for r in plain}) == 1
        assert plain[0].headers["content-type"].startswith("text/plain")
        assert "netd_http_requests_rejected_total" in plain[0].text

        zipped = c.get("/metrics", headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip" and zipped.text == plain[0].text
        with c.stream("GET", "/metrics", headers={"Accept-Encoding": "gzip, deflate"}) as raw:
            assert raw.headers["content-encoding"] == "gzip"
            assert gzip.decompress(b"".join(raw.iter_raw())) == plain[0].content
        assert cache.renders == 1  # gzip of the same render
        unzipped = c.get("/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
        assert "content-encoding" not in unzipped.headers

        om = c.get("/metrics", headers={"Accept": f"{OPENMETRICS}; version=1.0.0, text/plain;q=0.5"})
        assert om.headers["content-type"].startswith(OPENMETRICS) and om.text.endswith("# EOF\n")
        names = {f.name for f in text_string_to_metric_families(om.text)}
        assert {"netd_ticks", "netd_http_connections_refused"} <= names
        assert cache.renders == 2  # one per format

        head = c.head("/metrics")
        assert head.status_code == 200 and head.content == b""
        assert int(head.headers["content-length"]) == len(plain[0].content)

        time.sleep(0.05)
        daemon.tick()  # a new PublishedState: the next scrape renders again, once
        after = [c.get("/metrics") for _ in range(5)]
        assert cache.renders == 3 and after[0].content != plain[0].content


def test_refusals_are_counted_by_reason(daemon, free_port):
    app = create_app(daemon.state, daemon.last_tick_age_s, 1.0)
    with serving(app, free_port) as base, httpx.Client(base_url=base) as c:
        assert c.get("/healthz", headers={"Host": "rebind.attacker.example"}).status_code == 421
        big = c.post("/v1/flows", content=b"x" * (2 << 20), headers={"Content-Type": "application/json"})
        assert big.status_code in (405, 413)
        time.sleep(0.05)
        daemon.tick()
        text = c.get("/metrics").text
    assert 'netd_http_requests_rejected_total{reason="host"} 1.0' in text


def test_requests_past_the_in_flight_limit_get_503_and_probes_still_answer(free_port):
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from prometheus_client import CollectorRegistry

    from netd.api.base import base_app
    from netd.api.guard import GuardLimits

    gate = threading.Event()
    inside = threading.Semaphore(0)
    app = base_app("t", "t", CollectorRegistry(), object, GuardLimits(max_requests=2))

    @app.get("/hold")
    def hold() -> dict[str, bool]:  # sync: runs in the thread pool, waits for the test to open the gate
        inside.release()
        return {"released": gate.wait(20)}

    with serving(app, free_port) as base, ThreadPoolExecutor(2) as pool:
        held = [pool.submit(httpx.get, base + "/hold", timeout=30) for _ in range(2)]
        assert inside.acquire(timeout=20) and inside.acquire(timeout=20)  # both inside the app
        try:
            refused = httpx.get(base + "/hold")
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert refused.json()["type"] == "urn:netd:problem:unavailable"
            assert httpx.get(base + "/healthz").status_code == 200  # probes are exempt
        finally:
            gate.set()
        assert [f.result().json() for f in held] == [{"released": True}] * 2
        assert httpx.get(base + "/hold").status_code == 200  # the slots are free again

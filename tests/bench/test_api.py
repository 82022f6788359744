"""The pieces of `netd bench api`: the synthetic cluster and the open-loop load generator."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from fastapi import FastAPI

from netd.bench.api import SyntheticCluster
from tests.api.conftest import serving

pytestmark = pytest.mark.slow  # runs load-generator processes


def test_synthetic_cluster_rescores_to_a_new_snapshot():
    view = SyntheticCluster(nodes=10, rails=2)
    first = view.current()
    assert first is not None and first.congestion is not None and len(first.congestion.ports) == 20
    assert [t.name for t in first.congestion.tors] == ["leaf-0", "leaf-1"]
    view.refresh()
    assert view.current() is not first


def _load(url: str, *args: str) -> dict:
    """``python -m netd.bench.load url args…``: its JSON answer."""
    cmd = [sys.executable, "-m", "netd.bench.load", url, *args]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout)


def test_load_generator_measures_every_request(free_port, tmp_path):
    app = FastAPI()

    @app.post("/echo")
    async def echo(body: dict) -> dict:
        return body

    (tmp_path / "body.json").write_text(json.dumps({"x": 1}))
    with serving(app, free_port) as base:
        body = str(tmp_path / "body.json")
        doc = _load(f"{base}/echo", "--rate", "50", "--seconds", "1", "--body", body, "--connections", "2")
    assert doc["sent"] == 50 and doc["errors"] == 0 and len(doc["latencies_ms"]) == 50
    assert all(v > 0 for v in doc["latencies_ms"]) and doc["elapsed_s"] >= 0.98


def test_load_generator_waits_for_the_whole_answer_and_reports_the_warmup_apart(free_port):
    import asyncio

    from fastapi.responses import StreamingResponse

    app = FastAPI()
    served = []
    size = 3 << 20

    @app.get("/big")
    async def big() -> StreamingResponse:
        served.append(1)

        async def pieces():  # the last byte 0.2 s after the first
            yield b"x" * (size - 1)
            await asyncio.sleep(0.2)
            yield b"y"

        return StreamingResponse(pieces(), headers={"content-length": str(size)})

    with serving(app, free_port) as base:
        doc = _load(f"{base}/big", "--rate", "4", "--seconds", "1", "--connections", "2", "--warmup", "1")
        bad = _load(f"{base}/nothing-here", "--rate", "5", "--seconds", "1")
    assert len(served) == 4 + 2  # the schedule's requests and one warm-up per connection
    assert len(doc["latencies_ms"]) == 4 and len(doc["warmup_ms"]) == 2 and doc["errors"] == 0
    assert min(doc["latencies_ms"] + doc["warmup_ms"]) >= 200  # counted once the last byte arrived
    assert bad["errors"] == 5  # a 404 is not an answer


def test_extender_bodies_are_what_kube_scheduler_sends(tmp_path):
    from netd.api.extender_types import ExtenderArgs
    from netd.bench.api_scale import extender_bodies

    names, full = extender_bodies(tmp_path, 50)
    by_name = ExtenderArgs.model_validate_json(names.read_bytes())
    nodes = ExtenderArgs.model_validate_json(full.read_bytes())  # the protocol's own models accept both
    assert by_name.candidates() == nodes.candidates() == [f"node-{n:03d}" for n in range(50)]
    assert 4_000 < full.stat().st_size / 50 < 8_000  # a v1.Node as kubelets report them: ~5-6 KB


def test_the_fabric_listener_is_its_own_process_and_stops_with_the_bench():
    import urllib.request

    from netd.bench.api_scale import BigListener
    from netd.config.service import SchedulerConfig

    big = BigListener(20, SchedulerConfig(), refresh_s=0.2)
    with big:
        proc = big.proc
        assert proc is not None and proc.poll() is None
        assert urllib.request.urlopen(f"{big.base}/healthz", timeout=10).read() == b'{"status":"ok"}'
        report = big.report()  # the child's view, rebuilt here from the same seed
        assert report is not None and len(report.ports) == 160
        time.sleep(1.2)  # a few re-scores (one is enough; a loaded machine wakes the thread late)
    assert proc.returncode == 0 and big.proc is None  # stopped by closing its stdin
    assert big.update_ms and all(ms > 0 for ms in big.update_ms)  # its re-scores, reported as it stopped

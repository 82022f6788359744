"""The daemon's tuning service end to end on the emulated fabric, its metrics and its API.

The emulated hosts have debugfs-shaped cc_params trees; the emulator runs with the parameters in force
on host 0's first device, so a change the service applies there changes the fabric's dynamics. The
tuner's model is replaced by a synthetic one (tests/cc/test_tuner.py) to keep this fast.
"""

from __future__ import annotations

import dataclasses
import errno
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry, generate_latest

from cc.tune.tuner import Tuner, TunerPolicy
from netd.api.app import create_app
from netd.cli import main
from netd.config.settings import load_config
from netd.daemon.state import PublishedState
from netd.emulated.fabric_host import EmulatedFabric
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
from netd.tuning.faults import Fault, FaultyFiles
from netd.tuning.metrics import TuningCollector
from netd.tuning.routes import tuning_router
from netd.tuning.service import TuningService
from tests.api.conftest import serving
from tests.cc.test_tuner import synthetic


class Host:
    """An emulated fabric, host 0's collector and a hand-driven clock: one `tick()` = 1 s."""

    def __init__(self, tmp: Path, mode: str) -> None:
        self.fabric = EmulatedFabric(
            tmp / "emu", tors=2, hosts_per_tor=2, ports_per_host=2, seed=3, sim_ms_per_tick=10
        )
        self.root = self.fabric.host_root(0)
        self.cfg = load_config(
            None,
            environ={},
            overrides={
                "interval": 1.0,
                "tuning": {
                    "mode": mode,
                    "interval": 2.0,
                    "min_apply_interval": 0.0,
                    "state_dir": str(tmp / "journal"),
                },
            },
        )
        self.collector = Sampler.from_config(self.cfg, self.root, emulated=True)
        self.tracker = SeriesTracker()
        self.now = 0.0
        self.state: PublishedState | None = None

    def service(self) -> TuningService:
        service = TuningService(self.cfg, self.root, lambda: self.state, clock=lambda: self.now)
        service.tuner = Tuner(service.bounds, TunerPolicy(watch=1), evaluator=synthetic)
        return service

    def tick(self) -> None:
        self.fabric.advance(1.0)
        snap = dataclasses.replace(self.collector.collect(), monotonic=self.now)
        obs = self.tracker.update(snap)
        self.state = PublishedState(observation=obs, ticks=(self.state.ticks + 1) if self.state else 1)
        self.now += 1.0

    def close(self) -> None:
        self.collector.close()
        self.fabric.close()


@pytest.fixture
def host(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Host]:
    h = Host(tmp_path, getattr(request, "param", "apply"))
    yield h
    h.close()


def drive(host: Host, service: TuningService, seconds: int) -> list[str]:
    actions = []
    for _ in range(seconds):
        host.tick()
        rec = service.step()
        if rec is not None:
            actions.append(rec.action)
    return actions


def test_apply_mode_writes_the_emulated_nics_and_the_fabric_follows(host: Host) -> None:
    service = host.service()
    assert [t.kind for t in service.applier.trees] == ["debugfs", "debugfs"]
    assert host.fabric.fabric.params.rp_time_reset == 300
    actions = drive(host, service, 8)
    assert "change" in actions
    assert service.actions["applied"] >= 1 and service.last_outcome is not None
    in_force = service.values["mlx5_0"]["rp_time_reset"]
    assert in_force < 300  # the synthetic model prefers a faster timer (switch knobs are frozen)
    host.tick()
    assert host.fabric.fabric.params.rp_time_reset == in_force  # the emulator picked it up
    doc = service.document()
    assert doc["mode"] == "apply" and doc["recommendation"]["explanation"].startswith(("CHANGE", "HOLD"))


@pytest.mark.parametrize("host", ["recommend"], indirect=True)
def test_recommend_mode_changes_nothing(host: Host) -> None:
    service = host.service()
    actions = drive(host, service, 6)
    assert "change" in actions and service.actions["applied"] == 0
    assert service.values["mlx5_0"]["rp_time_reset"] == 300


def test_metrics_and_the_authenticated_api(host: Host) -> None:
    service = host.service()
    service.mode = "recommend"
    drive(host, service, 4)
    registry = CollectorRegistry()
    registry.register(TuningCollector(service))
    text = generate_latest(registry).decode()
    assert 'netd_dcqcn_param{device="mlx5_0",name="rp_time_reset"} 300.0' in text
    assert 'netd_tuner_actions_total{action="change"}' in text

    app = create_app(
        lambda: host.state,
        lambda: 0.0,
        1.0,
        routers=(tuning_router(service, "s3cret"),),
        collectors=(TuningCollector(service),),
    )
    client = TestClient(app)
    assert client.get("/v1/tuning").json()["recommendation"]["action"] == "change"
    assert "netd_dcqcn_param" in client.get("/metrics").text
    assert client.post("/v1/tuning/apply").status_code == 401
    assert client.post("/v1/tuning/apply", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = client.post("/v1/tuning/apply", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and ok.json()["state"] == "applied"
    assert service.values["mlx5_0"]["rp_time_reset"] < 300
    back = client.post("/v1/tuning/rollback", headers={"Authorization": "Bearer s3cret"})
    assert back.status_code == 200 and service.values["mlx5_0"]["rp_time_reset"] == 300

    closed = TestClient(
        create_app(lambda: host.state, lambda: 0.0, 1.0, routers=(tuning_router(service, None),))
    )
    assert closed.post("/v1/tuning/rollback").status_code == 403  # no token configured: never mutates


class Crash(BaseException):
    """A crash in-process: not an error any code catches, so nothing cleans up after it."""


class CrashingFiles(FaultyFiles):
    """Raises Crash at the given rename of a parameter file (after the journal's own)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.seen = at, 0

    def replace(self, src: Path, dst: Path) -> None:
        if "cc_params" in str(dst):
            self.seen += 1
            if self.seen == self.at:
                raise Crash
        super().replace(src, dst)


def test_an_interrupted_change_is_rolled_back_when_the_service_starts(host: Host) -> None:
    first = host.service()
    first.applier.files = CrashingFiles(at=2)
    with pytest.raises(Crash):
        first.applier.apply(first.applier.plan({"rp_ai_rate": 40}), source="test", reason="crash")
    assert first.applier.in_force()["mlx5_0"]["rp_ai_rate"] == 40  # one device changed before the crash
    restarted = host.service()
    assert restarted.actions["crash_recovered"] == 1
    assert restarted.values["mlx5_0"]["rp_ai_rate"] == 5


def test_recovery_needed_is_shown_blocks_applies_and_is_finished_later(host: Host) -> None:
    service = host.service()
    service.mode = "recommend"
    drive(host, service, 4)
    ai1 = service.applier.trees[1].path / "rp_ai_rate"
    ai0 = service.applier.trees[0].path / "rp_ai_rate"
    service.applier.files = FaultyFiles(
        Fault("read", errno.EIO, path=str(ai1.parent), name="rp_ai_rate"),  # the read-back of mlx5_1
        Fault("replace", errno.EIO, path=str(ai0.parent), name="rp_ai_rate", nth=2, times=0),  # its undo
    )
    outcome = service.applier.apply(service.applier.plan({"rp_ai_rate": 40}), source="test", reason="x")
    service._record(outcome, "applied")
    assert outcome.state == "recovery-needed" and service.actions["recovery_needed"] == 1
    doc = service.document()
    assert doc["recovery_needed"]["devices"] == ["mlx5_0", "mlx5_1"]
    assert "undo failed" in doc["recovery_needed"]["error"]
    registry = CollectorRegistry()
    registry.register(TuningCollector(service))
    text = generate_latest(registry).decode()
    assert 'netd_tuner_recovery_needed{device="mlx5_0"} 1.0' in text

    client = TestClient(
        create_app(lambda: host.state, lambda: 0.0, 1.0, routers=(tuning_router(service, "t"),))
    )
    refused = client.post("/v1/tuning/apply", headers={"Authorization": "Bearer t"})
    assert refused.status_code == 409
    assert refused.headers["content-type"].startswith("application/problem+json")
    body = refused.json()
    assert body["type"] == "urn:netd:problem:tuning-not-applied" and body["status"] == 409
    assert body["outcome"]["state"] == "refused" and "recovery needed" in body["detail"]

    service.applier.files = FaultyFiles()  # the device answers again
    back = client.post("/v1/tuning/rollback", headers={"Authorization": "Bearer t"})
    assert back.status_code == 200 and back.json()["state"] == "recovered"
    assert service.values["mlx5_0"]["rp_ai_rate"] == 5 and service.recovery is None
    text = generate_latest(registry).decode()
    assert 'netd_tuner_recovery_needed{device="mlx5_0"} 0.0' in text


def test_a_failed_apply_answers_409_with_the_outcome_file_by_file(host: Host) -> None:
    service = host.service()
    service.mode = "recommend"
    drive(host, service, 4)
    reset1 = service.applier.trees[1].path / "rp_time_reset"
    service.applier.files = FaultyFiles(Fault("read", errno.EIO, path=str(reset1)))
    client = TestClient(
        create_app(lambda: host.state, lambda: 0.0, 1.0, routers=(tuning_router(service, "t"),))
    )
    failed = client.post("/v1/tuning/apply", headers={"Authorization": "Bearer t"})
    assert failed.status_code == 409
    outcome = failed.json()["outcome"]
    assert outcome["state"] == "failed" and "Input/output error" in outcome["error"]
    assert {r["result"] for r in outcome["results"]} <= {"undone", "not-written"}
    assert any(r["result"] == "undone" for r in outcome["results"])
    assert service.values["mlx5_0"]["rp_time_reset"] == 300 and service.actions["apply_failed"] == 1


@pytest.mark.slow  # a real HTTP server and the CLI against it
def test_netd_tune_apply_against_the_daemon_exits_1_when_the_write_failed(
    host: Host, free_port: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    service = host.service()
    service.mode = "recommend"
    drive(host, service, 4)
    reset1 = service.applier.trees[1].path / "rp_time_reset"
    service.applier.files = FaultyFiles(Fault("read", errno.EIO, path=str(reset1)))
    app = create_app(lambda: host.state, lambda: 0.0, 1.0, routers=(tuning_router(service, "tok"),))
    monkeypatch.setenv("NETD_LISTEN", f"127.0.0.1:{free_port}")
    monkeypatch.setenv("NETD_API_TOKEN", "tok")
    with serving(app, free_port):
        assert main(["tune", "--apply"]) == 1
        out, err = capsys.readouterr()
        assert "apply: failed" in out and "Input/output error" in out
        assert err.startswith("netd: not applied (failed): ") and err.count("\n") == 1
        service.applier.files = FaultyFiles()
        assert main(["tune", "--apply", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["apply"]["state"] == "applied"
    assert service.values["mlx5_1"]["rp_time_reset"] < 300

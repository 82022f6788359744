"""The committed Prometheus rules: promtool accepts them, promtool's unit tests pass and cover every rule."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from netd.dashboards import ALERT_RULES_FILE, RECORDING_RULES_FILE
from netd.dashboards.alerts import alerts
from netd.dashboards.bench import promtool_verdict
from netd.dashboards.recording import PORT_SIGNALS, WINDOW, recording_rules
from netd.dashboards.resample import expand, resample

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "dashboards"
TESTS = sorted((RULES / "rules" / "tests").glob("*.test.yml"))
RUNBOOK = REPO / "docs" / "runbook.md"


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if os.access("/usr/bin/promtool", os.X_OK) else None
    )
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed: .ci/setup-host should have installed prometheus")
        pytest.skip("promtool is not installed (make setup installs Debian's prometheus package)")
    return found


def _tests() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in TESTS:
        out += yaml.safe_load(f.read_text())["tests"]
    return out


def test_promtool_check_rules_accepts_both_rule_files(promtool):
    files = [RULES / RECORDING_RULES_FILE, RULES / ALERT_RULES_FILE]
    r = subprocess.run(
        [promtool, "check", "rules", *map(str, files)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"SUCCESS: {len(recording_rules())} rules found" in r.stdout
    assert f"SUCCESS: {len(alerts())} rules found" in r.stdout


@pytest.mark.slow
def test_promtool_unit_tests_pass(promtool):
    assert len(TESTS) >= 2
    r = subprocess.run(
        [promtool, "test", "rules", *map(str, TESTS)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(TESTS)


def test_every_recording_rule_has_an_expected_value_test():
    tested = {
        t["expr"].strip()
        for group in _tests()
        for t in group.get("promql_expr_test", [])
        if t.get("exp_samples")
    }
    missing = [r.record for r in recording_rules() if r.record not in tested]
    assert not missing, f"recording rules without a promql_expr_test: {missing}"


def test_every_alert_fires_in_a_test_and_all_stay_silent_on_the_healthy_fabric():
    groups = _tests()
    fires = {t["alertname"] for g in groups for t in g.get("alert_rule_test", []) if t.get("exp_alerts")}
    names = {a.name for a in alerts()}
    assert names - fires == set(), "alerts never shown to fire"
    silent_everywhere = [
        {t["alertname"] for t in g.get("alert_rule_test", []) if not t.get("exp_alerts")} for g in groups
    ]
    assert any(names <= s for s in silent_everywhere), (
        "no test keeps every alert silent on one healthy fabric"
    )
    for g in groups:
        for t in g.get("alert_rule_test", []):
            for exp in t.get("exp_alerts") or []:
                ann = exp["exp_annotations"]
                assert {"summary", "description", "runbook_url"} <= set(ann), t["alertname"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    for line in markdown.splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_every_alert_is_complete_and_its_runbook_section_exists():
    anchors = _anchors(RUNBOOK.read_text())
    committed = yaml.safe_load((RULES / ALERT_RULES_FILE).read_text())
    rules = [r for g in committed["groups"] for r in g["rules"]]
    assert len(rules) == len(alerts())
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r["alert"]
        ann = r["annotations"]
        assert ann["summary"] and ann["description"], r["alert"]
        path, _, anchor = ann["runbook_url"].partition("#")
        assert path == "docs/runbook.md" and anchor in anchors, (
            f"{r['alert']}: no section #{anchor} in docs/runbook.md"
        )


def test_the_readme_counts_what_the_rule_files_hold():
    readme = (RULES / "README.md").read_text()
    assert f"{len(recording_rules())} recording rules" in readme
    assert f"{len(alerts())} alerts" in readme


@pytest.mark.slow
def test_promtool_finds_nothing_to_lint_in_what_netd_exports(promtool, tmp_path):
    """`promtool check metrics` on a real exposition: names, units and types as Prometheus wants them."""
    from fastapi.testclient import TestClient

    from netd.api.app import create_app
    from netd.commands.run import build_daemon
    from netd.config.settings import load_config

    env = {"NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"), "NETD_EMULATOR_IN_PROCESS": "true"}
    daemon, _ = build_daemon(load_config(None, environ=env, overrides={"sysfs_root": tmp_path}))
    try:
        daemon.tick()
        daemon.tick()
        exposition = TestClient(create_app(daemon.state, daemon.last_tick_age_s, 1.0)).get("/metrics").text
    finally:
        daemon.close()
    assert "netd_anomaly_detector_errors_total{detector=" in exposition  # at 0 from the start
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, text=True)
    assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), (
        checked.stdout + checked.stderr
    )


def test_every_all_variable_has_one_regex_for_all():
    for path in (REPO / "dashboards").glob("*.json"):
        for var in json.loads(path.read_text())["templating"]["list"]:
            if var.get("includeAll"):
                assert var.get("allValue") == ".*", (path.name, var["name"])


@pytest.mark.slow
def test_promtool_unit_tests_pass_with_a_60s_scrape_interval(promtool, tmp_path):
    """Prometheus' default scrape interval: every recording rule still has its value and every alert
    still fires on its incident and stays silent on the healthy fabric."""
    v = promtool_verdict(TESTS, "60s", WINDOW, tmp_path, promtool)
    assert v.ok, v.output
    assert v.output.count("SUCCESS") == len(TESTS)


@pytest.mark.slow
def test_a_1m_window_fails_the_60s_tests(promtool, tmp_path):
    """The 60 s check can fail: the same rules with 1-minute ranges lose their values and the four
    alerts the issue named never fire, as on a real Prometheus scraping every 60 s."""
    v = promtool_verdict(TESTS, "60s", "1m", tmp_path, promtool)
    assert not v.ok
    assert {
        "NetdPfcStorm",
        "NetdCongestionSpreading",
        "NetdTorCongestionSustained",
        "NetdRoceLoss",
    } <= v.failed_alerts
    assert {f"port:{s.name}:rate{WINDOW}" for s in PORT_SIGNALS} <= v.failed_records


def test_resampling_keeps_each_series_on_its_timeline():
    assert expand("0+15x3 _x2 7 1x1") == [0, 15, 30, 45, None, None, 7, 1, 1]
    doc = {
        "evaluation_interval": "15s",
        "tests": [
            {
                "interval": "15s",
                "input_series": [{"series": "a", "values": "0+15x8"}, {"series": "b", "values": "0x3 1x4"}],
                "alert_rule_test": [{"eval_time": "2m", "alertname": "X"}],
            }
        ],
    }
    g = resample(doc, "60s")["tests"][0]
    assert g["interval"] == "60s" and resample(doc, "60s")["evaluation_interval"] == "15s"
    assert [s["values"] for s in g["input_series"]] == ["0 60 120", "0 1 1"]
    assert g["alert_rule_test"][0]["eval_time"] == "150s"  # half a scrape interval past the sample at 2m
    with pytest.raises(ValueError):
        resample(doc, "20s")


def test_no_panel_counts_events_over_overlapping_ranges():
    """increase(...[$__rate_interval]) per point counts one event at several points: panels show rates."""
    for path in RULES.glob("*.json"):
        text = path.read_text()
        assert not re.search(r"increase\(\w+(\{[^}]*\})?\[\$__rate_interval\]", text), path.name
        assert "per interval" not in text, path.name

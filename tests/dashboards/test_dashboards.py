"""The committed dashboard JSON: in sync with the generator, well formed, and naming only exported metrics."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netd.cli import main
from netd.dashboards import artifacts, dashboards
from netd.dashboards.grafana_json import SCHEMA_VERSION
from netd.dashboards.inventory import (
    dashboard_queries,
    metric_names,
    name_patterns,
    rule_queries,
    template_queries,
)
from netd.dashboards.recording import recording_rules

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "dashboards"
# series Prometheus itself makes, which the dashboards and rules read next to netd's own
PROMETHEUS_SERIES = {"up", "ALERTS", "scrape_duration_seconds", "scrape_samples_scraped"}


def _load() -> dict[str, dict[str, Any]]:
    return {name: json.loads((COMMITTED / name).read_text()) for name in dashboards()}


def _panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])


def _data_panels(d: dict[str, Any]) -> Iterator[dict[str, Any]]:
    return (p for p in _panels(d) if p["type"] != "row")


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_committed_files_are_what_the_generator_writes():
    stale = [
        rel
        for rel, text in artifacts().items()
        if not (COMMITTED / rel).exists() or (COMMITTED / rel).read_text() != text
    ]
    assert not stale, f"stale: {stale}; run `netd dashboards --out dashboards` and commit"


def test_dashboards_are_importable_classic_models():
    uids, titles = set(), set()
    for name, d in _load().items():
        assert d["schemaVersion"] == SCHEMA_VERSION >= 39, name
        assert d["id"] is None, f"{name}: an id would clash with the importing Grafana's own"
        assert d["uid"] and d["uid"] not in uids and d["title"] not in titles
        uids.add(d["uid"])
        titles.add(d["title"])
        assert "netd" in d["tags"], name  # the dashboards link to each other by this tag
        ids = [p["id"] for p in _panels(d)]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"


def test_every_panel_and_query_uses_the_datasource_variable_and_no_uid_is_hard_coded():
    for name, d in _load().items():
        ds = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
        assert [(v["name"], v["query"]) for v in ds] == [("datasource", "prometheus")], name
        for p in _data_panels(d):
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, (name, p["title"])
            assert p["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
        for key, value in _walk(d):
            if key == "datasource" and isinstance(value, dict):
                assert value["uid"] in ("${datasource}", "-- Grafana --"), f"{name}: hard-coded uid {value}"


def test_every_panel_has_a_unit_a_title_and_says_what_bad_looks_like():
    for name, d in _load().items():
        for p in _data_panels(d):
            where = f"{name}: {p['title']!r}"
            assert p["fieldConfig"]["defaults"]["unit"], f"{where} has no unit"
            assert len(p["title"]) > 10, where
            assert re.search(r"\bbad\b", p["description"], re.IGNORECASE), f"{where}: say what bad looks like"


def test_rates_use_rate_interval_and_instant_tables_the_dashboard_range():
    for name, d in _load().items():
        for p in _data_panels(d):
            for t in p["targets"]:
                windows = set(re.findall(r"\[([^\]]+)\]", t["expr"]))
                allowed = {"$__range"} if t["instant"] else {"$__rate_interval"}
                assert windows <= allowed, f"{name}: {p['title']!r}: windows {windows} in {t['expr']}"


def test_panels_tile_the_grid_without_overlap():
    for name, d in _load().items():
        cells: set[tuple[int, int]] = set()
        for p in _panels(d):
            g = p["gridPos"]
            assert 0 <= g["x"] and g["x"] + g["w"] <= 24, (name, p["title"])
            mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
            assert not mine & cells, f"{name}: {p['title']!r} overlaps another panel"
            cells |= mine


def test_port_detail_variables_chain_instance_device_port_priority():
    d = json.loads((COMMITTED / "netd-host-port-detail.json").read_text())
    variables = {v["name"]: v for v in d["templating"]["list"]}
    order = [v["name"] for v in d["templating"]["list"]]
    assert order == ["datasource", "instance", "device", "port", "netdev", "priority"]
    for name, uses in (
        ("device", "$instance"),
        ("port", "$device"),
        ("netdev", "$port"),
        ("priority", "$netdev"),
    ):
        assert uses in variables[name]["query"]["query"], f"${name} must depend on {uses}"
    assert variables["netdev"]["hide"] == 2  # the ethtool join key: chained, never shown
    assert variables["instance"]["multi"] is False


def test_metric_names_of_a_query():
    assert metric_names('sum by (tor) (rate(netd_a_total{x="y"}[5m]) * on(instance) group_left(tor) b)') == {
        "netd_a_total",
        "b",
    }
    assert metric_names('label_values(netd_port_info{instance="$instance"}, device)') == {"netd_port_info"}
    assert metric_names("count(up == 0) or vector(0)") == {"up"}
    assert metric_names("tor:netd_x:avg4m > 0.1") == {"tor:netd_x:avg4m"}
    assert name_patterns('rate({__name__=~"netd_(a|b)_total"}[1m])') == ["netd_(a|b)_total"]


def _exported(scrape: str) -> set[str]:
    """Metric names netd declares in its exposition (# TYPE lines), including families empty right now."""
    names = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", scrape, re.MULTILINE):
        name, kind = m.groups()
        names.add(name)
        if kind in ("histogram", "summary"):
            names |= {f"{name}_sum", f"{name}_count", f"{name}_bucket"}
    return names


@pytest.mark.slow
def test_every_metric_a_query_names_is_exported_by_netd(live_scrape, live_netd):
    exported = _exported(live_scrape)
    recorded = {r.record for r in recording_rules()}
    queries = dashboard_queries() + rule_queries() + template_queries()
    unknown: dict[str, set[str]] = {}
    unverifiable: set[str] = set()  # eBPF metric names when the probes cannot load here (not root)
    for q in queries:
        names = {n for n in metric_names(q.expr) if n not in exported | recorded | PROMETHEUS_SERIES}
        names |= {
            f"__name__=~{p}" for p in name_patterns(q.expr) if not any(re.fullmatch(p, n) for n in exported)
        }
        if q.requires == "bpf" and not live_netd.bpf:
            unverifiable |= names
            continue
        for n in names:
            unknown.setdefault(n, set()).add(q.where)
    assert not unknown, f"names netd does not export: {unknown}"
    if unverifiable:
        pytest.skip(f"eBPF metric names not verified without root and bcc: {sorted(unverifiable)}")


def test_cli_writes_then_checks(tmp_path, capsys):
    assert main(["dashboards", "--out", str(tmp_path), "--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert main(["dashboards", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "netd-fabric-overview.json").is_file()
    assert (tmp_path / "rules" / "netd-alerts.rules.yml").is_file()
    assert main(["dashboards", "--out", str(tmp_path), "--check"]) == 0
    assert "up to date" in capsys.readouterr().out.splitlines()[-1]
    custom = tmp_path / "custom"
    assert (
        main(
            [
                "dashboards",
                "--out",
                str(custom),
                "--runbook-url",
                "https://wiki.example/netd",
                "--job",
                "rdma",
            ]
        )
        == 0
    )
    rules = (custom / "rules" / "netd-alerts.rules.yml").read_text()
    assert "runbook_url: https://wiki.example/netd#pfc-storm" in rules
    assert 'up{job="rdma"} == 0' in rules

"""Every dashboard query and rule expression, run through a real Prometheus scraping a real netd.

Grafana's part is simulated the way Grafana does it: variables are resolved in order with
``label_values`` against the same Prometheus (so the instance → device → port → netdev → priority
chain must yield values at each step), multi-value variables become ``(a|b)`` regexes, and
``$__rate_interval`` is what Grafana computes for a 1 s scrape interval.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest

from netd.dashboards import dashboards
from netd.dashboards.alerts import alerts
from netd.dashboards.grafana import Dashboard
from netd.dashboards.inventory import Query, rule_queries, template_queries
from netd.dashboards.recording import recording_rules
from tests.dashboards.live import PrometheusApi, PromQLError

pytestmark = pytest.mark.slow

# Grafana: $__rate_interval = max($__interval + scrape interval, 4 x scrape interval); scrape interval 1 s
BUILTINS = {"__rate_interval": "4s", "__range": "1m", "__interval": "1s"}
DATA_DEADLINE_S = 45.0
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*(\w+)\s*\)$")


def substitute(expr: str, values: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise AssertionError(f"unknown variable ${name} in {expr}")
        return values[name]

    return _VAR.sub(one, expr)


def grafana_regex_escape(value: str) -> str:
    """Grafana's Prometheus data source escape for multi-value variables (regex, inside a PromQL string)."""
    value = value.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]'+?.()|]", lambda m: "\\\\" + m.group(0), value)


def resolve_variables(api: PrometheusApi, d: Dashboard) -> dict[str, str]:
    """Each variable's query, with the earlier ones substituted, must list values; pick what Grafana would."""
    values = dict(BUILTINS)
    for v in d.variables:
        m = _LABEL_VALUES.match(substitute(v.query, values))
        assert m, f"{d.uid}: variable ${v.name} is not label_values(selector, label): {v.query}"
        found = api.label_values(m.group(2), m.group(1))
        assert found, f"{d.uid}: variable ${v.name} has no values ({v.query} with {values})"
        values[v.name] = "(" + "|".join(grafana_regex_escape(x) for x in found) + ")" if v.multi else found[0]
    return values


@dataclass(frozen=True)
class Concrete:
    query: Query
    expr: str


def concrete_queries(api: PrometheusApi) -> list[Concrete]:
    out: list[Concrete] = []
    for file, d in dashboards().items():
        values = resolve_variables(api, d)
        for row in d.rows:
            for p in row.panels:
                for i, t in enumerate(p.targets):
                    q = Query(
                        f"{file}: {p.title!r} {chr(65 + i)}", t.expr, "panel", t.instant, t.sparse, t.requires
                    )
                    out.append(Concrete(q, substitute(t.expr, values)))
        for name, expr, _ in d.annotations:
            q = Query(f"{file}: annotation {name}", expr, "annotation", sparse="alerts firing only")
            out.append(Concrete(q, substitute(expr, values)))
    out += [Concrete(q, q.expr) for q in rule_queries()]
    return out


def _run(api: PrometheusApi, c: Concrete) -> list[object]:
    if c.query.kind == "panel" and not c.query.instant:
        return list(api.query_range(c.expr))
    return list(api.query(c.expr))


def test_every_panel_query_and_rule_expression_parses_and_returns_data(live_prometheus, live_netd):
    api = live_prometheus
    features = {"bpf"} if live_netd.bpf else set()
    queries = concrete_queries(api)
    assert len(queries) > 100
    errors: dict[str, str] = {}
    pending = {c.query.where: c for c in queries}
    deadline = time.monotonic() + DATA_DEADLINE_S
    while pending:
        for where, c in list(pending.items()):
            try:
                result = _run(api, c)
            except PromQLError as exc:
                errors[where] = f"{exc}\n    {c.expr}"
                del pending[where]
                continue
            optional = c.query.sparse or (c.query.requires and c.query.requires not in features)
            if result or optional:
                del pending[where]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert not errors, "queries Prometheus rejects:\n" + "\n".join(f"  {w}: {e}" for w, e in errors.items())
    assert not pending, f"queries without data after {DATA_DEADLINE_S:.0f} s:\n" + "\n".join(
        f"  {w}:\n    {c.expr}" for w, c in pending.items()
    )


def test_alert_template_queries_parse(live_prometheus):
    """The queries inside alert descriptions run when an alert fires; they must at least be valid PromQL."""
    for q in template_queries():
        live_prometheus.query(q.expr.replace("%s", "x"))


def test_prometheus_loads_every_rule_and_evaluates_it_without_error(live_prometheus):
    expected = {r.record for r in recording_rules()} | {a.name for a in alerts()}
    deadline = time.monotonic() + DATA_DEADLINE_S
    while True:
        rules = live_prometheus.rules()
        evaluated = [r for r in rules if not r.get("lastEvaluation", "").startswith("0001")]
        if len(evaluated) == len(rules) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert {r.get("name") for r in rules} == expected
    bad = {r["name"]: r.get("lastError") for r in rules if r.get("health") != "ok"}
    assert not bad, f"rules failing to evaluate: {bad}"


def test_recording_rules_produce_series_from_the_emulated_fabric(live_prometheus):
    """Not only do the expressions return data: Prometheus stores each recorded series."""
    missing: list[str] = []
    deadline = time.monotonic() + DATA_DEADLINE_S
    for r in recording_rules():
        while not live_prometheus.query(r.record):
            if time.monotonic() > deadline:
                missing.append(r.record)
                break
            time.sleep(0.5)
    assert not missing, f"recording rules without stored series: {missing}"


def test_the_emulated_fabric_fires_only_the_emulated_fabric_alert(live_prometheus):
    """A healthy emulated fabric: the one pending or firing netd alert is the one saying it is emulated."""
    deadline = time.monotonic() + DATA_DEADLINE_S
    names: set[str] = set()
    while "NetdEmulatedFabric" not in names and time.monotonic() < deadline:
        time.sleep(0.5)
        names = {s["metric"]["alertname"] for s in live_prometheus.query('ALERTS{alertname=~"Netd.*"}')}
    assert names == {"NetdEmulatedFabric"}

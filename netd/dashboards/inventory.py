"""Every PromQL expression the dashboards and rules contain, and the metric names each one reads.

The tests use this inventory to run each query against a real Prometheus scraping netd and to check
that every metric a query names is one netd exports. ``metric_names`` is a small lexical pass, not a
PromQL parser: it removes strings, label matchers, grouping clauses and ranges, then keeps the
identifiers that are not functions or keywords. That is exact for the PromQL this package writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from netd.dashboards import dashboards
from netd.dashboards.alerts import alerts
from netd.dashboards.recording import recording_rules

__all__ = ["Query", "dashboard_queries", "metric_names", "name_patterns", "rule_queries", "template_queries"]

QueryKind = Literal["panel", "variable", "annotation", "record", "alert", "signal"]


@dataclass(frozen=True)
class Query:
    where: str
    expr: str
    kind: QueryKind
    instant: bool = False
    sparse: str = ""  # non-empty: may return nothing on a healthy emulated fabric, and why
    requires: str = ""  # an optional netd feature without which there is no data ("bpf")


def dashboard_queries() -> list[Query]:
    out: list[Query] = []
    for file, d in dashboards().items():
        for v in d.variables:
            out.append(Query(f"{file}: variable ${v.name}", v.query, "variable"))
        for name, expr, _ in d.annotations:
            out.append(Query(f"{file}: annotation {name!r}", expr, "annotation", sparse="alerts firing only"))
        for row in d.rows:
            for p in row.panels:
                for i, t in enumerate(p.targets):
                    where = f"{file}: {row.title} / {p.title!r} {chr(ord('A') + i)}"
                    out.append(Query(where, t.expr, "panel", t.instant, t.sparse, t.requires))
    return out


def rule_queries() -> list[Query]:
    out = [Query(f"record {r.record}", r.expr, "record") for r in recording_rules()]
    for a in alerts():
        out.append(Query(f"alert {a.name}", a.expr, "alert", sparse="an alert is silent on a healthy fabric"))
        out.append(Query(f"alert {a.name} signal", a.signal, "signal", sparse=a.sparse, requires=a.requires))
    return out


_TEMPLATE_QUERY = re.compile(r"printf `([^`]*)`")


def template_queries() -> list[Query]:
    """PromQL inside alert annotations (``query (printf `...` ...)``), ``%s`` left in place."""
    out = []
    for a in alerts():
        for text in (a.summary, a.description):
            out += [Query(f"alert {a.name} annotation", q, "alert") for q in _TEMPLATE_QUERY.findall(text)]
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME_MATCHER = re.compile(r'__name__\s*=~?\s*"((?:[^"\\]|\\.)*)"')
_BRACES = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_LABEL_VALUES = re.compile(r"label_values\((.*),\s*\w+\s*\)$")  # Grafana's variable function
_IDENT = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)\b(?!\s*\()")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "offset",
        "inf",
        "nan",
        "Inf",
        "NaN",
    }
)


def name_patterns(expr: str) -> list[str]:
    """The regular expressions of ``__name__=~"..."`` matchers (metrics selected by pattern)."""
    return _NAME_MATCHER.findall(expr)


def metric_names(expr: str) -> set[str]:
    """Metric (and recording-rule) names ``expr`` selects by name; see :func:`name_patterns` for the rest."""
    text = _LABEL_VALUES.sub(r"\1", expr.strip())
    text = _STRING.sub('""', text)
    text = _BRACES.sub("", text)
    text = _GROUPING.sub("", text)
    text = _RANGE.sub("", text)
    return {m for m in _IDENT.findall(text) if m not in _KEYWORDS}

"""Rendering of :mod:`netd.dashboards.grafana` values into Grafana's classic dashboard JSON model."""

from __future__ import annotations

from typing import Any

from netd.dashboards.grafana import Dashboard, Panel, Target, Variable

__all__ = ["DATASOURCE", "SCHEMA_VERSION", "render"]

# Grafana 12's dashboard schema. Newer Grafana migrates upward on import (41 → 42 → 43 only touch
# hideFrom overrides and formatTime transformations, which these dashboards do not use).
SCHEMA_VERSION = 41
# Every panel, query and variable points at the `datasource` variable: no datasource uid is ever
# written, so the JSON imports into any Grafana whose default Prometheus data source is the right one.
DATASOURCE: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}
GRID_WIDTH = 24


def render(d: Dashboard) -> dict[str, Any]:
    """The classic dashboard JSON model, ready for import (``id`` null, ``uid`` fixed)."""
    panels: list[dict[str, Any]] = []
    next_id = 1
    y = 0
    for row in d.rows:
        panels.append(
            {
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                "id": next_id,
                "panels": [],
                "title": row.title,
                "type": "row",
            }
        )
        next_id += 1
        y += 1
        x, line_h = 0, 0
        for p in row.panels:
            if x + p.width > GRID_WIDTH:
                x, y, line_h = 0, y + line_h, 0
            panels.append(_panel(p, next_id, {"h": p.height, "w": p.width, "x": x, "y": y}))
            next_id += 1
            x += p.width
            line_h = max(line_h, p.height)
        y += line_h
    return {
        "annotations": {"list": [_builtin_annotation(), *(_annotation(*a) for a in d.annotations)]},
        "description": d.description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,  # shared crosshair: line the panels up in time during an incident
        "id": None,
        "links": [
            {
                "asDropdown": True,
                "icon": "external link",
                "includeVars": False,
                "keepTime": True,
                "tags": ["netd"],
                "targetBlank": False,
                "title": "netd dashboards",
                "type": "dashboards",
            }
        ],
        "panels": panels,
        "refresh": d.refresh,
        "schemaVersion": SCHEMA_VERSION,
        "tags": list(d.tags),
        "templating": {"list": [_datasource_variable(), *(_variable(v) for v in d.variables)]},
        "time": {"from": d.time_from, "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": d.title,
        "uid": d.uid,
        "version": 1,
    }


def _thresholds(p: Panel) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": colour, "value": value} for value, colour in p.thresholds]
    return {"mode": "absolute", "steps": steps}


def _defaults(p: Panel) -> dict[str, Any]:
    out: dict[str, Any] = {"unit": p.unit, "thresholds": _thresholds(p)}
    if p.min is not None:
        out["min"] = p.min
    if p.max is not None:
        out["max"] = p.max
    if p.decimals is not None:
        out["decimals"] = p.decimals
    if p.mappings:
        out["mappings"] = [
            {"type": "value", "options": {v: {"text": text, "color": colour, "index": i}}}
            for i, (v, text, colour) in enumerate(p.mappings)
        ]
    if p.links:
        out["links"] = [{"title": lk.title, "url": lk.url} for lk in p.links]
    if p.kind == "timeseries":
        out["color"] = {"mode": "palette-classic"}
        out["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 10,
            "showPoints": "never",
            "spanNulls": False,
            "axisSoftMin": 0,
            "stacking": {"mode": "normal" if p.stack else "none", "group": "A"},
            "thresholdsStyle": {"mode": "dashed" if p.thresholds else "off"},
        }
    elif p.kind == "state-timeline":
        out["color"] = {"mode": "thresholds"}
        out["custom"] = {"fillOpacity": 80, "lineWidth": 0}
    elif p.kind == "table":
        out["custom"] = {"align": "auto", "cellOptions": {"type": "color-text"}}
    else:
        out["color"] = {"mode": "thresholds"}
    return out


def _options(p: Panel) -> dict[str, Any]:
    if p.kind == "timeseries":
        return {
            "legend": {
                "showLegend": True,
                "displayMode": "table",
                "placement": "bottom",
                "calcs": ["mean", "max", "lastNotNull"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    if p.kind == "state-timeline":
        return {
            "showValue": "never",
            "mergeValues": True,
            "rowHeight": 0.9,
            "alignValue": "left",
            "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom"},
            "tooltip": {"mode": "single", "sort": "none"},
        }
    if p.kind == "table":
        return {
            "showHeader": True,
            "cellHeight": "sm",
            "sortBy": [{"displayName": p.sort_by, "desc": True}] if p.sort_by else [],
        }
    reduce = {"calcs": ["lastNotNull"], "fields": "", "values": False}
    if p.kind == "bargauge":
        return {
            "reduceOptions": reduce,
            "orientation": "horizontal",
            "displayMode": "gradient",
            "showUnfilled": True,
            "valueMode": "color",
            "namePlacement": "auto",
            "sizing": "auto",
        }
    return {
        "reduceOptions": reduce,
        "colorMode": "background",
        "graphMode": "area",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
        "wideLayout": True,
        "showPercentChange": False,
    }


def _target(t: Target, ref: str, table: bool) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": t.expr,
        "format": "table" if table else "time_series",
        "instant": t.instant,
        "legendFormat": t.legend or "__auto",
        "range": not t.instant,
        "refId": ref,
    }


def _panel(p: Panel, panel_id: int, grid: dict[str, int]) -> dict[str, Any]:
    table = p.kind == "table"
    out: dict[str, Any] = {
        "datasource": DATASOURCE,
        "description": p.description,
        "fieldConfig": {
            "defaults": _defaults(p),
            "overrides": [
                {"matcher": {"id": "byName", "options": name}, "properties": [{"id": "unit", "value": unit}]}
                for name, unit in p.column_units
            ],
        },
        "gridPos": grid,
        "id": panel_id,
        "options": _options(p),
        "targets": [_target(t, chr(ord("A") + i), table) for i, t in enumerate(p.targets)],
        "title": p.title,
        "type": p.kind,
    }
    if table:
        # several instant queries become one row per series: merge on their labels, keep named columns
        hide = {"Time": True, "__name__": True, "job": True}
        out["transformations"] = [
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": hide,
                    "renameByName": p.columns,
                    "indexByName": {k: i for i, k in enumerate(p.columns)},
                },
            },
            {"id": "filterFieldsByName", "options": {"include": {"names": list(p.columns.values())}}},
        ]
    return out


def _builtin_annotation() -> dict[str, Any]:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def _annotation(name: str, expr: str, text: str) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "enable": True,
        "expr": expr,
        "iconColor": "red",
        "name": name,
        "step": "60s",
        "tagKeys": "severity",
        "textFormat": text,
        "titleFormat": "{{alertname}}",
        "useValueForTime": False,
    }


def _datasource_variable() -> dict[str, Any]:
    return {
        "current": {},
        "description": "The Prometheus that scrapes netd (default: Grafana's default data source).",
        "hide": 0,
        "includeAll": False,
        "label": "Data source",
        "multi": False,
        "name": "datasource",
        "options": [],
        "query": "prometheus",
        "refresh": 1,
        "regex": "",
        "skipUrlSync": False,
        "type": "datasource",
    }


def _variable(v: Variable) -> dict[str, Any]:
    return {
        "current": {},
        "datasource": DATASOURCE,
        "definition": v.query,
        "description": v.description,
        "hide": 2 if v.hidden else 0,
        "includeAll": v.multi,
        # "All" as one regex, not an alternation of every value Grafana happened to load
        **({"allValue": ".*"} if v.multi else {}),
        "label": v.label,
        "multi": v.multi,
        "name": v.name,
        "options": [],
        "query": {"qryType": 1, "query": v.query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }

"""A small Grafana dashboard model: frozen values that say only what differs between panels.

Dashboards are declared as :class:`Dashboard` → :class:`Row` → :class:`Panel` → :class:`Target`
and rendered by :func:`netd.dashboards.grafana_json.render` into the JSON Grafana imports. The
renderer owns everything that must be consistent across panels (ids, grid layout, the
``${datasource}`` reference on every panel and query, legend and tooltip options, threshold
colours), so a panel declaration says what it shows, per what, in which unit, and what "bad" looks
like.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Dashboard", "Link", "Panel", "PanelKind", "Row", "Target", "Variable"]

PanelKind = Literal["timeseries", "stat", "table", "state-timeline", "bargauge"]


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel.

    ``sparse`` says why the query may legitimately return nothing on a healthy emulated fabric
    (it shows a fault, or a metric the emulator never produces); the live test then only requires it
    to parse and evaluate. Leave it empty for queries that must return data. ``requires`` names an
    optional netd feature (``"bpf"``: the eBPF probes, off by default) without which there is no data.
    """

    expr: str
    legend: str = ""
    instant: bool = False
    sparse: str = ""
    requires: str = ""  # an optional netd feature the query needs ("bpf"): data only where it is on


@dataclass(frozen=True)
class Link:
    """A data link on a table cell or series point (``${__data.fields.x}`` and ``${__field.labels.x}``)."""

    title: str
    url: str


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[Target, ...]
    kind: PanelKind = "timeseries"
    width: int = 12
    height: int = 8
    # (value, colour) steps above a green base; timeseries draw them as dashed lines so "bad" is visible
    thresholds: tuple[tuple[float, str], ...] = ()
    min: float | None = 0
    max: float | None = None
    decimals: int | None = None
    stack: bool = False
    mappings: tuple[tuple[str, str, str], ...] = ()  # (value, display text, colour)
    links: tuple[Link, ...] = ()
    columns: dict[str, str] = field(default_factory=dict)  # table: field name → header (others hidden)
    sort_by: str = ""  # table: header to sort descending
    column_units: tuple[tuple[str, str], ...] = ()  # table: (header, unit) where it differs from ``unit``


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Variable:
    """A query variable over label values; chained through ``$other`` references in ``query``."""

    name: str
    label: str
    query: str  # label_values(...)
    description: str
    multi: bool = True
    hidden: bool = False


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    rows: tuple[Row, ...]
    variables: tuple[Variable, ...] = ()
    tags: tuple[str, ...] = ("netd", "rdma", "roce")
    refresh: str = "30s"
    time_from: str = "now-1h"
    annotations: tuple[tuple[str, str, str], ...] = ()  # (name, expr, text format)

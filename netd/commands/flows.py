"""`netd flows`: the top congested and victim RoCEv2 flows and TCP retransmissions, from the running
daemon's eBPF probes (GET /v1/flows)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from netd.api.client import daemon_get
from netd.config.settings import Config

__all__ = ["fetch_flows", "register", "render_flows"]

FLOW_COLUMNS: tuple[tuple[str, str], ...] = (
    ("DIR", "direction"),
    ("SOURCE", "src_ip"),
    ("DESTINATION", "dst_ip"),
    ("QP", "dest_qp"),
    ("DSCP", "dscp"),
    ("PACKETS", "packets"),
    ("BYTES", "bytes"),
    ("CE", "ce"),
    ("CE%", "ce_fraction"),
    ("CNP", "cnp"),
    ("NAK", "naks"),
    ("GAPS", "psn_gaps"),
    ("MISSING", "psn_missing"),
    ("REWINDS", "psn_rewinds"),
    ("LAST SEEN", "last_seen"),
)


def fetch_flows(listen: str, params: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    doc: dict[str, Any] = daemon_get(
        listen,
        "/v1/flows",
        params=params,
        timeout_s=timeout_s,
        hint="start one with `netd run` and [bpf] enabled",
    ).json()
    return doc


def _ago(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    secs = max(0.0, now - ts)
    return (
        f"{secs:.0f}s ago"
        if secs < 120
        else f"{secs / 60:.0f}m ago"
        if secs < 7200
        else f"{secs / 3600:.0f}h ago"
    )


def _cell(key: str, value: Any, now: float) -> str:
    if key == "ce_fraction":
        return f"{100 * value:.1f}"
    if key == "last_seen":
        return _ago(value, now)
    if isinstance(value, int) and key != "dest_qp":
        return f"{value:,}"
    return hex(value) if key == "dest_qp" else str(value)


def _table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[tuple[str, str]],
    now: float,
    cell: Callable[[str, Any, float], str] = _cell,
) -> list[str]:
    cells = [[cell(key, row.get(key), now) for _, key in columns] for row in rows]
    widths = [max([len(title), *(len(c[i]) for c in cells)]) for i, (title, _) in enumerate(columns)]

    def fmt(values: list[str]) -> str:
        pairs = enumerate(zip(values, widths, strict=True))
        return "  ".join(v.rjust(w) if i > 2 else v.ljust(w) for i, (v, w) in pairs).rstrip()

    return [fmt([t for t, _ in columns]), *(fmt(c) for c in cells)]


def render_flows(doc: dict[str, Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    out = [f"eBPF probes on {doc['host']} (flow table read {_ago(doc.get('scanned_at'), now)}):"]
    for p in doc["probes"]:
        out.append(f"  {p['probe']:<16} {p['state']:<9} {p['detail']}")
    sections = (
        ("Top congested flows (CE marks + CNPs)", doc["congested"]),
        ("Top victim flows (NAKs + PSN gaps + rewinds)", doc["victims"]),
    )
    for title, rows in sections:
        out += ["", f"{title}:"]
        out += _table(rows, FLOW_COLUMNS, now) if rows else ["  none"]
    if doc["sort"] not in ("congested", "victims"):
        out += ["", f"Flows by {doc['sort']} ({len(doc['flows'])} of {doc['total_flows']}):"]
        out += _table(doc["flows"], FLOW_COLUMNS, now) if doc["flows"] else ["  none"]
    tcp = doc["tcp_retransmits"]
    if tcp["total"] is not None:
        out += ["", f"TCP retransmissions: {tcp['total']:,} since the probe was loaded"]
        cols = (
            ("ADDRESS", "address"),
            ("PORT", "port"),
            ("STATE", "state"),
            ("RETRANSMITS", "retransmits"),
            ("LAST SEEN", "last_seen"),
        )
        cell = lambda k, v, t: str(v) if k == "port" else _cell(k, v, t)  # noqa: E731
        out += _table(tcp["endpoints"], cols, now, cell) if tcp["endpoints"] else ["  none"]
    return "\n".join(out) + "\n"


def _cmd_flows(args: argparse.Namespace, cfg: Config) -> int:
    params: dict[str, Any] = {"top": args.top, "sort": args.sort}
    if args.direction:
        params["direction"] = args.direction
    doc = fetch_flows(cfg.listen, params)
    print(
        json.dumps(doc, indent=2, sort_keys=True) if args.json else render_flows(doc),
        end="\n" if args.json else "",
    )
    return 0


def register(sub: argparse._SubParsersAction, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "flows",
        help="top congested and victim RoCEv2 flows, TCP retransmissions (eBPF probes of the running daemon)",
        description="Per-flow view of what netd's eBPF probes saw: RoCEv2 flows keyed by (source GID, "
        "destination GID, destination QP) with CE marks, CNPs, NAKs and PSN gaps, and TCP "
        "retransmissions per remote endpoint. Needs a running `netd run` with [bpf] enabled; RoCE "
        "packets are visible only where the kernel carries them (docs/ebpf.md).",
    )
    common(p, sysfs_root=False)
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows per list (default 10)")
    p.add_argument(
        "--sort",
        choices=("congested", "victims", "bytes", "packets", "recent"),
        default="congested",
        help="also list all flows in this order (bytes, packets, recent)",
    )
    p.add_argument("--direction", choices=("ingress", "egress"), help="only flows seen on this hook")
    p.add_argument("--json", action="store_true", help="the GET /v1/flows document")
    p.set_defaults(handler=_cmd_flows)

"""Plain-text tables of `netd qos` (one host) and `netd qos --fabric` (the audit), from their documents."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["render_fabric", "render_host"]

_COLUMNS = (
    ("DEVICE", "device"),
    ("NETDEV", "netdev"),
    ("TRUST", "trust"),
    ("DSCP->PRIO", "dscp_prio"),
    ("PFC", "pfc"),
    ("ECN", "ecn"),
    ("DCQCN", "dcqcn"),
    ("PRIO->TC", "prio_tc"),
    ("MTU", "mtu"),
    ("ROCE", "roce_mode"),
    ("GID", "gid_index"),
    ("CC", "cc_algorithm"),
)


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in (header, *rows)
    ]


def render_host(doc: dict[str, Any]) -> str:
    rows = []
    for p in doc.get("ports", []):
        s = p["settings"]
        rows.append([str(p.get(k) or s.get(k) or "-") for _, k in _COLUMNS])
    lines = [f"QoS of {doc.get('host')} ({len(rows)} ports; '-' = not readable, see below)"]
    lines += _grid([h for h, _ in _COLUMNS], rows)
    for p in doc.get("ports", []):
        for setting, why in sorted(p.get("missing", {}).items()):
            lines.append(f"  {p['device']} {setting}: {why}")
    findings = doc.get("local_findings", [])
    lines.append(f"local inconsistencies: {len(findings) or 'none'}")
    for f in findings:
        lines += [f"  {f['kind']}: {f['message']}", f"    fix: {f['fix']}"]
    if doc.get("error"):
        lines.append(f"last read failed: {doc['error']}")
    return "\n".join(lines) + "\n"


def render_fabric(doc: dict[str, Any]) -> str:
    findings = doc.get("findings", [])
    lines = [
        f"QoS audit of {doc.get('hosts', 0)} hosts / {doc.get('ports', 0)} ports from {doc.get('origin')}: "
        f"{len(findings) or 'no'} host{'s' if len(findings) != 1 else ''} differ (expected profile per "
        f"{doc.get('scope')})"
    ]
    for f in findings:
        lines.append(f"{f['host']}  (tor {f.get('tor') or '-'})")
        for d in f["differences"]:
            lines.append(
                f"  {d['netdev'] or d['device']}  {d['setting']}: {d['actual']!r}, expected {d['expected']!r}"
                f"  [{d['basis']}]"
            )
            lines.append(f"    fix: {d['fix']}")
    for note in doc.get("undecided", []):
        lines.append(f"undecided: {note}")
    if doc.get("error"):
        lines.append(f"last refresh failed: {doc['error']}")
    return "\n".join(lines) + "\n"

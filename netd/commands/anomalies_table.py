"""Text rendering of /v1/anomalies for `netd anomalies`: a table, and change lines for --watch."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

__all__ = ["ChangeTracker", "render_anomalies", "scope_label"]

_COLOUR = {"critical": "\x1b[31m", "warning": "\x1b[33m", "info": "\x1b[36m"}
_RESET = "\x1b[0m"


def scope_label(doc: Mapping[str, Any]) -> str:
    s = doc["scope"]
    where = f"{s['device']}/{s['port']}" if s.get("device") is not None else s["host"]
    if s.get("priority") is not None:
        where += f" prio {s['priority']}"
    if s.get("subject"):
        where += f" {s['subject']}"
    return where


def _clock(ts: float | None) -> str:
    return "-" if ts is None else time.strftime("%H:%M:%S", time.localtime(ts))


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"


def _rows(docs: list[dict[str, Any]], colour: bool, width: int | None, resolved: bool) -> list[str]:
    lines = []
    for d in docs:
        when = _clock(d["ended_at"] if resolved else d["started_at"])
        tail = d["resolution"] if resolved else d["explanation"]
        rest = f"{d['kind']:<21} {scope_label(d):<24} {when:<9} {_duration(d['duration_s']):>7}  {tail}"
        line = f"  {d['severity']:<8} {rest}"
        if width and len(line) > width:
            line = line[: width - 1] + "…"
        if colour:  # colour the severity only, after truncating by visible width
            sev = d["severity"]
            line = line.replace(sev, f"{_COLOUR.get(sev, '')}{sev}{_RESET}", 1)
        lines.append(line)
    return lines


def render_anomalies(doc: Mapping[str, Any], colour: bool = False, width: int | None = None) -> str:
    """The table `netd anomalies` prints: active findings, then recent resolved ones, then totals."""
    fast = doc.get("fast_interval_s") or 0
    head = f"netd anomalies — {doc['host']}, evaluated {_clock(doc.get('evaluated_at'))}"
    head += f", PFC fast path every {fast:g} s" if fast else ", PFC fast path off"
    out = [head, ""]
    active, recent = doc.get("active", []), doc.get("recent", [])
    out.append(f"ACTIVE ({len(active)})" + ("" if active else ": none — the fabric looks healthy from here"))
    if active:
        out.append(f"  {'SEVERITY':<8} {'KIND':<21} {'SCOPE':<24} {'SINCE':<9} {'FOR':>7}  EXPLANATION")
        out += _rows(active, colour, width, resolved=False)
    if recent:
        out += ["", f"RECENTLY RESOLVED ({len(recent)})"]
        out.append(f"  {'SEVERITY':<8} {'KIND':<21} {'SCOPE':<24} {'ENDED':<9} {'LASTED':>7}  RESOLUTION")
        out += _rows(recent, colour, width, resolved=True)
    totals = [t for t in doc.get("totals", []) if t["count"]]
    if totals:
        by_kind: dict[str, list[str]] = {}
        for t in totals:
            by_kind.setdefault(t["kind"], []).append(f"{t['count']} {t['severity']}")
        out += ["", "SINCE START  " + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(by_kind.items()))]
    return "\n".join(out) + "\n"


class ChangeTracker:
    """For `--watch` without a terminal: one line per finding that opened, changed severity or resolved."""

    def __init__(self) -> None:
        self._seen: dict[str, str] | None = None  # id -> severity of the active findings last time

    def lines(self, doc: Mapping[str, Any]) -> list[str]:
        active = {d["id"]: d for d in doc.get("active", [])}
        recent = {d["id"]: d for d in doc.get("recent", [])}
        now = _clock(doc.get("evaluated_at"))
        out = []
        first = self._seen is None
        seen = self._seen or {}
        for fid, d in active.items():
            if fid not in seen:
                verb = "ACTIVE" if first else "OPENED"
                out.append(
                    f"{now} {verb:<9} {d['severity']:<8} {d['kind']} {scope_label(d)}: {d['explanation']}"
                )
            elif seen[fid] != d["severity"]:
                out.append(
                    f"{now} {'SEVERITY':<9} {d['severity']:<8} {d['kind']} {scope_label(d)} (was {seen[fid]})"
                )
        for fid in seen:
            if fid not in active:
                d = recent.get(fid)
                what = (
                    f"{d['kind']} {scope_label(d)} after {_duration(d['duration_s'])}: {d['resolution']}"
                    if d
                    else fid
                )
                out.append(f"{now} {'RESOLVED':<9} {'':<8} {what}")
        self._seen = {fid: d["severity"] for fid, d in active.items()}
        return out

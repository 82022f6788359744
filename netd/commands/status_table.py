"""`netd status` rendering: the status JSON document → one terminal table.

Pure: takes the same document that `netd status --json` prints (and that the
daemon serves at ``/v1/ports``), returns text. Colour marks values past the
thresholds below; it is only a hint — the numbers are always printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["THRESHOLDS", "render_status", "si"]

# (warn, alert) thresholds for colouring, per column.
THRESHOLDS: Mapping[str, tuple[float, float]] = {
    "ecn": (1.0, 1e5),  # CE marks/s: any means a queue crossed Kmin; 100k/s is heavy marking
    "pause": (0.01, 0.10),  # fraction of the second a priority was paused
    "errors": (0.0, 10.0),  # loss/error events/s in a lossless fabric: any is worth a look
    "retx": (0.0, 100.0),
}

_RESET = "\x1b[0m"
_YELLOW = "\x1b[33m"
_RED = "\x1b[31;1m"

COLUMNS = (
    "PORT",
    "NETDEV",
    "LINK",
    "RX Gb/s",
    "TX Gb/s",
    "ECN/s",
    "CNP tx/s",
    "CNP rx/s",
    "PFC rx/s",
    "PAUSE %",
    "RETX/s",
    "ERR/s",
)


def si(value: float | None) -> str:
    """Compact number: 0, 12, 3.4, 1.2k, 5.6M, 7.8G; '-' for absent."""
    if value is None:
        return "-"
    a = abs(value)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{value / div:.1f}{suffix}"
    if a == 0:
        return "0"
    return f"{value:.1f}" if a < 10 and value != int(value) else f"{value:.0f}"


def _level(value: float | None, key: str) -> int:
    if value is None:
        return 0
    warn, alert = THRESHOLDS[key]
    return 2 if value > alert else 1 if value > warn else 0


def _pfc_cells(pfc: Sequence[Mapping[str, Any]]) -> tuple[str, str, int]:
    if not pfc:
        return "-", "-", 0
    pauses = " ".join(f"p{e['priority']}:{si(e.get('rx_pauses_per_s'))}" for e in pfc)
    fractions = [(e["priority"], e.get("rx_pause_fraction")) for e in pfc]
    pct = " ".join(f"p{p}:{'-' if f is None else f'{100 * f:.1f}'}" for p, f in fractions)
    worst = max((_level(f, "pause") for _, f in fractions), default=0)
    return pauses, pct, worst


def _row(port: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    s: Mapping[str, Any] = port.get("signals") or {}
    gbps = lambda k: None if s.get(k) is None else f"{s[k]:.1f}"  # noqa: E731
    pauses, pct, pause_level = _pfc_cells(s.get("pfc") or [])
    state = port.get("state") or "?"
    cells = [
        f"{port['device']}/{port['port']}",
        port.get("netdev") or "-",
        state,
        gbps("rx_gbps") or "-",
        gbps("tx_gbps") or "-",
        si(s.get("ecn_marked_per_s")),
        si(s.get("cnp_sent_per_s")),
        si(s.get("cnp_handled_per_s")),
        pauses,
        pct,
        si(s.get("retransmits_per_s")),
        si(s.get("errors_per_s")),
    ]
    levels = [0] * len(cells)
    levels[2] = 0 if state == "ACTIVE" else 2
    levels[5] = _level(s.get("ecn_marked_per_s"), "ecn")
    levels[8] = levels[9] = pause_level
    levels[10] = _level(s.get("retransmits_per_s"), "retx")
    levels[11] = _level(s.get("errors_per_s"), "errors")
    if port.get("saturated"):
        cells[11] += " SAT"
        levels[11] = 2
    return cells, levels


def render_status(doc: Mapping[str, Any], colour: bool = False) -> str:
    """The table for a status document, with a one-line header saying where the data came from."""
    head = f"host {doc.get('host', '?')}"
    if doc.get("emulated"):
        head += "  [EMULATED FABRIC: synthetic counters from netd's DCQCN model, not hardware]"
    interval = doc.get("interval_s")
    head += f"  rates over {interval:.1f}s" if interval else "  (first sample: no rates yet)"
    out = [head]
    rows = [_row(p) for p in doc.get("ports") or []]
    if not rows:
        out.append("no RDMA ports found")
    else:
        widths = [max(len(c), *(len(r[0][i]) for r in rows)) for i, c in enumerate(COLUMNS)]
        out.append("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)).rstrip())
    for cells, levels in rows:
        parts = []
        for cell, lvl, w in zip(cells, levels, widths, strict=True):
            text = cell.ljust(w)
            if colour and lvl:
                text = f"{_RED if lvl == 2 else _YELLOW}{text}{_RESET}"
            parts.append(text)
        out.append("  ".join(parts).rstrip())
    failing = [s for s in doc.get("sources") or [] if not s.get("ok")]
    for s in failing:
        out.append(f"source {s['source']} failed: {s.get('error')}")
    return "\n".join(out) + "\n"

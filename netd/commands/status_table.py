"""`netd status` rendering: the status JSON document → one terminal table.

Pure: takes the same document that `netd status --json` prints (and that the daemon serves at
``/v1/ports``), returns text. Two layouts:

* the default fits 80 columns: utilisation as % of line rate, then per second ECN-marked packets (ECN),
  CNPs sent as notification point (CNPtx) and handled as reaction point (CNPrx), PFC pause frames
  received and **sent** summed over the priorities (PFCrx, PFCtx), the largest share of the second a
  priority was paused or pausing (PAUSE%), retransmits (RETX) and loss/error events (ERR);
* ``wide`` adds the netdev, the link speed, Gb/s, the CE fraction, and per PFC priority the pause
  frames received/sent and the share paused/pausing — pause *sent* marks the port that is the source of
  a storm, pause received its victims.

A TOTAL row sums the rates of the ports shown. Colour marks values past :data:`THRESHOLDS`; it is
only a hint — the numbers are always printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["THRESHOLDS", "render_status", "select_ports", "si"]

# (warn, alert) thresholds for colouring, per kind of column.
THRESHOLDS: Mapping[str, tuple[float, float]] = {
    "ecn": (1.0, 1e5),  # CE marks/s: any means a queue crossed Kmin; 100k/s is heavy marking
    "pause": (0.01, 0.10),  # fraction of the second a priority was paused
    "errors": (0.0, 10.0),  # loss/error events/s in a lossless fabric: any is worth a look
    "retx": (0.0, 100.0),
    "util": (0.8, 0.95),  # share of line rate
}

_RESET = "\x1b[0m"
_YELLOW = "\x1b[33m"
_RED = "\x1b[31;1m"

Port = Mapping[str, Any]
Cell = tuple[str, int]  # text, colour level (0 none, 1 warn, 2 alert)


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


def _pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{100 * fraction:.1f}"


def _level(value: float | None, key: str) -> int:
    if value is None:
        return 0
    warn, alert = THRESHOLDS[key]
    return 2 if value > alert else 1 if value > warn else 0


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _max(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _signals(port: Port) -> Mapping[str, Any]:
    return port.get("signals") or {}


def _util(port: Port, key: str) -> float | None:
    gbps, speed = _signals(port).get(key), port.get("rate_gbps")
    return None if gbps is None or not speed else gbps / speed


def _pfc(port: Port, field: str) -> list[float | None]:
    return [e.get(field) for e in _signals(port).get("pfc") or []]


def _rate(key: str, kind: str | None = None) -> Callable[[Port], Cell]:
    def cell(port: Port) -> Cell:
        value = _signals(port).get(key)
        return si(value), _level(value, kind) if kind else 0

    return cell


def _gbps(key: str) -> Callable[[Port], Cell]:
    def cell(port: Port) -> Cell:
        value = _signals(port).get(key)
        return ("-" if value is None else f"{value:.1f}"), 0

    return cell


def _utilisation(key: str) -> Callable[[Port], Cell]:
    def cell(port: Port) -> Cell:
        u = _util(port, key)
        return _pct(u), _level(u, "util")

    return cell


def _link(port: Port) -> Cell:
    state = port.get("state") or "?"
    return ("up" if state == "ACTIVE" else state), 0 if state == "ACTIVE" else 2


def _errors(port: Port) -> Cell:
    value = _signals(port).get("errors_per_s")
    if port.get("saturated"):
        return si(value) + " SAT", 2
    return si(value), _level(value, "errors")


def _pause_frames(field: str) -> Callable[[Port], Cell]:
    return lambda port: (si(_sum(_pfc(port, field))), 0)


def _paused(port: Port) -> Cell:
    worst = _max(_pfc(port, "rx_pause_fraction") + _pfc(port, "tx_pause_fraction"))
    return _pct(worst), _level(worst, "pause")


def _priority(priority: int, field: str, fraction: bool) -> Callable[[Port], Cell]:
    def cell(port: Port) -> Cell:
        for e in _signals(port).get("pfc") or []:
            if e.get("priority") == priority:
                value = e.get(field)
                return (_pct(value), _level(value, "pause")) if fraction else (si(value), 0)
        return "-", 0

    return cell


COMPACT: tuple[tuple[str, Callable[[Port], Cell]], ...] = (
    ("PORT", lambda p: (f"{p['device']}/{p['port']}", 0)),
    ("LINK", _link),
    ("RX%", _utilisation("rx_gbps")),
    ("TX%", _utilisation("tx_gbps")),
    ("ECN", _rate("ecn_marked_per_s", "ecn")),
    ("CNPtx", _rate("cnp_sent_per_s")),
    ("CNPrx", _rate("cnp_handled_per_s")),
    ("PFCrx", _pause_frames("rx_pauses_per_s")),
    ("PFCtx", _pause_frames("tx_pauses_per_s")),
    ("PAUSE%", _paused),
    ("RETX", _rate("retransmits_per_s", "retx")),
    ("ERR", _errors),
)


def _wide(priorities: Sequence[int]) -> tuple[tuple[str, Callable[[Port], Cell]], ...]:
    cols: list[tuple[str, Callable[[Port], Cell]]] = [
        ("PORT", COMPACT[0][1]),
        ("NETDEV", lambda p: (p.get("netdev") or "-", 0)),
        ("LINK", _link),
        ("SPEED", lambda p: ("-" if not p.get("rate_gbps") else f"{p['rate_gbps']:g}G", 0)),
        ("RX Gb/s", _gbps("rx_gbps")),
        ("TX Gb/s", _gbps("tx_gbps")),
        ("RX%", _utilisation("rx_gbps")),
        ("TX%", _utilisation("tx_gbps")),
        ("ECN/s", _rate("ecn_marked_per_s", "ecn")),
        ("CE%", lambda p: (_pct(_signals(p).get("ce_fraction")), 0)),
        ("CNP tx/s", _rate("cnp_sent_per_s")),
        ("CNP rx/s", _rate("cnp_handled_per_s")),
    ]
    for prio in priorities:
        cols += [
            (f"p{prio} rx/s", _priority(prio, "rx_pauses_per_s", False)),
            (f"p{prio} tx/s", _priority(prio, "tx_pauses_per_s", False)),
            (f"p{prio} rx%", _priority(prio, "rx_pause_fraction", True)),
            (f"p{prio} tx%", _priority(prio, "tx_pause_fraction", True)),
        ]
    return (*cols, ("RETX/s", _rate("retransmits_per_s", "retx")), ("ERR/s", _errors))


def _total(ports: Sequence[Port]) -> Port:
    """A pseudo-port whose rates are the sums over ``ports`` (so the same cells render it)."""
    keys = (
        "rx_gbps",
        "tx_gbps",
        "ecn_marked_per_s",
        "cnp_sent_per_s",
        "cnp_handled_per_s",
        "retransmits_per_s",
        "errors_per_s",
    )
    signals: dict[str, Any] = {k: _sum([_signals(p).get(k) for p in ports]) for k in keys}
    by_prio: dict[int, dict[str, Any]] = {}
    for p in ports:
        for e in _signals(p).get("pfc") or []:
            agg = by_prio.setdefault(e["priority"], {"priority": e["priority"]})
            for f in ("rx_pauses_per_s", "tx_pauses_per_s"):
                agg[f] = _sum([agg.get(f), e.get(f)])
    signals["pfc"] = list(by_prio.values())
    return {"device": "TOTAL", "port": "", "state": "ACTIVE", "signals": signals, "total": True}


# Columns of the TOTAL row that are not sums (percentages are left blank too: they do not add up).
_TOTAL_CELLS: Mapping[str, Cell] = {
    "PORT": ("TOTAL", 0),
    "NETDEV": ("", 0),
    "LINK": ("", 0),
    "SPEED": ("", 0),
}


def select_ports(
    doc: Mapping[str, Any], devices: Sequence[str] = (), ports: Sequence[int] = ()
) -> list[Port]:
    """The document's ports, only those of ``devices`` and ``ports`` when given (``mlx5_0``, ``1``)."""
    return [
        p
        for p in doc.get("ports") or []
        if (not devices or p.get("device") in devices or p.get("netdev") in devices)
        and (not ports or p.get("port") in ports)
    ]


def render_status(
    doc: Mapping[str, Any],
    colour: bool = False,
    *,
    wide: bool = False,
    ports: Sequence[Port] | None = None,
) -> str:
    """The table for a status document, with a one-line header saying where the data came from."""
    head = f"host {doc.get('host', '?')}"
    if doc.get("emulated"):
        head += "  [EMULATED FABRIC: synthetic counters, not hardware]"
    interval = doc.get("interval_s")
    head += f"  per-second rates over {interval:.1f}s" if interval else "  (first sample: no rates yet)"
    out = [head]
    shown = list(doc.get("ports") or []) if ports is None else list(ports)
    if not shown:
        out.append("no RDMA ports found" if not doc.get("ports") else "no port matches the filter")
    else:
        prios = sorted({e["priority"] for p in shown for e in _signals(p).get("pfc") or []})
        columns = _wide(prios) if wide else COMPACT
        rows = [[fn(p) for _, fn in columns] for p in shown]
        if len(shown) > 1:
            total = _total(shown)
            rows.append(
                [
                    _TOTAL_CELLS.get(n, ("", 0)) if n in _TOTAL_CELLS or n.endswith("%") else fn(total)
                    for n, fn in columns
                ]
            )
        widths = [max(len(name), *(len(r[i][0]) for r in rows)) for i, (name, _) in enumerate(columns)]
        gap = " " if not wide else "  "
        out.append(gap.join(n.ljust(w) for (n, _), w in zip(columns, widths, strict=True)).rstrip())
        for row in rows:
            parts = []
            for (text, lvl), w in zip(row, widths, strict=True):
                cell = text.ljust(w)
                parts.append(f"{_RED if lvl == 2 else _YELLOW}{cell}{_RESET}" if colour and lvl else cell)
            out.append(gap.join(parts).rstrip())
    for s in doc.get("sources") or []:
        if not s.get("ok"):
            out.append(f"source {s['source']} failed: {s.get('error')}")
    return "\n".join(out) + "\n"

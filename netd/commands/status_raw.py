"""`netd status --raw`: every counter of every port, as read, with its rate — what `ethtool -S` and
`rdma statistic` users expect, filtered with ``--nonzero`` and ``--grep``. Pure: document in, text out."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from netd.commands.status_table import si

__all__ = ["render_raw"]


def _lines(
    group: str, counters: Mapping[str, Mapping[str, Any]], nonzero: bool, grep: re.Pattern[str] | None
) -> Iterator[str]:
    for raw in sorted(counters):
        c = counters[raw]
        name = c.get("name") or raw
        if grep is not None and not (grep.search(raw) or grep.search(name)):
            continue
        value, rate = c.get("value"), c.get("rate")
        if nonzero and not value and not rate:
            continue
        alias = f" ({name})" if name != raw else ""
        yield f"  {group:<8} {raw + alias:<52} {value!s:>20} {si(rate):>8}/s"


def render_raw(ports: Sequence[Mapping[str, Any]], *, nonzero: bool = False, grep: str | None = None) -> str:
    """One block per port: its RDMA counters (raw file name, netd's name, value, rate) and its
    netdev's ethtool statistics. ``grep`` is a regular expression on either name."""
    pattern = re.compile(grep) if grep else None
    out = []
    for p in ports:
        out.append(f"{p['device']}/{p['port']}  netdev {p.get('netdev') or '-'}  {p.get('state') or '?'}")
        lines = list(_lines("rdma", p.get("counters") or {}, nonzero, pattern))
        lines += _lines("ethtool", p.get("ethtool") or {}, nonzero, pattern)
        out += lines or ["  (no counter matches)"]
    return "\n".join(out) + "\n"

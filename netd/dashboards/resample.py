"""Re-sample promtool unit tests to a longer scrape interval: the same signal, fewer samples.

The committed tests in ``dashboards/rules/tests`` describe each incident as series sampled every 15 s
(promtool's expanding notation, ``a+bxn``). Prometheus' default scrape interval is 60 s; the rules
must hold there too. :func:`resample` keeps every k-th sample of each series (k = new interval / old),
so a counter keeps its slope and a step keeps its time.

promtool's samples sit exactly on the evaluation grid, which a real server never sees: scrapes and
rule evaluations run on independent timers. Aligned, a ``[1m]`` range over 60 s samples holds two
of them (both ends of the range) and looks fine; one second later it holds one and is empty. So the
rules keep evaluating every 15 s (between the samples) and every check moves ``offset`` past a
sample (half the interval by default). Expected values and alerts stay as written: a rule whose
window is too short for the new interval comes out empty, or flaps and never outlasts its ``for:``,
and its test fails. Off the grid, ``rate()`` extrapolates by ratios such as 240/180 and its result
differs from the written value in the last bits; promtool 2.42 compares exactly, so re-sampled
expression checks compare values rounded to 9 decimals (``round`` drops the metric name, and so
does the expected series).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["expand", "resample", "seconds"]

_TOKEN = re.compile(r"^(?P<start>_|[-+]?[0-9.e]+)(?:(?P<sign>[-+])(?P<step>[0-9.e]+))?(?:x(?P<n>\d+))?$")


def seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def expand(values: str) -> list[float | None]:
    """promtool's notation to one value (None: missing) per sample: ``a+bxn`` is n+1 samples."""
    out: list[float | None] = []
    for tok in str(values).split():
        m = _TOKEN.match(tok)
        if m is None:
            raise ValueError(f"unsupported series notation {tok!r}")
        n = int(m["n"]) if m["n"] is not None else None
        if m["start"] == "_":
            out += [None] * (n if n is not None else 1)
            continue
        start = float(m["start"])
        if n is None:
            out.append(start)
            continue
        step = float(m["step"] or 0) * (-1 if m["sign"] == "-" else 1)
        # "axn" repeats a n+1 times; "a+bxn" is a, a+b, ..., a+n*b
        out += [start + i * step for i in range(n + 1)]
    return out


def _fmt(v: float | None) -> str:
    return "_" if v is None else repr(v).removesuffix(".0")


def _later(duration: str, by: int) -> str:
    return f"{seconds(duration) + by}s"


def _rounded(check: dict[str, Any]) -> dict[str, Any]:
    samples = [
        dict(e, labels="{" + e["labels"].partition("{")[2] if "{" in e["labels"] else "{}")
        for e in check.get("exp_samples") or []
    ]
    return dict(check, expr=f"round(({check['expr']}) * 1e9) / 1e9", exp_samples=samples)


def resample(doc: dict[str, Any], interval: str, offset: str = "") -> dict[str, Any]:
    """A copy of a promtool test file with every group's series re-sampled to ``interval``, and every
    check (``eval_time``) ``offset`` later (default: half the interval). A group already sampled at
    ``interval`` or more coarsely keeps its samples (only its checks move)."""
    new = seconds(interval)
    shift = seconds(offset) if offset else new // 2
    out = dict(doc)
    groups = []
    for group in doc["tests"]:
        old = seconds(group.get("interval", doc.get("evaluation_interval", "1m")))
        if new > old and new % old:
            raise ValueError(f"{interval} is not a multiple of the group's interval {old}s")
        k = max(1, new // old)
        g = dict(group, interval=f"{max(new, old)}s")
        g["input_series"] = [
            dict(s, values=" ".join(_fmt(v) for v in expand(s["values"])[::k])) for s in group["input_series"]
        ]
        if "alert_rule_test" in group:
            g["alert_rule_test"] = [
                dict(t, eval_time=_later(t["eval_time"], shift)) for t in group["alert_rule_test"]
            ]
        if "promql_expr_test" in group:
            g["promql_expr_test"] = [
                _rounded(dict(t, eval_time=_later(t["eval_time"], shift))) for t in group["promql_expr_test"]
            ]
        groups.append(g)
    out["tests"] = groups
    return out

"""`netd bench rules`: do the recording rules and alerts hold at every scrape interval?

For each scrape interval and each rate window, the promtool unit tests of ``dashboards/rules/tests``
are re-sampled to that interval (:mod:`netd.dashboards.resample`: fewer samples, checks off the
sample grid) and run by ``promtool test rules`` against the rules netd generates, with every range
of the recording rules set to that window. The figures are what failed: recording rules whose
value was missing or wrong, and alerts that did not fire (or fired) where their test says. The
window netd ships must fail nothing at any interval; a shorter one shows why it is not shipped.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from netd.config.settings import Config
from netd.dashboards import ALERT_RULES_FILE, RECORDING_RULES_FILE, artifacts
from netd.dashboards.alerts import alerts
from netd.dashboards.recording import WINDOW, recording_rules
from netd.dashboards.resample import resample
from netd.errors import BenchError

__all__ = ["Verdict", "bench_rules", "promtool_verdict", "register_bench"]

DEFAULT_TESTS = Path(__file__).resolve().parents[2] / "dashboards" / "rules" / "tests"


@dataclass(frozen=True)
class Verdict:
    """promtool's answer for one scrape interval and window."""

    ok: bool
    failed_alerts: frozenset[str]  # alert names with a check that did not hold
    failed_records: frozenset[str]  # recording rules with a value check that did not hold
    output: str


def promtool_verdict(tests: list[Path], interval: str, window: str, workdir: Path, promtool: str) -> Verdict:
    """Run ``tests`` re-sampled to ``interval`` against netd's rules with every range set to ``window``."""
    files = artifacts()
    rules = {}
    for rel in (RECORDING_RULES_FILE, ALERT_RULES_FILE):
        path = workdir / Path(rel).name
        path.write_text(
            files[rel].replace(f"[{WINDOW}]", f"[{window}]") if rel == RECORDING_RULES_FILE else files[rel]
        )
        rules[path.name] = path
    runs = []
    for f in tests:
        doc = resample(yaml.safe_load(f.read_text()), interval)
        doc["rule_files"] = [str(rules[Path(r).name]) for r in doc["rule_files"]]
        path = workdir / f"{f.stem}.{interval}.{window}.yml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False, width=1_000_000))
        runs.append(str(path))
    r = subprocess.run([promtool, "test", "rules", *runs], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    return Verdict(
        ok=r.returncode == 0,
        failed_alerts=frozenset(re.findall(r"alertname: (\w+), time", out)),
        failed_records=frozenset(re.findall(r'expr: "round\(\((\S+)\) \* 1e9\) / 1e9", time', out)),
        output=out,
    )


def bench_rules(
    intervals: tuple[int, ...] = (15, 30, 60),
    windows: tuple[str, ...] = ("1m", "2m", WINDOW),
    tests_dir: Path = DEFAULT_TESTS,
) -> dict[str, Any]:
    promtool = shutil.which("promtool")
    if promtool is None:
        raise BenchError("promtool is not installed (Debian: apt-get install prometheus)")
    tests = sorted(tests_dir.glob("*.test.yml"))
    if not tests:
        raise BenchError(f"no promtool tests (*.test.yml) in {tests_dir}; pass --tests DIR")
    rows = []
    with tempfile.TemporaryDirectory(prefix="netd-bench-rules-") as tmp:
        for window in windows:
            for interval in intervals:
                work = Path(tmp) / f"{window}-{interval}"
                work.mkdir()
                started = time.monotonic()
                v = promtool_verdict(tests, f"{interval}s", window, work, promtool)
                rows.append(
                    {
                        "window": window,
                        "scrape_interval_s": interval,
                        "ok": v.ok,
                        "recording_rules_failing": len(v.failed_records),
                        "alerts_failing": sorted(v.failed_alerts),
                        "promtool_s": round(time.monotonic() - started, 2),
                    }
                )
    shipped = [r for r in rows if r["window"] == WINDOW]
    return {
        "shipped_window": WINDOW,
        "recording_rules": len(recording_rules()),
        "alerts": len(alerts()),
        "rows": rows,
        "shipped_ok_at_every_interval": all(r["ok"] for r in shipped),
    }


def _cmd(args: argparse.Namespace, cfg: Config | None) -> int:
    try:
        intervals = tuple(int(x.strip().removesuffix("s")) for x in args.intervals.split(","))
    except ValueError:
        raise BenchError(
            f"--intervals {args.intervals!r}: seconds separated by commas, e.g. 15,30,60"
        ) from None
    if any(i <= 0 or i % 15 for i in intervals):
        raise BenchError(
            "--intervals must be multiples of 15 s: the tests are written at 15 s and only re-sampled coarser"
        )
    doc = bench_rules(intervals=intervals, tests_dir=args.tests)
    print(json.dumps(doc, indent=2))
    return 0 if doc["shipped_ok_at_every_interval"] else 1


def register_bench(sub: Any) -> None:
    p = sub.add_parser(
        "rules",
        help="recording rules and alerts at each scrape interval (promtool tests re-sampled)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--intervals",
        default="15,30,60",
        metavar="S,S,...",
        help="scrape intervals in seconds, multiples of 15 (default 15,30,60)",
    )
    p.add_argument(
        "--tests",
        type=Path,
        default=DEFAULT_TESTS,
        metavar="DIR",
        help="the promtool unit tests (default: the repository's dashboards/rules/tests)",
    )
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd, needs_config=False)

"""Running the open-loop load generator (netd.bench.load) as a process and summarising its answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from netd.errors import BenchError

__all__ = ["percentile", "run_load", "start_load", "summarize"]


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile in ms, rounded to the microsecond; None without values."""
    return round(float(np.percentile(values, q)), 3) if values else None


def start_load(
    url: str, rate: float, seconds: float, body: Path | None, connections: int = 8, warmup: int = 0
) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "netd.bench.load", url, "--rate", str(rate), "--seconds", str(seconds)]
    cmd += ["--connections", str(connections), "--warmup", str(warmup)]
    if body is not None:
        cmd += ["--body", str(body)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def summarize(proc: subprocess.Popen[str], seconds: float) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=seconds + 120)
    if proc.returncode != 0:
        raise BenchError(f"load generator failed with exit status {proc.returncode}")
    doc = json.loads(out)
    lat = doc["latencies_ms"]
    return {
        "rps": round(len(lat) / doc["elapsed_s"], 1),
        "p50_ms": percentile(lat, 50),
        "p99_ms": percentile(lat, 99),
        "max_ms": percentile(lat, 100),
        "errors": doc["errors"],
        "answered": len(lat),
        "warmup_max_ms": percentile(doc["warmup_ms"], 100),  # None without a warm-up
    }


def run_load(
    url: str, rate: float, seconds: float, body: Path | None, connections: int = 8, warmup: int = 0
) -> dict[str, Any]:
    return summarize(start_load(url, rate, seconds, body, connections, warmup), seconds)

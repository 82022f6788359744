"""``netd bench nccl``: build and run nccl_plugin's benchmark (bench/bench.c), return its JSON.

The measurement itself is C: a Python loop would measure Python. See nccl_plugin/bench/bench.c
for the workload and docs/benchmarks.md for figures.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from netd.errors import BenchError

__all__ = ["bench_nccl", "plugin_dir"]


def plugin_dir() -> Path:
    here = Path(__file__).resolve().parents[2] / "nccl_plugin"
    if not (here / "Makefile").exists():
        raise BenchError(f"no nccl_plugin/ source tree next to netd ({here}): run from a netd checkout")
    return here


def bench_nccl(calls: int = 10_000_000, repeat: int = 5) -> dict[str, Any]:
    if calls < 1 or not 1 <= repeat <= 50:
        raise BenchError("--calls must be >= 1 and --repeat 1..50")
    src = plugin_dir()
    targets = ["build/bench", "build/libnccl-tuner-netd.so", "build/libnccl-tuner-noop.so"]
    built = subprocess.run(["make", "-s", "-C", str(src), *targets], capture_output=True, text=True)
    if built.returncode != 0:
        raise BenchError(f"building the plugin benchmark failed:\n{built.stdout}{built.stderr}")
    run = subprocess.run(
        [str(src / t) for t in targets] + [str(calls), str(repeat)], capture_output=True, text=True
    )
    if run.returncode != 0:
        raise BenchError(f"the plugin benchmark failed: {run.stderr.strip()}")
    result: dict[str, Any] = json.loads(run.stdout)
    return result

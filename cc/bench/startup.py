"""What the compiled step kernel costs a process that starts (``sim_speed.kernel_startup`` of
``python -m cc.bench --json``), and :func:`warm_cache`, which pays the compiling once per host.

Each figure comes from a fresh interpreter (a child process), because imports and numba's compiled
code are per process: the time to import numba and the simulator, the first short run with an empty
numba cache (every kernel compiled: what the first start on a host pays) and with the cache that run
left (what every later start pays), and the peak RSS of the process after that run against one that
imports only numpy and the numpy DCQCN rules (current and peak RSS from ``/proc/self/status``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cc.model import DcqcnParams
from cc.sim import Engine, FlowSpec, SimConfig, incast, run_metrics, single_bottleneck

__all__ = ["kernel_startup", "warm_cache"]

# ru_maxrss survives fork and exec (a child starts with its parent's peak): read the kernel's own
# figures for this process instead
_RSS = """
def rss_mb():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024
"""

_BASELINE = (
    _RSS
    + """
import json, time
t0 = time.perf_counter()
import numpy, cc.model
print(json.dumps({"import_s": time.perf_counter() - t0, "rss_mb": rss_mb()}))
"""
)

_RUN = (
    _RSS
    + """
import json, time
t0 = time.perf_counter()
import numba
t1 = time.perf_counter()
import cc.sim
t2 = time.perf_counter()
from cc.bench.startup import warm_cache
t2b = time.perf_counter()
engine = warm_cache()
t3 = time.perf_counter()
print(json.dumps({"import_numba_s": t1 - t0, "import_sim_s": t2 - t1, "first_run_s": t3 - t2b,
                  "paused": bool(engine.recorder.pause_us_always.any()),
                  "rss_mb": rss_mb()}))
"""
)


def warm_cache() -> Engine:
    """Run every compiled kernel in each of its argument-type variants (paused keys or none, NIC
    ports shared or not, step by step and in the compiled loop), so that numba's cache holds them
    all: `.ci/setup-host` calls it, and a daemon or test started afterwards on the host loads the
    machine code instead of compiling.
    An 8:1 incast, long enough for marks, CNPs and PFC pauses, and from 150 µs on a second flow
    from one sender (ports shared from then on)."""
    flows = [*incast(0, list(range(1, 9)), 2e6, 0.0), FlowSpec(1, 0, 150.0, size_bytes=2e6)]
    paused = DcqcnParams(xoff_bytes=60_000, xon_bytes=40_000)
    engine = Engine(single_bottleneck(9), flows, [DcqcnParams(), paused], SimConfig(dt_us=1.0))
    engine.run(300.0)
    run_metrics(engine)
    return engine


def _child(code: str, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def kernel_startup() -> dict[str, Any]:
    """Import, compile and load times (s) and peak RSS (MB) of fresh processes."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="cc-bench-numba-") as cache:
        env["NUMBA_CACHE_DIR"] = cache
        compiling = _child(_RUN, env)
        cached = _child(_RUN, env)
    baseline = _child(_BASELINE, env)
    return {
        "import_numba_s": round(cached["import_numba_s"], 3),
        "import_sim_s": round(cached["import_sim_s"], 3),
        "first_run_s_compiling": round(compiling["first_run_s"], 3),
        "first_run_s_cached": round(cached["first_run_s"], 3),
        "pfc_paths_compiled": compiling["paused"],
        # [now, peak] of each process, MB
        "rss_mb_numpy_rules_only": [round(x, 1) for x in baseline["rss_mb"]],
        "rss_mb_after_compiling": [round(x, 1) for x in compiling["rss_mb"]],
        "rss_mb_after_cached_run": [round(x, 1) for x in cached["rss_mb"]],
    }

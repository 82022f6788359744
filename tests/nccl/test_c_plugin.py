"""The C side's own tests (`make -C nccl_plugin test`: ASan+UBSan, valgrind) and the benchmark command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.nccl.plugin_harness import PLUGIN_DIR, ROOT

pytestmark = pytest.mark.slow  # builds and runs the C plugin


@pytest.mark.slow
def test_make_test_passes_under_sanitizers_and_valgrind():
    done = subprocess.run(
        ["make", "-s", "-C", str(PLUGIN_DIR), "test"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("test_unit: ") == 2 and done.stdout.count("test_dlopen: ") == 2  # ASan, valgrind
    assert " 0 failed" in done.stdout and "FAILED" not in done.stdout
    exports = " ".join(f"ncclTunerPlugin_v{v}" for v in (2, 3, 4, 5, 6))
    assert f"check-symbols: exports {exports}" in done.stdout


def test_bench_command_prints_both_figures():
    done = subprocess.run(
        [sys.executable, "-m", "netd", "bench", "nccl", "--calls", "200000", "--repeat", "1", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["calls"] == 200_000 and result["repeat"] == 1
    assert result["ns_per_getcollinfo"] > 0 and result["ns_per_getcollinfo_noop"] > 0
    assert 0 < result["hinted_launch_fraction"] < 1  # the workload mixes hinted and unhinted launches
    assert len(result["netd_ns_rounds"]) == len(result["noop_ns_rounds"]) == 1


def test_bench_rejects_nonsense():
    done = subprocess.run(
        [sys.executable, "-m", "netd", "bench", "nccl", "--calls", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--calls must be >= 1" in done.stderr

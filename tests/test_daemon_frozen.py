"""A `netd run` process frozen and thawed (SIGSTOP, SIGCONT): what a host does to it under a live
migration, a cgroup freeze or a debugger. The counters it reads move on meanwhile. After the thaw the
daemon must answer at once, count the ticks it missed instead of bunching them, take its fast-path
samples again, keep its totals monotonic, and open no finding from the long interval."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from netd.bench.static_tree import StaticHost
from tests.processes import Child, stop, wait_ready

FROZEN_S = 6.0


def _value(body: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M)
    assert m is not None, name
    return float(m.group(1))


def _metrics(url: str) -> str:
    return httpx.get(url + "/metrics", timeout=10).text


@pytest.fixture
def moving_host(tmp_path: Path) -> Iterator[Path]:
    """A replayed 2-NIC host whose counters move once a second, as the kernel's would."""
    root = tmp_path / "sys"
    host = StaticHost(root, nics=2)
    done = threading.Event()

    def advance() -> None:
        while not done.wait(1.0):
            host.advance(1.0)

    writer = threading.Thread(target=advance, name="frozen-writer", daemon=True)
    writer.start()
    try:
        yield root
    finally:
        done.set()
        writer.join(5)
        host.close()


@pytest.mark.slow  # runs `netd run` as a process for ~20 s
def test_a_frozen_daemon_thaws_without_bunched_ticks_or_findings(moving_host: Path, free_port: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETD_")}
    env["NETD_CONFIG"] = os.devnull  # the defaults: 1 s ticks, the adaptive fast path
    cmd = [sys.executable, "-m", "netd", "run", "--sysfs-root", str(moving_host)]
    proc = Child([*cmd, "--listen", f"127.0.0.1:{free_port}"], env=env)
    url = f"http://127.0.0.1:{free_port}"
    try:
        wait_ready(url, proc, timeout_s=90)
        time.sleep(3)
        before = _metrics(url)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(FROZEN_S)
        proc.send_signal(signal.SIGCONT)
        thawed = time.monotonic()
        assert httpx.get(url + "/readyz", timeout=5).status_code == 200  # its last tick is fresh enough
        assert time.monotonic() - thawed < 3
        time.sleep(1.5)  # the tick due at once, then the fast path's samples until the next
        first = _metrics(url)
        time.sleep(3)
        after = _metrics(url)
        anomalies = httpx.get(url + "/v1/anomalies", timeout=10).json()
    finally:
        stop(proc)
    stderr = proc.stderr_text()
    assert "Traceback" not in stderr, stderr

    skipped = _value(first, "netd_ticks_skipped_total") - _value(before, "netd_ticks_skipped_total")
    assert FROZEN_S - 2 <= skipped <= FROZEN_S + 1, skipped  # counted once each, not run late in a burst
    ticks = _value(after, "netd_ticks_total") - _value(first, "netd_ticks_total")
    passed = _value(after, "netd_tick_slots_passed_total") - _value(first, "netd_tick_slots_passed_total")
    # the cadence again: a slot a second, ticked or (the fabric is calm: calm_interval) passed over
    assert 2 <= ticks + passed <= 4, (ticks, passed)
    samples = _value(after, "netd_anomaly_fast_path_samples_total") - _value(
        first, "netd_anomaly_fast_path_samples_total"
    )
    assert samples >= 10, samples  # ~9 a second while calm: the fast path did not stay off
    assert _value(after, "netd_anomaly_fast_path_interval_seconds") == 0.1

    # Every exported RDMA total went on from where it was: the frozen seconds' traffic is in it.
    totals = re.findall(r"^(netd_rdma_rx_bytes_total\{[^}]*\}) (\S+)$", before, re.M)
    assert len(totals) == 4
    for series, value in totals:
        later = re.search(rf"^{re.escape(series)} (\S+)$", after, re.M)
        assert later is not None and float(later.group(1)) > float(value), series

    # The interval over the freeze is not judged (max_gap), and a calm fabric has nothing to find.
    assert anomalies["active"] == [] and anomalies["recent"] == [], anomalies
    for kind in ("held", "reset", "discarded"):
        line = f'netd_series_events_total{{kind="{kind}"}}'
        assert _value(after, line) == 0, (kind, after)

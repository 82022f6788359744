"""The descriptor budget: 32 dual-port NICs (64 RDMA ports) read by a process limited to 256 open files,
and the RLIMIT_NOFILE check at start. The limits are set in child processes (resource.setrlimit), so
the test process keeps its own."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from netd.bench.static_tree import StaticHost
from tests.processes import Child, stop

LIMIT = 256
BUDGET = 64


def _limited(soft: int, hard: int | None = None) -> object:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, soft if hard is None else hard))

    return apply


@pytest.fixture(scope="module")
def big_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fd") / "sys"
    host = StaticHost(root, nics=32)
    host.close()  # the writer's descriptors are this process's, not the reader's
    yield root


_READ_THREE_TICKS = r"""
import json, os, sys
from pathlib import Path
from netd.series.tracker import SeriesTracker
from netd.sources.collect import Sampler
sampler, tracker = Sampler(Path(sys.argv[1]), host="h"), SeriesTracker()
for _ in range(3):
    snap = sampler.collect()
    tracker.update(snap)
print(json.dumps({
    "ports": len(snap.ports),
    "netdevs": len(snap.ethtool),
    "counters": sum(len(p.counters) for p in snap.ports),
    "read_errors": sum(len(p.read_errors) for p in snap.ports),
    "sources_ok": all(s.ok for s in snap.sources),
    "fds": len(os.listdir("/proc/self/fd")),
}))
"""


@pytest.mark.slow  # builds a 64-port tree
def test_64_ports_are_read_within_the_budget_under_ulimit_256(big_host: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _READ_THREE_TICKS, str(big_host)],
        preexec_fn=_limited(LIMIT),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    got = json.loads(done.stdout)
    assert (got["ports"], got["netdevs"], got["read_errors"], got["sources_ok"]) == (64, 64, 0, True)
    assert got["counters"] == 64 * 52  # every counter of every port, none lost to the budget
    assert got["fds"] <= BUDGET, got  # was ~56 per port: 3600 here


@pytest.mark.slow  # runs `netd run` as a process
def test_netd_run_serves_64_ports_under_ulimit_256(big_host: Path, free_port: int, tmp_path: Path) -> None:
    env = {**os.environ, "NETD_TOPOLOGY_ENABLED": "false"}
    cmd = [sys.executable, "-m", "netd", "run", "--sysfs-root", str(big_host)]
    proc = Child(
        [*cmd, "--listen", f"127.0.0.1:{free_port}", "--interval", "1"], preexec_fn=_limited(LIMIT), env=env
    )
    url = f"http://127.0.0.1:{free_port}"
    try:
        body = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and "netd_ticks_total 3.0" not in body:
            assert proc.poll() is None, proc.stderr_text()
            try:
                body = httpx.get(url + "/metrics", timeout=5).text
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        assert len(re.findall(r"^netd_port_up\{", body, re.M)) == 64
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert fds <= BUDGET, fds
    finally:
        stop(proc)


_CHECK = r"""
import resource
from netd.daemon.limits import ensure_nofile
from netd.errors import ConfigError
try:
    print(repr(ensure_nofile()), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
except ConfigError as exc:
    print("error:", exc)
"""


@pytest.mark.parametrize(
    ("soft", "hard", "expected"),
    [
        (100, 4096, "None 256"),  # raised to what netd needs
        (100, 100, "warning: RLIMIT_NOFILE is 100 (hard 100)"),  # cannot raise: starts, says so
        (40, 40, "error: RLIMIT_NOFILE is 40 (hard 40): netd needs at least 64"),
    ],
)
def test_rlimit_nofile_check(soft: int, hard: int, expected: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHECK],
        preexec_fn=_limited(soft, hard),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith(expected) or done.stdout.startswith(f"'{expected}"), done.stdout


def test_netd_run_refuses_a_tiny_limit_with_one_line(tmp_path: Path, free_port: int) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "netd",
            "run",
            "--sysfs-root",
            str(tmp_path),
            "--listen",
            f"127.0.0.1:{free_port}",
        ],
        preexec_fn=_limited(40),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "netd: RLIMIT_NOFILE is 40 (hard 40): netd needs at least 64 open files, 256 recommended "
        "(raise it with `ulimit -n 256` or LimitNOFILE=256)"
    ]

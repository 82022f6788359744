"""The scale and abuse phases of `netd bench api` (issue 18): the extender at 5000 nodes, /metrics
at full rate, /healthz while 25 MB requests arrive, and idle connections held against the listener.

Every phase sends its load from separate processes (netd.bench.load), so the clients do not share
the server's interpreter lock. ``big`` is a listener whose cluster view has 5000 nodes (re-scored
every ``refresh_s``, like `netd fabric`), in its own process (netd.bench.fabric_listener) as `netd
fabric` is, so it shares no interpreter lock with the bench's ticking daemon and its 100-node view;
``main`` is the daemon's own listener (ticking).
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netd.api.extender_wire import encode_filter, read_args
from netd.bench.load_run import percentile, run_load, start_load
from netd.bench.processes import terminate
from netd.bench.synthetic import SyntheticCluster
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import NodeIndex
from netd.congestion.scorer import CongestionReport
from netd.errors import BenchError

__all__ = ["BigListener", "extender_bodies", "extender_phases", "listener_phases"]

READY_TIMEOUT_S = 300.0  # building and scoring 40,000 ports and warming two workers, on a busy machine
POD = {"metadata": {"name": "bench-0", "namespace": "bench", "labels": {"app": "bench"}}}


def _node(name: str) -> dict[str, Any]:
    """A v1.Node of the size kube-scheduler sends (labels, addresses, 30 images, conditions: ~5 KB)."""
    return {
        "metadata": {
            "name": name,
            "labels": {f"node.example/label-{i}": f"value-{i:02d}-" + "x" * 24 for i in range(20)},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller": "true"},
        },
        "spec": {"podCIDR": "10.244.0.0/24", "providerID": f"example://{name}"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "images": [
                {"names": [f"registry.example/team/image-{i}@sha256:" + "0" * 64], "sizeBytes": 1_000_000 + i}
                for i in range(30)
            ],
            "conditions": [
                {
                    "type": t,
                    "status": "False",
                    "reason": "KubeletHasSufficient" + t,
                    "message": "kubelet is fine",
                }
                for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
            ],
        },
    }


def extender_bodies(tmp: Path, nodes: int) -> tuple[Path, Path]:
    """(ExtenderArgs with ``nodes`` NodeNames, ExtenderArgs with ``nodes`` full Node objects)."""
    names = [f"node-{n:03d}" for n in range(nodes)]
    by_name, full = tmp / "names.json", tmp / "nodes.json"
    by_name.write_text(json.dumps({"Pod": POD, "Nodes": None, "NodeNames": names}))
    full.write_text(
        json.dumps({"Pod": POD, "Nodes": {"items": [_node(n) for n in names]}, "NodeNames": None})
    )
    return by_name, full


class BigListener:
    """The 5000-node listener that stands for `netd fabric`, in its own process as `netd fabric` is
    (``python -m netd.bench.fabric_listener``): a view of ``nodes`` nodes x 8 ports re-scored every
    ``refresh_s`` (10 s, as at each Prometheus refresh), served by netd's listener with the
    extender's workers warm; alive inside ``with``. The child stops when its stdin closes; it is
    terminated, then killed, if it does not, and on every path out of ``with``."""

    def __init__(
        self, nodes: int, scheduler: SchedulerConfig, refresh_s: float = 10.0, seed: int = 1
    ) -> None:
        self.nodes, self.seed = nodes, seed
        self.cmd = [sys.executable, "-m", "netd.bench.fabric_listener", "--nodes", str(nodes)]
        self.cmd += ["--seed", str(seed), "--refresh", str(refresh_s)]
        self.cmd += ["--scheduler", scheduler.model_dump_json()]
        self.proc: subprocess.Popen[str] | None = None
        self.base = ""
        self.update_ms: list[float] = []  # the child's re-scores (CongestionScorer.update), once it stopped

    def report(self) -> CongestionReport | None:
        """The child's first report, built again here from the same seed (the child's view is in
        another process): a view of the same size for the direct ``processing_ms`` call."""
        snap = SyntheticCluster(self.nodes, seed=self.seed).current()
        return snap.congestion if snap is not None else None

    def __enter__(self) -> BigListener:
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT_S)
            line = self.proc.stdout.readline() if ready else ""
            if not line:
                raise BenchError(
                    f"the 5000-node listener did not start within {READY_TIMEOUT_S:g} s "
                    f"(exit status {self.proc.poll()})"
                )
            self.base = f"http://127.0.0.1:{json.loads(line)['port']}"
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the child's signal to stop
            proc.wait(timeout=30)
            last = proc.stdout.read() if proc.stdout is not None else ""
            if last.strip():
                self.update_ms = json.loads(last.strip().splitlines()[-1]).get("update_ms", [])
        except (OSError, ValueError, subprocess.TimeoutExpired):
            terminate(proc)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()


def _idle_survived(port: int, main: str, steps: tuple[int, ...]) -> int:
    """The most idle connections held open while every /healthz probe still answered."""
    held: list[socket.socket] = []
    survived = 0
    try:
        for target in steps:
            while len(held) < target:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            probe = run_load(f"{main}/healthz", 20.0, 1.0, None, connections=1)
            if probe["errors"] or not probe["answered"]:
                break
            survived = target
    except OSError:
        pass
    finally:
        for s in held:
            s.close()
    return survived


def _processing_ms(body: bytes, report: CongestionReport | None, repeat: int = 5) -> float:
    """Median ms to read a filter body, decide and write the answer, called directly: the server's
    own share of a request, without the 2 x 31 MB over loopback that the load generator also pays."""
    index = NodeIndex(report)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        asked = read_args(body)
        passed, failed, _ = index.filter(asked.names)
        encode_filter(asked, passed, failed, body)
        times.append((time.perf_counter() - t0) * 1000.0)
    return round(sorted(times)[len(times) // 2], 3)


def extender_phases(
    big: str, names: Path, full: Path, seconds: float, report: Callable[[], CongestionReport | None]
) -> dict[str, Any]:
    """Against the 5000-node listener (its own process, its view re-scored every 10 s, as `netd
    fabric`'s). ``report``: a report of the same view, built only after the load (for
    ``processing_ms``), so the bench's own process holds no 40,000-port view while it measures."""
    names_run = run_load(f"{big}/scheduler/prioritize", 20.0, seconds, names)
    # the first full-node requests after a start pay one-time costs (the body memfds' pages, the
    # workers' first parse): ~100-150 ms more, reported as first_ms, not as the steady latency
    nodes_run = run_load(f"{big}/scheduler/filter", 1.0, max(seconds, 10.0), full, connections=2, warmup=1)
    # /healthz probed while 25 MB filter requests arrive and are parsed
    filters = start_load(f"{big}/scheduler/filter", 1.0, seconds, full, connections=2)
    healthz = run_load(f"{big}/healthz", 50.0, seconds, None, connections=2)
    filters.communicate(timeout=seconds + 120)
    nodes = {k: nodes_run[k] for k in ("p50_ms", "p99_ms", "answered", "errors")}
    nodes["first_ms"] = nodes_run["warmup_max_ms"]
    nodes["processing_ms"] = _processing_ms(full.read_bytes(), report())
    return {
        "extender_5000_names": {k: names_run[k] for k in ("p50_ms", "p99_ms", "answered", "errors")},
        "extender_5000_nodes": nodes,
        "healthz_under_25mb_ms": healthz["p99_ms"],
        "healthz_under_25mb": {k: healthz[k] for k in ("p50_ms", "p99_ms", "max_ms", "answered", "errors")},
        "body_bytes_5000_nodes": full.stat().st_size,
    }


def listener_phases(main: str, port: int, seconds: float, ticks: list[float]) -> dict[str, Any]:
    """Against the daemon's own listener (as `netd run`): /metrics at 1000/s, idle connections.
    ``ticks``: the daemon's tick durations (ms), appended as it ticks."""
    ticks.clear()
    metrics = run_load(f"{main}/metrics", 1000.0, seconds, None, connections=16)
    under_metrics = list(ticks)
    return {
        "metrics": {k: metrics[k] for k in ("rps", "p50_ms", "p99_ms", "answered", "errors")},
        "tick_p99_ms_metrics_load": percentile(under_metrics, 99),
        "idle_conns_survived": _idle_survived(port, main, (500, 1000, 2000, 4000)),
    }

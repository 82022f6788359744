"""The scale and abuse phases of `netd bench api` (issue 18): the extender at 5000 nodes, /metrics
at full rate, /healthz while 25 MB requests arrive, and idle connections held against the listener.

Every phase sends its load from separate processes (netd.bench.load), so the clients do not share
the server's interpreter lock. ``big`` is a listener whose cluster view has 5000 nodes (re-scored
every ``refresh_s``, like `netd fabric`); ``main`` is the daemon's own listener (ticking).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn

from netd.api.app import create_app
from netd.api.extender_wire import encode_filter, read_args
from netd.api.routes_scheduler import warm_extender
from netd.api.server import Server, bind
from netd.bench.load_run import percentile, run_load, start_load
from netd.config.service import SchedulerConfig
from netd.congestion.scheduling import NodeIndex
from netd.congestion.scorer import CongestionReport
from netd.daemon.state import PublishedState

__all__ = ["BigListener", "extender_bodies", "extender_phases", "listener_phases"]

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
    """A second listener (netd's Server) whose cluster view has ``nodes`` nodes x 8 ports, re-scored
    every 10 s as `netd fabric` re-scores at each Prometheus refresh; alive inside ``with``."""

    def __init__(
        self, state: Callable[[], PublishedState | None], nodes: int, scheduler: SchedulerConfig
    ) -> None:
        from netd.bench.api import SyntheticCluster  # the module that runs us

        self.view = SyntheticCluster(nodes)
        self.app = app = create_app(state, lambda: None, 1.0, view=self.view, scheduler=scheduler)
        self.sock = bind("127.0.0.1", 0)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = Server(uvicorn.Config(app, log_level="error", access_log=False, lifespan="off"))
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._rescore, daemon=True),
            threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True),
        ]

    def _rescore(self) -> None:
        while not self._stop.wait(10.0):
            self.view.refresh()

    def report(self) -> CongestionReport | None:
        snap = self.view.current()
        return snap.congestion if snap is not None else None

    def __enter__(self) -> BigListener:
        warm_extender(self.app)  # the extender's workers and table, ready before load (as `netd fabric`)
        for t in self._threads:
            t.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.server.should_exit = True
        for t in self._threads:
            t.join(timeout=30)
        self.sock.close()


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
    big: str, names: Path, full: Path, seconds: float, report: CongestionReport | None
) -> dict[str, Any]:
    """Against the 5000-node listener (its view re-scored every 10 s, as `netd fabric`'s)."""
    names_run = run_load(f"{big}/scheduler/prioritize", 20.0, seconds, names)
    nodes_run = run_load(f"{big}/scheduler/filter", 1.0, max(seconds, 10.0), full, connections=2)
    # /healthz probed while 25 MB filter requests arrive and are parsed
    filters = start_load(f"{big}/scheduler/filter", 1.0, seconds, full, connections=2)
    healthz = run_load(f"{big}/healthz", 50.0, seconds, None, connections=2)
    filters.communicate(timeout=seconds + 120)
    nodes = {k: nodes_run[k] for k in ("p50_ms", "p99_ms", "answered", "errors")}
    nodes["processing_ms"] = _processing_ms(full.read_bytes(), report)
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

"""`netd bench api`: latency of /v1/congestion and /scheduler/prioritize under load, and what that load
does to the daemon's tick.

One process holds what `netd run` holds: the daemon ticking in its thread (the emulated fabric in its
child process, as in `netd run`; a tick's duration includes waiting for the fabric's slice) and
uvicorn serving the app on a loopback port, with netd run's listener socket and interpreter
settings. The app's congestion view is a synthetic cluster (``--nodes`` nodes x 8 rails under ToRs
of 8 nodes and two spines, re-scored by the real scorer every tick interval), so the routes answer
at the size a fabric service sees and their per-snapshot caches are invalidated as often as the
daemon ticks. Two load-generator processes (netd.bench.load) then send open-loop requests at
``--rate`` per second each: ``GET /v1/congestion?scope=port`` and ``POST /scheduler/prioritize``
with a ``--nodes``-name payload. Tick durations are recorded first with no load, then under load.

The scale phases (``--scale-nodes``, netd.bench.api_scale) then run against a second listener that
stands for `netd fabric`: like it, its own process (netd.bench.fabric_listener), with a view of
``--scale-nodes`` nodes x 8 ports re-scored every 10 s by a view process of its own (as `netd
fabric`'s, netd.cluster.remote); it shares no interpreter lock with the ticking daemon above, whose
small view is not re-scored meanwhile. Last, against the daemon's own listener: /metrics at full
rate, idle connections.
"""

from __future__ import annotations

import gc
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from netd.api.app import create_app
from netd.api.routes_scheduler import warm_extender
from netd.api.server import Server, bind, share_interpreter_lock
from netd.bench.api_scale import BigListener, extender_bodies, extender_phases, listener_phases
from netd.bench.load_run import percentile, start_load, summarize
from netd.bench.synthetic import SyntheticCluster
from netd.commands.run import build_daemon
from netd.config.settings import load_config
from netd.errors import BenchError

__all__ = ["SyntheticCluster", "bench_api", "register_bench"]


def _thread_cpu_s(tid: int | None) -> float:
    """User + system CPU seconds of one thread of this process (/proc, clock ticks)."""
    fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_api(
    seconds: float = 10.0,
    rate: float = 200.0,
    nodes: int = 100,
    interval: float = 0.25,
    scale_nodes: int = 5000,
) -> dict[str, Any]:
    if seconds <= 0 or rate <= 0 or nodes < 1 or scale_nodes < 0:
        raise BenchError("--seconds and --rate must be > 0, --nodes >= 1 and --scale-nodes >= 0")
    with tempfile.TemporaryDirectory(prefix="netd-bench-api-") as tmp:
        environ = {"NETD_NCCL_SOCKET": os.path.join(tmp, "nccl.sock")}  # never the machine-wide socket
        overrides = {"fabric": "emulated", "interval": interval, "emulator": {"state_dir": Path(tmp) / "emu"}}
        cfg = load_config(None, environ=environ, overrides=overrides)
        daemon, _ = build_daemon(cfg)
        ticks: list[float] = []
        tick = daemon.tick

        def timed_tick() -> Any:
            t0 = time.perf_counter()
            result = tick()
            ticks.append((time.perf_counter() - t0) * 1000.0)
            return result

        daemon.tick = timed_tick  # type: ignore[method-assign]
        stop = threading.Event()
        daemon.tick()
        view = SyntheticCluster(nodes)
        app = create_app(daemon.state, daemon.last_tick_age_s, interval, view=view, scheduler=cfg.scheduler)
        sock = bind("127.0.0.1", 0)  # netd run's listener, with its socket options
        port = sock.getsockname()[1]
        server = Server(uvicorn.Config(app, log_level="error", access_log=False, lifespan="off"))

        # the scale phases measure the 5000-node listener, which stands for `netd fabric`: the small
        # view's re-scores twice a second (each rolled out to this listener's extender workers) are
        # this bench's first phase's load, not a host's; the daemon itself ticks on throughout
        small_view_paused = threading.Event()

        def rescore() -> None:  # the cluster view changes as often as the daemon ticks
            while not stop.wait(interval):
                if not small_view_paused.is_set():
                    view.refresh()

        threads = [
            threading.Thread(target=daemon.run, args=(stop,), daemon=True),
            threading.Thread(target=rescore, daemon=True),
            threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True),
        ]
        body = Path(tmp) / "prioritize.json"
        pod = {"metadata": {"name": "bench-0", "namespace": "bench", "labels": {"app": "bench"}}}
        body.write_text(
            json.dumps({"Pod": pod, "Nodes": None, "NodeNames": [f"node-{n:03d}" for n in range(nodes)]})
        )
        with share_interpreter_lock():  # netd run's interpreter setting while it serves
            try:
                # steady state: `netd run` starts the extender's workers on its first extender request
                warm_extender(app)
                for t in threads:
                    t.start()
                while not server.started:
                    time.sleep(0.01)
                ticks.clear()
                time.sleep(seconds)  # idle
                idle = list(ticks)
                ticks.clear()
                server_tid = threads[-1].native_id
                cpu0 = _thread_cpu_s(server_tid)
                base = f"http://127.0.0.1:{port}"
                congestion = start_load(f"{base}/v1/congestion?scope=port&limit=100", rate, seconds, None)
                prioritize = start_load(f"{base}/scheduler/prioritize", rate, seconds, body)
                result_c, result_p = summarize(congestion, seconds), summarize(prioritize, seconds)
                loaded = list(ticks)
                # CPU of the HTTP thread per request answered: unlike latencies on a shared machine, this
                # does not depend on what else runs there
                server_cpu = _thread_cpu_s(server_tid) - cpu0
                answered = result_c["answered"] + result_p["answered"]
                scale: dict[str, Any] = {}
                if scale_nodes:  # the 5000-node listener is its own process, as `netd fabric` is
                    names, full = extender_bodies(Path(tmp), scale_nodes)
                    small_view_paused.set()
                    with BigListener(scale_nodes, cfg.scheduler) as big:  # its own process
                        scale = extender_phases(big.base, names, full, seconds, big.report)
                    small_view_paused.clear()
                    # its re-scores of 5000 nodes x 8 ports while it answered (the scorer's update, CPU ms)
                    scale["rescore_40000_ports_ms"] = percentile(big.update_ms, 50)
                    gc.collect()  # the daemon's own listener alone, as under `netd run`
                    scale.update(listener_phases(base, port, seconds, ticks))
            finally:
                stop.set()
                server.stop()
                for t in threads:
                    t.join(timeout=10)
                sock.close()
                daemon.close()
    return {
        "congestion": result_c,
        "prioritize": result_p,
        "tick_p99_ms_idle": percentile(idle, 99),
        "tick_p99_ms_load": percentile(loaded, 99),
        **scale,
        "server_cpu_ms_per_request": round(server_cpu / answered * 1000.0, 3) if answered else None,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "ticks_idle": len(idle),
        "ticks_load": len(loaded),
        "seconds": seconds,
        "rate_per_route": rate,
        "nodes": nodes,
        "scale_nodes": scale_nodes,
        "interval_s": interval,
    }


def _cmd(args: Any, cfg: Any) -> int:
    print(
        json.dumps(bench_api(args.seconds, args.rate, args.nodes, args.interval, args.scale_nodes), indent=2)
    )
    return 0


def register_bench(sub: Any) -> None:
    p = sub.add_parser(
        "api", help="latency of /v1/congestion, the extender and /metrics under load and abuse; tick impact"
    )
    p.add_argument("--seconds", type=float, default=15.0, help="length of the idle and the loaded phase (15)")
    p.add_argument("--rate", type=float, default=200.0, help="requests per second per route (200)")
    p.add_argument("--nodes", type=int, default=100, help="nodes in the cluster view and the payload (100)")
    p.add_argument("--interval", type=float, default=0.5, help="daemon tick interval, seconds (0.5)")
    p.add_argument(
        "--scale-nodes",
        type=int,
        default=5000,
        help="nodes of the scale phases: extender with that many names and full Node objects, /metrics at "
        "1000/s, /healthz while 25 MB requests arrive, idle connections held (5000; 0: skip them)",
    )
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd, needs_config=False)

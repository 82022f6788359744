"""The 5000-node listener of `netd bench api`, run as its own process the way `netd fabric` is
(``python -m netd.bench.fabric_listener --nodes 5000``): a :class:`~netd.bench.synthetic.SyntheticCluster`
view served by netd's listener (:class:`~netd.api.server.Server`, the extender's worker processes warm,
``share_interpreter_lock`` as in `netd fabric`), re-scored every ``--refresh`` seconds (10, as
`netd fabric` at each Prometheus refresh) in a view process of its own, as `netd fabric`'s view is
(:class:`~netd.cluster.remote.RemoteFabricView`).

Prints one JSON line, ``{"port": N}``, once it listens on a loopback port; stops when its standard
input closes (the bench that started it exited or closed it) or on SIGTERM/SIGINT, and then prints
a second, ``{"update_ms": [...]}``: the CPU time of each re-score's ``CongestionScorer.update`` in
the view process (not the first, which scored every port as new).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

import uvicorn

from netd.api.app import create_app
from netd.api.routes_scheduler import warm_extender
from netd.api.server import Server, bind, share_interpreter_lock
from netd.cluster.remote import RemoteFabricView
from netd.config.service import ClusterConfig, SchedulerConfig

__all__ = ["main"]

VIEW_PROCESS = (sys.executable, "-m", "netd.bench.synthetic")
READY_WAIT_S = 120.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netd.bench.fabric_listener", description=__doc__)
    p.add_argument("--nodes", type=int, default=5000, help="nodes x 8 ports in the view (5000)")
    p.add_argument("--seed", type=int, default=1, help="the synthetic cluster's random seed (1)")
    p.add_argument("--refresh", type=float, default=10.0, help="seconds between re-scores (10; 0: never)")
    p.add_argument("--scheduler", default="{}", help="the [scheduler] section as JSON (defaults)")
    args = p.parse_args(argv)
    setup = {"nodes": args.nodes, "seed": args.seed, "refresh": args.refresh}
    refresh_s = args.refresh if args.refresh > 0 else 3600.0
    # the synthetic view's process re-scores every --refresh s; with --refresh 0 it never sends again
    view = RemoteFabricView(
        ClusterConfig(refresh_interval=max(1.0, min(refresh_s, 3600.0))),
        VIEW_PROCESS,
        setup,
        hung_after_s=None if args.refresh > 0 else 10.0**9,
    )
    view.start(wait_s=READY_WAIT_S)
    if view.current() is None:
        view.close()
        print(f"the synthetic view process gave no view within {READY_WAIT_S:g} s", file=sys.stderr)
        return 1
    scheduler = SchedulerConfig.model_validate(json.loads(args.scheduler))
    app = create_app(lambda: None, lambda: None, 1.0, view=view, scheduler=scheduler)
    sock = bind("127.0.0.1", 0)
    server = Server(uvicorn.Config(app, log_level="error", access_log=False, lifespan="off"))
    stop = threading.Event()

    def announce_then_wait_for_eof() -> None:
        while not server.started and not stop.is_set():
            time.sleep(0.01)
        print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
        sys.stdin.read()  # until the bench closes our stdin (or dies)
        server.stop()

    warm_extender(app)  # the extender's worker processes, warm before load (as `netd fabric`)
    threads = [
        threading.Thread(target=announce_then_wait_for_eof, name="stdin", daemon=True),
    ]
    for t in threads:
        t.start()
    try:
        with share_interpreter_lock():  # the view's messages are taken beside the listener
            server.run(sockets=[sock])  # returns on stop(), SIGTERM or SIGINT
    finally:
        stop.set()
        sock.close()
        view.close()
    # the view process's first message is already a re-score (its view was built, then refreshed)
    print(
        json.dumps({"update_ms": [round(s.last_score_cpu_s * 1000.0, 3) for s in view.history]}), flush=True
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

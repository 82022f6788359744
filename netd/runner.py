"""`netd run`: start the loop thread and the HTTP listener, print the banner, stop cleanly."""

from __future__ import annotations

import logging
import sys
import threading
from typing import TextIO

import uvicorn

from netd import __version__
from netd.api.app import create_app
from netd.config import Config
from netd.daemon import Daemon, FabricChoice, build_daemon

__all__ = ["banner", "serve"]

log = logging.getLogger(__name__)


def banner(cfg: Config, daemon: Daemon, choice: FabricChoice) -> str:
    host, port = cfg.listen_address()
    url_host = f"[{host}]" if ":" in host else host
    lines = [f"netd {__version__}: {choice.reason}."]
    if choice.emulated and daemon.emulator is not None:
        e = cfg.emulator
        lines += [
            "  >>> EMULATED FABRIC: synthetic counters from netd's DCQCN model (cc/), not from a NIC <<<",
            f"  {e.tors} ToRs x {e.hosts_per_tor} hosts x {e.ports_per_host} ports at {e.link_gbps:g} Gb/s, "
            f"one spine; incast and all-reduce phases; seed {e.seed}.",
            f"  Trees for every emulated host under {daemon.emulator.state_dir}; this daemon reads "
            f"{daemon.collector.sysfs_root}.",
        ]
    else:
        lines.append(f"  Reading {daemon.collector.sysfs_root}/class/infiniband every {cfg.interval:g} s.")
    lines += [
        f"  Metrics: http://{url_host}:{port}/metrics   Ports: http://{url_host}:{port}/v1/ports",
        "  In another terminal: netd status",
    ]
    return "\n".join(lines)


def serve(cfg: Config, out: TextIO = sys.stderr, log_level: str = "warning") -> int:
    daemon, choice = build_daemon(cfg)
    stop = threading.Event()
    try:
        daemon.tick()  # first tick before listening, so /metrics is never empty once reachable
        loop = threading.Thread(target=daemon.run, args=(stop,), name="netd-loop", daemon=True)
        app = create_app(daemon.state, daemon.last_tick_age_s, cfg.interval)
        host, port = cfg.listen_address()
        server = uvicorn.Server(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="off")
        )
        print(banner(cfg, daemon, choice), file=out, flush=True)
        loop.start()
        server.run()  # returns on SIGINT/SIGTERM (uvicorn installs the handlers)
        if not server.started:
            print(f"netd: could not listen on {cfg.listen} (see the error above)", file=out)
            return 1
        return 0
    finally:
        stop.set()
        daemon.close()

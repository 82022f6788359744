"""`netd run`: start the loop thread and the HTTP listener, print the banner, stop cleanly."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

import uvicorn

from netd import __version__
from netd.api.app import create_app
from netd.api.auth import load_token
from netd.api.exposure import exposure_warning
from netd.api.service_view import HostView
from netd.bpf_wiring import bpf_banner
from netd.config import Config
from netd.daemon import Daemon, FabricChoice, build_daemon
from netd.errors import NetdError
from netd.hints.service import NcclService
from netd.tuning.wiring import TuningParts, start_tuning

__all__ = ["banner", "bind", "serve", "share_interpreter_lock"]

log = logging.getLogger(__name__)

# How long a thread that wants the interpreter lock waits before the holder is asked to let go
# (CPython's default is 5 ms). The listener shares the lock with the tick, the fast path and, in
# `netd fabric`, the cluster re-scoring; every request waits up to this long whenever one of them is
# running Python. 0.5 ms cut `netd bench api`'s p99 from 13-17 ms to 6-12 ms (docs/benchmarks.md).
SWITCH_INTERVAL_S = 0.0005


@contextlib.contextmanager
def share_interpreter_lock() -> Iterator[None]:
    """While serving HTTP beside the loops, hand the interpreter lock over quickly."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


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
    st = daemon.state()
    lines += bpf_banner(st.observation.snapshot.bpf if st else None, f"http://{url_host}:{port}")
    lines += [
        f"  Metrics: http://{url_host}:{port}/metrics   Ports: http://{url_host}:{port}/v1/ports",
        f"  Topology: http://{url_host}:{port}/v1/topology   Congestion: http://{url_host}:{port}/v1/congestion"
        f"   Scheduler extender: http://{url_host}:{port}/scheduler",
        "  In another terminal: netd status   (anomalies as they happen: netd anomalies --watch)",
    ]
    return "\n".join(lines)


class _Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM/SIGINT after shutdown, so the process would die *by* the
    signal before netd's own cleanup runs; netd stops gracefully and exits 0 instead."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else starts, so a busy port fails fast and clearly.

    The protocol is named (IPPROTO_TCP, not the default 0) because asyncio sets TCP_NODELAY on an
    accepted connection only when its socket says it is TCP. Without it, a response written as head
    and body waits for the client's delayed ACK: every request after the first on a keep-alive
    connection took ~40 ms, which capped each connection at ~23 requests/s.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets too
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise NetdError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def serve(
    cfg: Config, out: TextIO = sys.stderr, log_level: str = "warning", view_note: str | None = None
) -> int:
    """``view_note``: a caveat every /v1/topology and /v1/congestion answer carries (netd fabric's)."""
    host, port = cfg.listen_address()
    token_configured = load_token(cfg.api.token_file) is not None
    sock = bind(host, port)
    daemon, choice = build_daemon(cfg)
    stop = threading.Event()
    nccl: NcclService | None = None
    tuning: TuningParts | None = None
    try:
        daemon.tick()  # first tick before listening, so /metrics is never empty once reachable
        nccl = NcclService(cfg, daemon.state, daemon.collector.sysfs_root, _tick_host(daemon))
        nccl.start()  # the plugin's pin socket (docs/nccl.md)
        tuning = start_tuning(cfg, daemon.collector.sysfs_root, daemon.state)  # docs/tuning.md
        loop = threading.Thread(target=daemon.run, args=(stop,), name="netd-loop", daemon=True)
        app = create_app(daemon.state, daemon.last_tick_age_s, cfg.interval,
                         view=HostView(daemon.state, note=view_note), scheduler=cfg.scheduler,
                         routers=(nccl.router, *tuning.routers), collectors=tuning.collectors)  # fmt: skip
        server = _Server(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="off")
        )
        print(banner(cfg, daemon, choice), file=out, flush=True)
        if nccl.banner_line():
            print(nccl.banner_line(), file=out, flush=True)
        if tuning.banner:
            print(tuning.banner, file=out, flush=True)
        warning = exposure_warning(host, port, token_configured)
        if warning:
            print(warning, file=out, flush=True)
        loop.start()
        with share_interpreter_lock():
            server.run(sockets=[sock])  # returns on SIGINT/SIGTERM (uvicorn installs the handlers)
        return 0
    finally:
        stop.set()
        if nccl is not None:
            nccl.close()
        if tuning is not None:
            tuning.close()
        daemon.close()
        sock.close()


def _tick_host(daemon: Daemon) -> str:
    st = daemon.state()
    return st.observation.snapshot.host if st is not None else socket.gethostname()

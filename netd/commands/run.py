"""`netd run`: start the loop thread and the HTTP listener, print the banner, stop cleanly."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from netd import __version__
from netd.api.app import create_app
from netd.api.auth import load_token
from netd.api.exposure import exposure_warning
from netd.api.guard import guard_limits
from netd.api.server import Server, bind, share_interpreter_lock
from netd.api.service_view import HostView
from netd.config.settings import Config
from netd.congestion.host import scorer_from_config
from netd.daemon.bpf import bpf_banner, start_bpf
from netd.daemon.loop import Daemon, Emulator
from netd.detect.service import build_detection
from netd.emulated.child import EmulatorProcess
from netd.emulated.fabric_host import EmulatedFabric, default_state_dir
from netd.nccl.service import NcclService
from netd.sources.collect import Sampler
from netd.sources.sysfs_io import list_dir
from netd.topology.service import TopologyService
from netd.tuning.wiring import TuningParts, start_tuning

__all__ = ["FabricChoice", "banner", "build_daemon", "choose_fabric", "serve"]

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
    st = daemon.state()
    lines += bpf_banner(st.observation.snapshot.bpf if st else None, f"http://{url_host}:{port}")
    lines += [
        f"  Metrics: http://{url_host}:{port}/metrics   Ports: http://{url_host}:{port}/v1/ports",
        f"  Topology: http://{url_host}:{port}/v1/topology   Congestion: http://{url_host}:{port}/v1/congestion"
        f"   Scheduler extender: http://{url_host}:{port}/scheduler",
        "  In another terminal: netd status   (anomalies as they happen: netd anomalies --watch)",
    ]
    return "\n".join(lines)


class FabricChoice:
    """Which fabric a run uses, and why (for the banner and `netd check`)."""

    def __init__(self, emulated: bool, reason: str) -> None:
        self.emulated = emulated
        self.reason = reason


def choose_fabric(cfg: Config) -> FabricChoice:
    devices = list_dir(cfg.sysfs_root / "class" / "infiniband")
    where = cfg.sysfs_root / "class" / "infiniband"
    if cfg.fabric == "emulated":
        return FabricChoice(True, 'fabric = "emulated" was requested')
    if cfg.fabric == "hardware":
        return FabricChoice(
            False, f'fabric = "hardware" was requested ({len(devices)} RDMA devices in {where})'
        )
    if devices:
        return FabricChoice(False, f"found {len(devices)} RDMA devices in {where}: {', '.join(devices)}")
    return FabricChoice(True, f"no RDMA devices in {where}")


def build_daemon(cfg: Config) -> tuple[Daemon, FabricChoice]:
    choice = choose_fabric(cfg)
    emulator: Emulator | None = None
    root: Path = cfg.sysfs_root
    if choice.emulated:
        e = cfg.emulator
        options: dict[str, Any] = {
            "tors": e.tors,
            "hosts_per_tor": e.hosts_per_tor,
            "ports_per_host": e.ports_per_host,
            "link_gbps": e.link_gbps,
            "seed": e.seed,
            "sim_ms_per_tick": e.sim_ms_per_tick,
        }
        where = e.state_dir or default_state_dir()
        emulator = EmulatedFabric(where, **options) if e.in_process else EmulatorProcess(where, **options)
        root = emulator.host_root(e.host_index)
    host = emulator.host_name(cfg.emulator.host_index) if emulator is not None else None
    collector = Sampler.from_config(cfg, root, host=host, emulated=choice.emulated)
    collector.bpf = start_bpf(cfg)  # eBPF probes: attach now, detach in Daemon.close()
    topology = None
    if cfg.topology.enabled:
        topology = TopologyService(cfg.topology, root, collector.host)
        topology.refresh()
    scorer = scorer_from_config(cfg.congestion)
    detection = build_detection(cfg, collector, choice.emulated)
    daemon = Daemon(
        collector,
        cfg.interval,
        emulator,
        topology=topology,
        scorer=scorer,
        detection=detection,
        emulator_host=cfg.emulator.host_index,
    )
    return daemon, choice


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
        app = create_app(
            daemon.state,
            daemon.last_tick_age_s,
            cfg.interval,
            view=HostView(daemon.state, note=view_note),
            scheduler=cfg.scheduler,
            routers=(nccl.router, *tuning.routers),
            collectors=tuning.collectors,
            guard=guard_limits(host, cfg.api.allowed_hosts),
        )
        server = Server(
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

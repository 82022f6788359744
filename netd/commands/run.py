"""`netd run`: start the loop thread and the HTTP listener, print the banner, stop cleanly."""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable
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
from netd.commands.sd_notify import Notifier, WatchdogPinger, watchdog_interval_s
from netd.config.settings import Config
from netd.congestion.host import scorer_from_config
from netd.daemon.bpf import bpf_banner, start_bpf
from netd.daemon.cadence import longest_tick_s
from netd.daemon.limits import ensure_nofile
from netd.daemon.loop import Daemon, Emulator
from netd.daemon.stop import StopSignal
from netd.detect.wiring import build_detection
from netd.emulated.child import EmulatorProcess
from netd.emulated.fabric_host import EmulatedFabric, default_state_dir, emulated_host_of
from netd.errors import NetdError
from netd.nccl.service import NcclService
from netd.qos.wiring import QosParts, emulated_fabric_qos, start_qos
from netd.sources.collect import Sampler
from netd.sources.sysfs_io import list_dir
from netd.topology.service import TopologyService
from netd.tuning.wiring import TuningParts, start_tuning

__all__ = ["FabricChoice", "banner", "build_daemon", "choose_fabric", "serve", "tick_fresh"]

LISTEN_BACKLOG = 2048  # uvicorn's default

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
        if daemon.collector.emulated:
            lines.append(
                f"  >>> EMULATED FABRIC: {daemon.collector.sysfs_root} is emulated host "
                f"{daemon.collector.host}'s tree, written by another netd's emulated fabric, not a NIC <<<"
            )
        calm = daemon.longest_interval_s
        while_calm = f" ({calm:g} s while the host is calm)" if calm > cfg.interval else ""
        lines.append(
            f"  Reading {daemon.collector.sysfs_root}/class/infiniband every {cfg.interval:g} s{while_calm}."
        )
    st = daemon.state()
    listen = "" if cfg.listen == Config.model_fields["listen"].default else f" --listen {cfg.listen}"
    lines += bpf_banner(st.observation.snapshot.bpf if st else None, f"http://{url_host}:{port}")
    lines += [
        f"  Metrics: http://{url_host}:{port}/metrics   Ports: http://{url_host}:{port}/v1/ports",
        f"  Topology: http://{url_host}:{port}/v1/topology   Congestion: http://{url_host}:{port}/v1/congestion"
        f"   Scheduler extender: http://{url_host}:{port}/scheduler",
        f"  In another terminal: netd status{listen}   (anomalies as they happen: "
        f"netd anomalies{listen} --watch)",
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
    # an emulated host's tree read directly is still synthetic: the tree's marker decides, not the flag
    host = emulator.host_name(cfg.emulator.host_index) if emulator is not None else emulated_host_of(root)
    emulated = choice.emulated or host is not None
    collector = Sampler.from_config(cfg, root, host=host, emulated=emulated)
    collector.bpf = start_bpf(cfg)  # eBPF probes: attach now, detach in Daemon.close()
    topology = None
    if cfg.topology.enabled:
        topology = TopologyService(cfg.topology, root, collector.host)
        topology.refresh()
    scorer = scorer_from_config(cfg.congestion)
    calm_interval = _calm_interval(cfg, collector)
    detection = build_detection(cfg, collector, emulated, longest_tick_s(cfg.interval, calm_interval))
    daemon = Daemon(
        collector,
        cfg.interval,
        emulator,
        topology=topology,
        scorer=scorer,
        detection=detection,
        emulator_host=cfg.emulator.host_index,
        calm_interval_s=calm_interval,
    )
    return daemon, choice


def _calm_interval(cfg: Config, collector: Sampler) -> float:
    """``calm_interval``, or 0 when the ticks are the only PFC pause reads (ethtool statistics read,
    detection on, the fast path off): passed slots would leave pause unseen for seconds."""
    d = cfg.detect
    if cfg.calm_interval > 0 and collector.ethtool is not None and d.enabled and d.fast_interval <= 0:
        log.warning(
            "calm_interval %g ignored: with [detect] fast_interval = 0 the ticks are the only PFC pause "
            "reads, so every interval ticks",
            cfg.calm_interval,
        )
        return 0.0
    return cfg.calm_interval


def serve(
    cfg: Config,
    out: TextIO = sys.stderr,
    log_level: str = "warning",
    view_note: str | None = None,
    reload: Callable[[], Config] | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM. ``view_note``: a caveat every /v1/topology and /v1/congestion
    answer carries (netd fabric's). ``reload``: how SIGHUP re-reads the configuration; a reload
    that fails to load keeps the running configuration (and says why), one that loads stops this
    instance's threads and listener and starts them again from the new configuration (the NCCL
    socket, the tuning journal and the emulator are re-opened, so nothing half-applied survives)."""
    notifier = Notifier()
    try:
        while True:
            pending: list[Config] = []
            code = _serve_once(cfg, out, log_level, view_note, notifier, reload, pending)
            if not pending:
                return code
            cfg = pending[-1]
            print("netd: configuration reloaded (SIGHUP)", file=out, flush=True)
    finally:
        notifier.close()


def _serve_once(
    cfg: Config,
    out: TextIO,
    log_level: str,
    view_note: str | None,
    notifier: Notifier,
    reload: Callable[[], Config] | None,
    pending: list[Config],
) -> int:
    host, port = cfg.listen_address()
    nofile_warning = ensure_nofile()  # before any descriptor is opened; refuses when far too low
    if nofile_warning:
        print(nofile_warning, file=out, flush=True)
    token_configured = load_token(cfg.api.token_file) is not None
    sock = bind(host, port)
    daemon, choice = build_daemon(cfg)
    stop = StopSignal()  # the loop waits on it ~10 times a second: one poll(2) each
    nccl: NcclService | None = None
    tuning: TuningParts | None = None
    qos: QosParts | None = None
    watchdog: WatchdogPinger | None = None
    try:
        daemon.tick()  # first tick before listening, so /metrics is never empty once reachable
        nccl = NcclService(cfg, daemon.state, daemon.collector.sysfs_root, _tick_host(daemon))
        nccl.start()  # the plugin's pin socket (docs/nccl.md)
        tuning = start_tuning(cfg, daemon.collector.sysfs_root, daemon.state)  # docs/tuning.md
        qos = start_qos(  # docs/qos.md
            cfg,
            daemon.collector.sysfs_root,
            _tick_host(daemon),
            daemon.state,
            emulated_fabric_qos(cfg, daemon),
            daemon.detection,  # local QoS contradictions become anomaly findings too
        )
        loop = threading.Thread(target=daemon.run, args=(stop,), name="netd-loop", daemon=True)
        app = create_app(
            daemon.state,
            daemon.last_tick_age_s,
            daemon.longest_interval_s,
            view=HostView(daemon.state, note=view_note),
            scheduler=cfg.scheduler,
            routers=(nccl.router, *tuning.routers, *qos.routers),
            collectors=(*tuning.collectors, *qos.collectors),
            guard=guard_limits(host, cfg.api.allowed_hosts),
        )
        server = Server(
            uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="off")
        )
        if not pending:
            print(banner(cfg, daemon, choice), file=out, flush=True)
            if nccl.banner_line():
                print(nccl.banner_line(), file=out, flush=True)
            if tuning.banner:
                print(tuning.banner, file=out, flush=True)
            if qos.banner:
                print(qos.banner, file=out, flush=True)
        warning = exposure_warning(host, port, token_configured)
        if warning:
            print(warning, file=out, flush=True)
        loop.start()
        watchdog = WatchdogPinger(notifier, watchdog_interval_s(), lambda: tick_fresh(daemon))
        watchdog.start()
        _on_sighup(server, notifier, reload, pending, out)
        sock.listen(LISTEN_BACKLOG)  # connectable before systemd hears READY=1 (uvicorn listens again)
        notifier.ready(f"serving on {host}:{port}, {choice.reason}")
        with share_interpreter_lock():
            server.run(sockets=[sock])  # returns on SIGINT/SIGTERM (uvicorn installs the handlers)
        return 0
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if not pending:
            notifier.stopping()
        if watchdog is not None:
            watchdog.stop()
        stop.close()  # sets it: the loop and its helpers stop
        if nccl is not None:
            nccl.close()
        if tuning is not None:
            tuning.close()
        if qos is not None:
            qos.close()
        daemon.close()
        sock.close()


def tick_fresh(daemon: Daemon) -> bool:
    """The loop is alive: a tick completed within three of its longest intervals (the rule of
    ``/readyz``; while the host is calm, ticks are ``calm_interval`` apart)."""
    age = daemon.last_tick_age_s()
    return age is not None and age < 3 * daemon.longest_interval_s + 1.0


def _on_sighup(
    server: Server,
    notifier: Notifier,
    reload: Callable[[], Config] | None,
    pending: list[Config],
    out: TextIO,
) -> None:
    """SIGHUP re-reads the configuration (systemd's ExecReload=); without a handler it would kill us."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread (tests serve in threads)

    def handle(signum: int, frame: object) -> None:
        if reload is None:
            print("netd: SIGHUP ignored: this service has no configuration file to reload", file=out)
            return
        try:
            new = reload()
        except NetdError as exc:
            print(f"netd: SIGHUP: keeping the running configuration: {exc}", file=out, flush=True)
            return
        pending.append(new)
        notifier.reloading()
        server.stop()

    signal.signal(signal.SIGHUP, handle)


def _tick_host(daemon: Daemon) -> str:
    st = daemon.state()
    return st.observation.snapshot.host if st is not None else socket.gethostname()

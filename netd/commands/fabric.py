"""`netd fabric`: the cluster view. Reads every host's netd metrics from Prometheus and serves the
cluster's topology, per-port/ToR/spine congestion and the scheduler extender. With no Prometheus
configured it runs like `netd run` (this host's own counters) and every answer says so."""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import uvicorn
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import ValidationError

from netd import __version__
from netd.api.auth import load_token
from netd.api.exposure import exposure_warning
from netd.api.fabric_app import create_fabric_app
from netd.config import Config
from netd.config_service import ClusterConfig
from netd.congestion_host import scorer_from_config
from netd.congestion_state import LEVELS
from netd.errors import ConfigError
from netd.fabric_view import FabricView
from netd.hints.api import nccl_router
from netd.hints.pins import PinAuthority

__all__ = ["FabricCollector", "register", "serve_fabric"]

log = logging.getLogger(__name__)
NO_PROMETHEUS = (
    "no Prometheus configured (cluster.prometheus_url): this is this host's own view, not the cluster's"
)


class FabricCollector(Collector):
    """Self-metrics of the fabric service and the cluster's ToR/spine scores."""

    def __init__(self, view: FabricView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("netd_build_info", "netd build information.", labels=["version"])
        build.add_metric([__version__], 1)
        yield build
        st = self.view.stats
        refreshes = CounterMetricFamily("netd_fabric_refreshes", "Refreshes from Prometheus attempted.")
        refreshes.add_metric([], st.refreshes)
        errors = CounterMetricFamily("netd_fabric_refresh_errors", "Refreshes that failed.")
        errors.add_metric([], st.errors)
        duration = GaugeMetricFamily(
            "netd_fabric_refresh_duration_seconds", "Wall time of the last good refresh."
        )
        duration.add_metric([], st.last_duration_s)
        yield from (refreshes, errors, duration)
        snap = self.view.current()
        if snap is None or snap.congestion is None or snap.topology is None:
            return
        hosts = GaugeMetricFamily("netd_fabric_hosts", "Hosts whose netd ports Prometheus has.")
        hosts.add_metric([], len(snap.topology.hosts))
        yield hosts
        for scope in ("tor", "spine"):
            help_ = f"Congestion score of each {scope} over all its hosts."
            score = GaugeMetricFamily(f"netd_fabric_{scope}_congestion_score", help_, labels=[scope])
            level = GaugeMetricFamily(
                f"netd_fabric_{scope}_congestion_level",
                "0 ok, 1 busy, 2 congested, 3 severe.",
                labels=[scope],
            )
            for s in snap.congestion.scope(scope):
                score.add_metric([s.name], s.smoothed)
                level.add_metric([s.name], LEVELS.index(s.level))
            yield from (score, level)


def _readiness(view: FabricView, interval_s: float) -> Callable[[], tuple[bool, dict[str, Any]]]:
    def check() -> tuple[bool, dict[str, Any]]:
        last = view.stats.last_ok
        age = None if last is None else time.monotonic() - last
        ready = age is not None and age < 3 * interval_s + 1.0
        return ready, {"last_refresh_age_s": age, "prometheus": view.cfg.prometheus_url,
                       "error": view.stats.last_error}  # fmt: skip

    return check


def serve_fabric(cfg: Config, out: TextIO = sys.stderr, log_level: str = "warning") -> int:
    from netd.runner import _Server, bind, share_interpreter_lock  # the same listener rules as `netd run`

    host, port = cfg.listen_address()
    token_configured = load_token(cfg.api.token_file) is not None
    sock = bind(host, port)
    view = FabricView(cfg.cluster, scorer_from_config(cfg.congestion))
    stop = threading.Event()
    try:
        view.refresh()  # first refresh before listening; a failure is reported, and retried
        pins = nccl_router(
            token=load_token(cfg.api.token_file),
            authority=PinAuthority(window_s=cfg.nccl.pin_window, keep_s=cfg.nccl.keep_pins),
        )
        app = create_fabric_app(view, _readiness(view, cfg.cluster.refresh_interval), FabricCollector(view),
                                cfg.scheduler, routers=[pins])  # fmt: skip
        server = _Server(uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off"))
        snap = view.current()
        seen = f"{len(snap.topology.hosts)} hosts" if snap and snap.topology else "no data yet"
        c = cfg.cluster
        error = f"; {view.stats.last_error}" if view.stats.last_error else ""
        print(f"netd {__version__} fabric: the cluster view from {c.prometheus_url} ({seen}{error}).\n"
              f"  Refresh every {c.refresh_interval:g} s; signals averaged over {c.window}.\n"
              f"  Congestion: http://{host}:{port}/v1/congestion?scope=tor   Scheduler extender: "
              f"http://{host}:{port}/scheduler", file=out, flush=True)  # fmt: skip
        warning = exposure_warning(host, port, token_configured)
        if warning:
            print(warning, file=out, flush=True)
        threading.Thread(target=view.run, args=(stop,), name="netd-fabric", daemon=True).start()
        with share_interpreter_lock():  # the refresh thread re-scores the cluster beside the listener
            server.run(sockets=[sock])
        return 0
    finally:
        stop.set()
        view.close()
        sock.close()


def _cmd_fabric(args: argparse.Namespace, cfg: Config) -> int:
    if args.prometheus:
        try:  # the flag obeys the same rules as cluster.prometheus_url
            cluster = ClusterConfig.model_validate(
                {**cfg.cluster.model_dump(), "prometheus_url": args.prometheus}
            )
        except ValidationError as exc:
            raise ConfigError(f"--prometheus {args.prometheus!r}: {exc.errors()[0]['msg']}") from exc
        cfg = cfg.model_copy(update={"cluster": cluster})
    level = "info" if args.verbose else "warning"
    if cfg.cluster.prometheus_url:
        return serve_fabric(cfg, log_level=level)
    from netd.runner import serve

    print(f"netd fabric: {NO_PROMETHEUS}.", file=sys.stderr, flush=True)
    return serve(cfg, log_level=level, view_note=NO_PROMETHEUS)


def register(sub: Any, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "fabric",
        help="the cluster view: congestion per ToR and spine from Prometheus; the scheduler extender",
        description="Serve the cluster view: reads every host's netd metrics from Prometheus's HTTP API "
        "(--prometheus or cluster.prometheus_url), scores each port, ToR and spine, and answers the "
        "Kubernetes scheduler extender. Without Prometheus it serves this host's own view and says so.",
    )
    common(p)
    p.add_argument("--prometheus", metavar="URL", help="Prometheus base URL, e.g. http://prometheus:9090")
    p.set_defaults(handler=_cmd_fabric)

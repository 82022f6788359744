"""`netd fabric`: the cluster view. Reads every host's netd metrics from Prometheus and serves the
cluster's topology, per-port/ToR/spine congestion and the scheduler extender. With no Prometheus
configured it runs like `netd run` (this host's own counters) and every answer says so."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any, TextIO

import uvicorn
from pydantic import ValidationError

from netd import __version__
from netd.api.auth import load_token
from netd.api.exposure import exposure_warning
from netd.api.guard import guard_limits
from netd.cluster.app import create_fabric_app
from netd.cluster.metrics import FabricCollector
from netd.cluster.peers import GroupPeers
from netd.cluster.refresher import setup as refresher_setup
from netd.cluster.remote import RemoteFabricView
from netd.cluster.view import FabricView
from netd.config.service import ClusterConfig
from netd.config.settings import Config
from netd.errors import ConfigError
from netd.nccl.pins import PinAuthority
from netd.nccl.routes import nccl_router
from netd.qos.fabric import FabricQos, from_prometheus
from netd.qos.routes import fabric_qos_router
from netd.sources.prometheus import PrometheusClient

__all__ = ["register", "serve_fabric"]

log = logging.getLogger(__name__)
REFRESHER = (sys.executable, "-m", "netd.cluster.refresher")
FIRST_REFRESH_WAIT_S = 60.0  # then listen anyway (not ready until a refresh succeeds)
NO_PROMETHEUS = (
    "no Prometheus configured (cluster.prometheus_url): this is this host's own view, not the cluster's"
)


def _readiness(
    view: FabricView | RemoteFabricView, stale_after_s: float
) -> Callable[[], tuple[bool, dict[str, Any]]]:
    """Ready while the view served is younger than ``scheduler.stale_after``: a slow Prometheus that
    fails a few refreshes leaves the last good view in service, and says so."""

    def check() -> tuple[bool, dict[str, Any]]:
        age = view.view_age_s()
        ready = age is not None and age < stale_after_s
        return ready, {
            "last_refresh_age_s": age,
            "view_age_s": age,
            "prometheus": view.cfg.prometheus_url,
            "prometheus_state": view.stats.prometheus,
            "error": view.stats.last_error,
        }

    return check


def serve_fabric(cfg: Config, out: TextIO = sys.stderr, log_level: str = "warning") -> int:
    from netd.api.routes_scheduler import warm_extender
    from netd.api.server import Server, bind, share_interpreter_lock  # the same listener rules as `netd run`

    host, port = cfg.listen_address()
    token_configured = load_token(cfg.api.token_file) is not None
    sock = bind(host, port)
    c = cfg.cluster
    peers_client = PrometheusClient(c.prometheus_url, c.query_timeout)  # asked on the request path
    # the view is refreshed in a process of its own: a 5000-node refresh in this one held the
    # interpreter lock every request needs for ~0.3-0.5 s (netd.cluster.remote)
    view = RemoteFabricView(c, REFRESHER, refresher_setup(c, cfg.congestion), GroupPeers(c, peers_client))
    qos_client = PrometheusClient(c.prometheus_url or "")
    qos_audit = FabricQos(  # GET /v1/qos/fabric: the QoS consistency audit (docs/qos.md)
        from_prometheus(qos_client), cfg.qos, c.prometheus_url or "", c.refresh_interval
    )
    try:
        # the first refresh before listening; a failure is reported, and retried
        view.start(wait_s=FIRST_REFRESH_WAIT_S)
        pins = nccl_router(
            token=load_token(cfg.api.token_file),
            authority=PinAuthority(window_s=cfg.nccl.pin_window, keep_s=cfg.nccl.keep_pins),
        )
        app = create_fabric_app(
            view,
            _readiness(view, max(cfg.scheduler.stale_after, 3 * c.refresh_interval + 1.0)),
            FabricCollector(view),
            cfg.scheduler,
            routers=[pins, fabric_qos_router(qos_audit)],
            guard=guard_limits(host, cfg.api.allowed_hosts),
            version=lambda: view.generation,  # /metrics is rendered again after each refresh
        )
        server = Server(uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off"))
        warm_extender(app)  # the extender's worker processes, warm before kube-scheduler asks
        summary = view.summary()
        seen = f"{summary.hosts} hosts" if summary is not None else "no data yet"
        error = f"; {view.stats.last_error}" if view.stats.last_error else ""
        print(
            f"netd {__version__} fabric: the cluster view from {c.prometheus_url} ({seen}{error}).\n"
            f"  Refresh every {c.refresh_interval:g} s; signals averaged over {c.window}.\n"
            f"  Congestion: http://{host}:{port}/v1/congestion?scope=tor   Scheduler extender: "
            f"http://{host}:{port}/scheduler",
            file=out,
            flush=True,
        )
        warning = exposure_warning(host, port, token_configured)
        if warning:
            print(warning, file=out, flush=True)
        with share_interpreter_lock():  # the view's messages are taken beside the listener
            server.run(sockets=[sock])
        return 0
    finally:
        view.close()
        peers_client.close()
        qos_client.close()
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
    from netd.commands.run import serve

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
    from netd.kube.cli import register_fabric_actions  # `netd fabric export|publish` (docs/deploy.md)

    register_fabric_actions(p, common)

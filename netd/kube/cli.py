"""`netd fabric export` and `netd fabric publish`: the fabric's tiers for schedulers (registered under
`netd fabric` by :mod:`netd.cluster.cli`)."""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netd.api.service_view import ClusterSnapshot
from netd.cluster.view import FabricView
from netd.config.settings import Config
from netd.congestion.host import scorer_from_config
from netd.errors import ConfigError, KubeError
from netd.kube.client import KubeClient
from netd.kube.export import FORMATS, render
from netd.kube.gather import emulated_snapshot
from netd.kube.monitoring import render_monitoring
from netd.kube.service import Publisher
from netd.kube.tiers import fabric_tiers

__all__ = ["register_fabric_actions"]

log = logging.getLogger(__name__)


def _snapshot(args: argparse.Namespace, cfg: Config) -> tuple[ClusterSnapshot, str]:
    """The cluster view to describe: Prometheus's, or (``--emulated``) every emulated host's."""
    if args.emulated:
        return emulated_snapshot(cfg), "the emulated fabric"
    url = args.prometheus or cfg.cluster.prometheus_url
    if not url:
        raise ConfigError("no cluster view: give --prometheus URL (or cluster.prometheus_url), or --emulated")
    view = FabricView(
        cfg.cluster.model_copy(update={"prometheus_url": url}), scorer_from_config(cfg.congestion)
    )
    try:
        snap = view.refresh()
    finally:
        view.close()
    if snap is None or snap.topology is None or not snap.topology.hosts:
        raise ConfigError(f"Prometheus at {url} has no netd_port_info series: nothing to export")
    return snap, f"Prometheus at {url}"


def _cmd_export(args: argparse.Namespace, cfg: Config) -> int:
    snap, source = _snapshot(args, cfg)
    assert snap.topology is not None
    text = render(fabric_tiers(snap.topology), cfg.kube, args.format, source)
    if not args.apply:
        sys.stdout.write(text)
        return 0
    if args.format == "slurm":
        raise ConfigError("--apply writes Kubernetes objects; a Slurm topology.conf is copied by hand")
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise KubeError("--apply needs kubectl on PATH (or print the objects and apply them elsewhere)")
    argv = [kubectl, "apply", "--server-side", f"--field-manager={cfg.kube.field_manager}", "-f", "-"]
    done = subprocess.run(argv, input=text, text=True)
    return 0 if done.returncode == 0 else 1


def _cmd_publish(args: argparse.Namespace, cfg: Config) -> int:
    client = KubeClient.from_environment(args.kubeconfig, dry_run=args.dry_run)  # credentials first
    try:
        return _publish(args, cfg, client)
    finally:
        client.close()


def _publish(args: argparse.Namespace, cfg: Config, client: KubeClient) -> int:
    if args.emulated:
        snap, source = _snapshot(args, cfg)

        def current() -> ClusterSnapshot | None:
            return snap

        close: Callable[[], None] = lambda: None  # noqa: E731
    else:
        url = args.prometheus or cfg.cluster.prometheus_url
        if not url:
            raise ConfigError("publish needs the cluster view: --prometheus URL or cluster.prometheus_url")
        view = FabricView(
            cfg.cluster.model_copy(update={"prometheus_url": url}), scorer_from_config(cfg.congestion)
        )
        source, current, close = f"Prometheus at {url}", view.refresh, view.close
    publisher = Publisher(client, cfg.kube, current)
    try:
        if args.once:
            r = publisher.publish()
            mode = " (server-side dry run)" if args.dry_run else ""
            print(
                f"netd fabric publish{mode}: {r.writes} written, {r.unchanged} unchanged, "
                f"{r.deleted} deleted from {source}"
            )
            for err in r.errors:
                print(f"  {err}", file=sys.stderr)
            return 1 if r.errors else 0
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        print(f"netd fabric publish: every {cfg.kube.publish_interval:g} s from {source}", file=sys.stderr)
        publisher.run(stop)
        return 0
    finally:
        close()


def _cmd_monitoring(args: argparse.Namespace, cfg: Config) -> int:
    sys.stdout.write(render_monitoring(args.dashboards))
    return 0


def _action(
    actions: Any, name: str, common: Callable[..., None], summary: str, description: str
) -> argparse.ArgumentParser:
    """A subcommand that reads the cluster view: the config options and the view's two sources."""
    p: argparse.ArgumentParser = actions.add_parser(name, help=summary, description=description)
    common(p, listen=False)
    p.add_argument(
        "--prometheus", metavar="URL", help="the cluster view's Prometheus (cluster.prometheus_url)"
    )
    p.add_argument(
        "--emulated", action="store_true", help="describe the emulated fabric ([emulator] sets its size)"
    )
    return p


def register_fabric_actions(fabric: argparse.ArgumentParser, common: Callable[..., None]) -> None:
    """`netd fabric export|publish|monitoring`; plain `netd fabric` still serves the cluster view."""
    actions: Any = fabric.add_subparsers(dest="fabric_action", metavar="ACTION", required=False)
    ex = _action(
        actions,
        "export",
        common,
        "print the fabric's tiers for a scheduler: HyperNodes, node labels, Slurm topology.conf",
        "Print the cluster's ToR/spine tiers, from Prometheus's netd_port_info (the cluster view) or the "
        "emulated fabric: Volcano HyperNodes (tier 1 ToR, tier 2 spine), Node label patches with Kueue's "
        "Topology (label keys from [kube]), or Slurm's topology.conf. Kubernetes formats are a YAML stream "
        "for `kubectl apply --server-side -f -`.",
    )
    ex.add_argument("--format", choices=FORMATS, required=True, help="which scheduler's format")
    ex.add_argument("--apply", action="store_true", help="pipe the objects to `kubectl apply --server-side`")
    ex.set_defaults(handler=_cmd_export)
    pub = _action(
        actions,
        "publish",
        common,
        "keep node labels, HyperNodes, Kueue's Topology and health taints in the cluster",
        "Publish the cluster view to the Kubernetes API every kube.publish_interval seconds: server-side "
        "apply of node labels, HyperNodes, Kueue's Topology and the RoCE health condition (field manager "
        "kube.field_manager), only what changed, at most kube.max_writes_per_s; optionally a NoSchedule "
        "taint (kube.taint) on hosts whose RoCE ports are down or PFC-stormed.",
    )
    pub.add_argument(
        "--kubeconfig", metavar="FILE", help="default: in-cluster service account, else ~/.kube/config"
    )
    pub.add_argument(
        "--dry-run", action="store_true", help="server-side dry run (dryRun=All): nothing is stored"
    )
    pub.add_argument("--once", action="store_true", help="one round, print what was written, exit")
    pub.set_defaults(handler=_cmd_publish)
    mon = actions.add_parser(
        "monitoring",
        help="print the PrometheusRules and Grafana dashboard ConfigMaps for deploy/kubernetes/monitoring",
    )
    mon.add_argument(
        "--dashboards",
        type=Path,
        default=Path("dashboards"),
        metavar="DIR",
        help="the dashboards and rules (default ./dashboards; installed: /usr/share/netd/dashboards)",
    )
    mon.set_defaults(handler=_cmd_monitoring, needs_config=False)

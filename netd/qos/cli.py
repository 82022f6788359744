"""``netd qos`` (this host's QoS, or the fabric audit with ``--fabric``) and ``netd bench qos``.

``netd qos`` reads the ports itself when ``--sysfs-root`` is given or the host has RDMA devices (a
local read of sysfs and ``dcb``, no daemon needed); otherwise it asks the running daemon, which on the
emulated fabric reads the emulated host. ``netd qos --fabric`` asks the daemon or ``netd fabric`` at
``--listen`` for ``/v1/qos/fabric``.
"""

from __future__ import annotations

import argparse
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netd.api.client import daemon_get
from netd.config.settings import Config
from netd.errors import DaemonUnreachable, NetdError

__all__ = ["register", "register_bench"]

_HINT = "start one with `netd run` (or `netd fabric` for --fabric), or read a tree with --sysfs-root DIR"


def _read_locally(cfg: Config, root: Path) -> dict[str, Any]:
    from netd.qos.service import QosService

    service = QosService(cfg, root, cfg.host or socket.gethostname())
    service.refresh()
    if service.last_error is not None:
        raise NetdError(f"reading QoS under {root} failed: {service.last_error}")
    return service.document()


def _host_doc(args: argparse.Namespace, cfg: Config) -> dict[str, Any]:
    from netd.sources.sysfs_io import list_dir

    if args.sysfs_root is not None:
        root: Path = args.sysfs_root
        if not list_dir(root / "class" / "infiniband"):
            raise NetdError(f"no RDMA devices in {root}/class/infiniband: no port to show QoS for")
        return _read_locally(cfg, root)
    if list_dir(cfg.sysfs_root / "class" / "infiniband"):
        return _read_locally(cfg, cfg.sysfs_root)
    try:
        doc: dict[str, Any] = daemon_get(
            cfg.listen, "/v1/qos", timeout_s=10.0, hint=_HINT, status_hints={404: "[qos] is off there"}
        ).json()
    except DaemonUnreachable as exc:
        raise NetdError(f"no RDMA devices in {cfg.sysfs_root}/class/infiniband and {exc}") from exc
    return doc


def _cmd_qos(args: argparse.Namespace, cfg: Config) -> int:
    from netd.qos.table import render_fabric, render_host

    if args.fabric_audit:
        doc: dict[str, Any] = daemon_get(
            cfg.listen,
            "/v1/qos/fabric",
            timeout_s=30.0,
            hint=_HINT,
            status_hints={
                404: "no fabric audit there: use `netd fabric`, or `netd run` on the emulated fabric"
            },
        ).json()
        print(json.dumps(doc, indent=2) if args.json else render_fabric(doc), end="\n" if args.json else "")
        return 1 if doc.get("findings") else 0
    doc = _host_doc(args, cfg)
    print(json.dumps(doc, indent=2) if args.json else render_host(doc), end="\n" if args.json else "")
    return 0


def register(sub: Any, common: Callable[..., None]) -> None:
    p = sub.add_parser(
        "qos",
        help="each port's QoS as the NIC applies it (trust, DSCP map, PFC, ECN, MTU); --fabric: drift",
        description="Show every RDMA port's QoS as the NIC applies it: trust mode, DSCP->priority map, PFC "
        "priorities, ETS, buffers, ECN and DCQCN per priority, MTU, RoCE mode, GID index, DCQCN parameters, "
        "what could not be read and why, and local inconsistencies. --fabric shows the fabric audit: the "
        "hosts that differ from the expected profile, each difference and the command to fix it "
        "(exit 1 when a host differs). See docs/qos.md.",
    )
    common(p)
    p.add_argument("--json", action="store_true", help="the full document instead of the table")
    p.add_argument(
        "--fabric",
        dest="fabric_audit",
        action="store_true",
        help="the fabric consistency audit (GET /v1/qos/fabric)",
    )
    p.set_defaults(handler=_cmd_qos, not_config=("sysfs_root",))


def _cmd_bench(args: argparse.Namespace, cfg: Config | None) -> int:
    from netd.qos.bench import bench_qos

    print(json.dumps(bench_qos(hosts=args.hosts, ports_per_host=args.ports, repeat=args.repeat), indent=2))
    return 0


def register_bench(sub: Any) -> None:
    p = sub.add_parser("qos", help="CPU time of the fabric QoS comparison over N hosts")
    p.add_argument("--hosts", type=int, default=4096, metavar="N", help="hosts to compare (default 4096)")
    p.add_argument("--ports", type=int, default=2, metavar="N", help="ports per host (default 2)")
    p.add_argument(
        "--repeat", type=int, default=5, metavar="N", help="runs; the fastest is reported (default 5)"
    )
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd_bench, needs_config=False)

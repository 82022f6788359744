"""netd's command line. Thin: parse, load the config, call one function, print, exit.

Exit status: 0 success; 1 a check or source failed; 2 usage, configuration or
"nothing to show" errors (the message says what to do).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from netd import __version__
from netd.config.settings import Config, load_config
from netd.errors import NetdError

__all__ = ["main"]

EPILOG = """\
examples:
  netd run                              serve on 127.0.0.1:9469 (emulated fabric if no RDMA NIC)
  netd run --listen 0.0.0.0:9469        serve on every address (metrics are read-only)
  netd status                           per-port rates from the running daemon
  netd status --sysfs-root /tmp/capture read a captured /sys tree directly
  netd check                            what each source finds, and why something is missing
  netd fabric --prometheus URL          the cluster view: congestion per ToR/spine, scheduler extender
  netd bench collect --devices 8 --json CPU cost of one collection tick

configuration: --config FILE, or $NETD_CONFIG, or /etc/netd/netd.toml if present;
NETD_<KEY> / NETD_<SECTION>_<KEY> environment variables override the file
(see docs/configuration.md); flags override both.
"""


# Commands and benchmarks that live with their feature: each module defines ``register(sub, common)``
# (a command) or ``register_bench(sub)`` (a `netd bench` entry) and sets ``handler`` on its parser
# with ``set_defaults``. A handler takes ``(args, cfg)`` and returns the exit status.
COMMANDS: tuple[str, ...] = (
    "netd.dashboards.cli",
    "netd.cluster.cli",
    "netd.commands.flows",
    "netd.commands.anomalies",
    "netd.nccl.cli",
    "netd.lab.cli",
    "netd.tuning.cli",
)
BENCHES: tuple[str, ...] = (
    "netd.bench.bpf",
    "netd.bench.detect",
    "netd.bench.footprint",
    "netd.nccl.cli",
    "netd.bench.api",
)


def common_options(p: argparse.ArgumentParser, listen: bool = True) -> None:
    """--config, --sysfs-root and (for commands that talk to a daemon) --listen."""
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML configuration file")
    p.add_argument(
        "--sysfs-root",
        type=Path,
        metavar="DIR",
        help="read this tree instead of /sys (a captured host, a lab host, an emulated host's directory)",
    )
    if listen:
        p.add_argument(
            "--listen", metavar="HOST:PORT", help="the daemon's HTTP listener (default 127.0.0.1:9469)"
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netd",
        description="Per-host RoCE congestion and NIC counter telemetry: ECN, CNP, PFC, retransmits, errors.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"netd {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the daemon: collect every interval, serve /metrics and /v1")
    common_options(run)
    run.add_argument("--interval", type=float, metavar="SECONDS", help="seconds between ticks (default 1)")
    run.add_argument(
        "--fabric",
        choices=("auto", "hardware", "emulated"),
        help="auto (default): hardware when RDMA devices exist, else the emulated fabric",
    )
    run.set_defaults(handler=_cmd_run)

    status = sub.add_parser("status", help="one table of per-port congestion signals")
    common_options(status)
    status.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="sampling interval when reading a tree directly (default 1)",
    )
    status.add_argument("--json", action="store_true", help="the full document: raw counters, totals, rates")
    status.add_argument("--watch", action="store_true", help="refresh every interval until interrupted")
    status.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR set)")
    # --interval and --sysfs-root mean "how to sample directly" here, not daemon settings
    status.set_defaults(handler=_cmd_status, not_config=("interval", "sysfs_root"))

    check = sub.add_parser("check", help="probe every source; exit 1 if a configured source fails")
    common_options(check, listen=False)
    check.set_defaults(handler=_cmd_check)

    bench = sub.add_parser("bench", help="benchmarks (print JSON)")
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    collect = bench_sub.add_parser("collect", help="CPU cost of a collection tick vs a naive reader")
    collect.add_argument(
        "--devices", type=int, default=8, metavar="N", help="dual-port NICs to emulate (2N devices)"
    )
    collect.add_argument("--ticks", type=int, default=200, help="ticks to measure (default 200)")
    collect.add_argument(
        "--sysfs-root", type=Path, metavar="DIR", help="measure this tree instead of building one"
    )
    collect.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    collect.set_defaults(handler=_cmd_bench_collect, needs_config=False)
    for name in BENCHES:
        importlib.import_module(name).register_bench(bench_sub)
    for name in COMMANDS:
        importlib.import_module(name).register(sub, common_options)
    return parser


def _config(args: argparse.Namespace) -> Config:
    skip = getattr(args, "not_config", ())
    overrides: dict[str, Any] = {}
    for key in ("listen", "interval", "fabric", "sysfs_root"):
        value = getattr(args, key, None)
        if value is not None and key not in skip:
            overrides[key] = value
    return load_config(getattr(args, "config", None), overrides=overrides)


def _cmd_run(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.run import serve

    return serve(cfg, log_level="info" if args.verbose else "warning")


def _cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.status import status_source
    from netd.commands.status_table import render_status

    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    while True:
        doc = status_source(cfg, args.sysfs_root, args.interval)
        if args.json:
            print(json.dumps(doc, indent=2, sort_keys=True))
        else:
            if args.watch and colour:
                print("\x1b[2J\x1b[H", end="")
            print(render_status(doc, colour=colour), end="", flush=True)
        if not args.watch:
            return 0
        if args.sysfs_root is None:
            time.sleep(args.interval)


def _cmd_check(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.check import run_checks
    from netd.commands.run import choose_fabric

    lines, failed = run_checks(cfg, cfg.sysfs_root, choose_fabric(cfg).reason)
    for line in lines:
        print(line.render())
    return 1 if failed else 0


def _cmd_bench_collect(args: argparse.Namespace, cfg: Config | None) -> int:
    from netd.bench.collect import bench_collect

    print(
        json.dumps(bench_collect(nics=args.devices, ticks=args.ticks, sysfs_root=args.sysfs_root), indent=2)
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        cfg = _config(args) if getattr(args, "needs_config", True) else None
        handler: Callable[[argparse.Namespace, Config | None], int] = args.handler
        return handler(args, cfg)
    except NetdError as exc:
        print(f"netd: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

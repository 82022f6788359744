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
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from netd import __version__
from netd.api.progress import Progress, add_progress_flag
from netd.config.settings import Config, load_config
from netd.errors import ConfigError, NetdError

__all__ = ["main"]

EPILOG = """\
examples:
  netd run                                serve on 127.0.0.1:9469 (emulated fabric if no RDMA NIC)
  netd run --listen 0.0.0.0:9469          serve on every address (metrics are read-only)
  netd status                             per-port rates from the running daemon (80 columns)
  netd status --wide --device mlx5_0      every PFC priority, received and sent, for one NIC
  netd status --raw --nonzero --grep cnp  the raw counters behind the table
  netd status --sysfs-root /tmp/capture   read a captured /sys tree directly
  netd check --json                       what each source finds, and why something is missing
  netd anomalies --watch                  findings as they open and resolve
  netd fabric --prometheus URL            the cluster view: congestion per ToR/spine, scheduler extender
  netd bench collect --devices 8 --json   CPU cost of one collection tick

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
    "netd.qos.cli",
)
BENCHES: tuple[str, ...] = (
    "netd.bench.bpf",
    "netd.bench.detect",
    "netd.bench.footprint",
    "netd.nccl.cli",
    "netd.bench.api",
    "netd.tuning.bench",
    "netd.qos.cli",
    "netd.kube.bench",
    "netd.dashboards.bench",
)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds")
    return value


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0 (a clear usage error instead of a traceback later)."""
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def non_negative_seconds(text: str) -> float:
    """An argparse type: a number of seconds >= 0 (0 turns the thing off)."""
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or a positive number of seconds")
    return value


def readable_tree(root: Path, what: str = "--sysfs-root") -> Path:
    """``root`` when it is a directory netd can read as a sysfs tree, else a one-line ConfigError.

    An explicit tree that is missing must not quietly read as "no devices": `netd run` would start the
    emulated fabric and `netd status` would say "no RDMA ports found" about a typo.
    """
    try:
        resolved = root.resolve(strict=True)
    except FileNotFoundError:
        raise ConfigError(f"{what} {root}: no such directory") from None
    except RuntimeError:  # pathlib's symlink-loop error
        raise ConfigError(f"{what} {root}: symlink loop") from None
    except OSError as exc:
        raise ConfigError(f"{what} {root}: {exc.strerror or exc}") from None
    if not resolved.is_dir():
        raise ConfigError(f"{what} {root}: not a directory")
    return root


def common_options(p: argparse.ArgumentParser, listen: bool = True, sysfs_root: bool = True) -> None:
    """--config, --sysfs-root (for commands that can read a tree) and --listen (for those that talk to a
    daemon). A command that only asks the daemon takes no --sysfs-root: a flag it would ignore is a lie."""
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML configuration file")
    if sysfs_root:
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
    run.add_argument(
        "--interval", type=positive_seconds, metavar="SECONDS", help="seconds between ticks (default 1)"
    )
    run.add_argument(
        "--calm-interval",
        dest="calm_interval",
        type=non_negative_seconds,
        metavar="SECONDS",
        help="seconds between ticks while the host is calm: no congestion, pause or loss signal, no "
        "open finding (default 5; 0: every --interval always)",
    )
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
        type=positive_seconds,
        default=1.0,
        metavar="SECONDS",
        help="sampling interval when reading a tree directly (default 1)",
    )
    status.add_argument(
        "--json",
        action="store_true",
        help="the full document: raw counters, totals, rates (with --watch: one JSON object per line)",
    )
    status.add_argument(
        "--watch",
        action="store_true",
        help="refresh every interval until interrupted (piped: one timestamped table per refresh)",
    )
    status.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR set)")
    status.add_argument(
        "--wide", action="store_true", help="netdev, speed, Gb/s, CE %% and every PFC priority's rx/tx"
    )
    status.add_argument("--raw", action="store_true", help="every counter of each port with its rate")
    status.add_argument(
        "--nonzero", action="store_true", help="with --raw: only counters that moved or are set"
    )
    status.add_argument("--grep", metavar="REGEX", help="with --raw: only counters whose name matches")
    status.add_argument(
        "--device",
        action="append",
        default=[],
        metavar="NAME",
        help="only this RDMA device or netdev (repeatable)",
    )
    status.add_argument(
        "--port",
        action="append",
        default=[],
        type=int,
        metavar="N",
        help="only this port number (repeatable)",
    )
    # --interval and --sysfs-root mean "how to sample directly" here, not daemon settings
    status.set_defaults(handler=_cmd_status, not_config=("interval", "sysfs_root"))

    check = sub.add_parser("check", help="probe every source; exit 1 if a configured source fails")
    common_options(check, listen=False)
    check.add_argument("--json", action="store_true", help="one JSON document: every line and the verdict")
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
    add_progress_flag(collect)
    collect.set_defaults(handler=_cmd_bench_collect, needs_config=False)
    for name in BENCHES:
        importlib.import_module(name).register_bench(bench_sub)
    for name in COMMANDS:
        importlib.import_module(name).register(sub, common_options)
    return parser


def _config(args: argparse.Namespace) -> Config:
    skip = getattr(args, "not_config", ())
    overrides: dict[str, Any] = {}
    for key in ("listen", "interval", "calm_interval", "fabric", "sysfs_root"):
        value = getattr(args, key, None)
        if value is not None and key not in skip:
            overrides[key] = value
    cfg = load_config(getattr(args, "config", None), overrides=overrides)
    explicit = getattr(args, "sysfs_root", None)
    if explicit is not None:
        readable_tree(explicit)
    elif cfg.sysfs_root != Config.model_fields["sysfs_root"].default:
        readable_tree(cfg.sysfs_root, "sysfs_root")
    return cfg


def _cmd_run(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.run import serve

    # SIGHUP re-reads the file and environment with the same flags (systemd's ExecReload=)
    return serve(cfg, log_level="info" if args.verbose else "warning", reload=lambda: _config(args))


def _cmd_status(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.status import status_source
    from netd.commands.status_raw import render_raw
    from netd.commands.status_table import render_status, select_ports

    if (args.nonzero or args.grep) and not args.raw:
        raise ConfigError("--nonzero and --grep filter the --raw view: add --raw")
    if args.grep:
        try:
            re.compile(args.grep)
        except re.error as exc:
            raise ConfigError(f"--grep {args.grep!r}: {exc}") from None
    tty = sys.stdout.isatty()
    colour = tty and not args.no_color and "NO_COLOR" not in os.environ
    while True:
        doc = status_source(cfg, args.sysfs_root, args.interval)
        ports = select_ports(doc, args.device, args.port)
        if args.json:
            shown = dict(doc, ports=ports)
            # --watch --json is NDJSON: one document per line, for jq and log shippers
            print(
                json.dumps(shown, sort_keys=True)
                if args.watch
                else json.dumps(shown, indent=2, sort_keys=True)
            )
        else:
            if args.watch and tty:
                print("\x1b[2J\x1b[H", end="")
            elif args.watch:  # piped: say when each table was taken
                print(time.strftime("--- %Y-%m-%dT%H:%M:%S%z ---", time.localtime(doc.get("timestamp"))))
            text = (
                render_raw(ports, nonzero=args.nonzero, grep=args.grep)
                if args.raw
                else render_status(doc, colour=colour, wide=args.wide, ports=ports)
            )
            print(text, end="", flush=True)
        if not args.watch:
            return 0 if ports else 2  # nothing to show (no port, or none matches the filter)
        if args.sysfs_root is None:
            time.sleep(args.interval)


def _cmd_check(args: argparse.Namespace, cfg: Config) -> int:
    from netd.commands.check import run_checks
    from netd.commands.run import choose_fabric

    lines, failed = run_checks(cfg, cfg.sysfs_root, choose_fabric(cfg).reason)
    if args.json:
        print(json.dumps({"failed": failed, "checks": [line.to_dict() for line in lines]}, indent=2))
    else:
        for line in lines:
            print(line.render())
    return 1 if failed else 0


def _cmd_bench_collect(args: argparse.Namespace, cfg: Config | None) -> int:
    from netd.bench.collect import bench_collect

    # progress on stderr (a terminal, or --progress); stdout stays one JSON document
    with Progress("netd bench collect", args.ticks, force=args.progress) as progress:
        doc = bench_collect(
            nics=args.devices, ticks=args.ticks, sysfs_root=args.sysfs_root, progress=progress
        )
    print(json.dumps(doc, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C at any point, start-up (imports, first tick) included
        print("netd: interrupted", file=sys.stderr)
        return 130


def _main(argv: Sequence[str] | None) -> int:
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

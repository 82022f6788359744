"""`netd anomalies`: what the running daemon's detectors found — active, recent, and as they change.

Reads ``GET /v1/anomalies`` from the daemon at ``--listen`` (detection needs the daemon's history:
there is no offline mode). ``--watch`` refreshes every ``--interval``: on a terminal it redraws the
table; otherwise it prints one line per finding that opens, changes severity or resolves, which is
what a log or a test wants.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from typing import Any

from netd.api.client import daemon_get
from netd.commands.anomalies_table import ChangeTracker, render_anomalies
from netd.config.settings import Config
from netd.errors import NetdError

__all__ = ["fetch_anomalies", "register"]

EPILOG = """\
examples:
  netd anomalies                          active and recently resolved findings
  netd anomalies --watch                  follow them (one line per change when piped)
  netd anomalies --kind pfc_storm --kind loss --severity critical
  netd anomalies --json                   the full document, evidence included
"""


def fetch_anomalies(listen: str, params: dict[str, Any], timeout_s: float = 2.0) -> dict[str, Any]:
    doc: dict[str, Any] = daemon_get(
        listen,
        "/v1/anomalies",
        params=params,
        timeout_s=timeout_s,
        hint="start it with `netd run` (anomaly detection runs inside the daemon)",
    ).json()
    return doc


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {"status": "active" if args.active else "all", "limit": args.limit}
    if args.kind:
        params["kind"] = args.kind
    if args.severity:
        params["severity"] = args.severity
    for key in ("device", "port", "priority"):
        if getattr(args, key) is not None:
            params[key] = getattr(args, key)
    return params


def _run(args: argparse.Namespace, cfg: Config | None) -> int:
    assert cfg is not None
    if args.interval <= 0:
        raise NetdError("--interval must be > 0")
    tty = sys.stdout.isatty()
    colour = tty and not args.no_color and "NO_COLOR" not in os.environ
    tracker = ChangeTracker()
    while True:
        doc = fetch_anomalies(cfg.listen, _params(args))
        if args.json:
            print(json.dumps(doc, indent=2, sort_keys=True), flush=True)
        elif args.watch and not tty:
            for line in tracker.lines(doc):
                print(line, flush=True)
        else:
            if args.watch:
                print("\x1b[2J\x1b[H", end="")
            width = shutil.get_terminal_size().columns if tty else None
            print(render_anomalies(doc, colour=colour, width=width), end="", flush=True)
        if not args.watch:
            return 0
        time.sleep(args.interval)


def register(sub: Any, common_options: Any) -> None:
    p = sub.add_parser(
        "anomalies",
        help="fabric anomalies the daemon found: PFC storms, congestion, loss, link flaps, ...",
        description="Active and recently resolved anomaly findings from the running daemon, with the "
        "likely cause and the first thing to check (docs/detection.md).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common_options(p, sysfs_root=False)
    p.add_argument("--watch", action="store_true", help="refresh until interrupted (change lines when piped)")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="SECONDS", help="--watch refresh (default 1)"
    )
    p.add_argument("--json", action="store_true", help="the full document, evidence included")
    p.add_argument("--active", action="store_true", help="only active findings")
    p.add_argument("--kind", action="append", metavar="KIND", help="only this kind (repeatable)")
    p.add_argument("--severity", choices=("info", "warning", "critical"), help="this severity or worse")
    p.add_argument("--device", help="only this RDMA device")
    p.add_argument("--port", type=int, help="only this port number")
    p.add_argument("--priority", type=int, help="only this priority")
    p.add_argument("--limit", type=int, default=50, help="at most this many per list (default 50)")
    p.add_argument("--no-color", action="store_true", help="no ANSI colours (also: NO_COLOR set)")
    # --interval is the refresh period here, not the daemon's tick
    p.set_defaults(handler=_run, not_config=("interval",))

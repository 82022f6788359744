"""``netd lab``: up, status, down, run SCENARIO, bench (registered from netd/cli.py's COMMANDS)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from netd.errors import LabError

__all__ = ["register"]

EPILOG = """\
examples:
  sudo netd lab up                          4 hosts, 2 ToRs, 1 spine, 100 Mb/s links, PFC on
  sudo netd lab run incast --senders 8      8 DCQCN flows into h0; prints the summary
  sudo netd lab run all-to-all | victim | storm
  netd run --sysfs-root /run/netd/lab/lab/host0 --listen 127.0.0.1:9470
                                            netd reading lab host h0's counters
  sudo netd lab status --lldp               processes, ports, LLDP neighbours
  sudo netd lab bench --json                the incast benchmark (utilisation, Jain, rate error)
  sudo netd lab down                        remove everything (also after a crash)

See docs/lab.md for what is real (kernel packets, qdiscs, BPF, PFC frames) and what is emulated.
"""


def register(sub: Any, common_options: Any) -> None:
    lab = sub.add_parser(
        "lab",
        help="a virtual RoCE fabric in network namespaces (root)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build a two-tier fabric of network namespaces with real kernel packets: RoCEv2-framed "
        "traffic, RED/ECN congestion points on the switches, CNPs, DCQCN senders, PFC, LLDP.",
    )
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--name", default="lab", help="lab name: namespaces are ndl-<name>-* (default: lab)")
        p.add_argument(
            "--root", type=Path, help="state directory root (default /run/netd/lab or $NETD_LAB_ROOT)"
        )
        p.add_argument("--json", action="store_true", help="JSON output")
        p.set_defaults(needs_config=False)

    up = lab_sub.add_parser("up", help="build the fabric (idempotent)")
    common(up)
    up.add_argument("--hosts", type=int, default=4, help="hosts (default 4)")
    up.add_argument("--tors", type=int, default=2, help="ToR switches (default 2; 2+ adds a spine)")
    up.add_argument(
        "--rate", type=float, default=100.0, metavar="MBPS", help="host link rate in Mb/s (default 100)"
    )
    up.add_argument(
        "--oversubscription", type=float, default=1.0, help="ToR down/up capacity ratio (default 1)"
    )
    up.add_argument("--buffer-kb", type=int, default=2000, help="per-port queue limit in KB (default 2000)")
    up.add_argument("--no-pfc", action="store_true", help="no PFC emulation (queues drop at the limit)")
    up.add_argument("--no-lldp", action="store_true", help="do not start lldpd in the namespaces")
    up.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a DcqcnParams field for the switches (kmin_bytes, kmax_bytes, pmax, xoff_bytes, ...)",
    )
    up.set_defaults(handler=_up)

    status = lab_sub.add_parser("status", help="what exists, what runs, per-port counters")
    common(status)
    status.add_argument("--lldp", action="store_true", help="include every node's LLDP neighbours")
    status.set_defaults(handler=_status)

    down = lab_sub.add_parser(
        "down", help="remove namespaces, links, qdiscs, programs, processes (idempotent)"
    )
    common(down)
    down.add_argument(
        "--all", action="store_true", help="every lab under the root, and every ndl-* namespace"
    )
    down.set_defaults(handler=_down)

    run = lab_sub.add_parser("run", help="run a traffic scenario and print its summary")
    common(run)
    run.add_argument("scenario", choices=("incast", "all-to-all", "victim", "storm"))
    _run_options(run)
    run.set_defaults(handler=_run)

    bench = lab_sub.add_parser(
        "bench", help="incast benchmark: utilisation, fairness, netd's rate error, wire checks (JSON)"
    )
    common(bench)
    bench.add_argument("--senders", type=int, default=8, help="incast senders (default 8)")
    bench.add_argument("--duration", type=float, default=8.0, help="seconds of traffic (default 8)")
    bench.add_argument(
        "--keep", action="store_true", help="leave the lab up afterwards (it is brought up if needed)"
    )
    bench.set_defaults(handler=_bench)


def _run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--senders", type=int, help="incast/victim senders (default 8 / 4)")
    p.add_argument("--duration", type=float, help="seconds of traffic (default 4)")
    p.add_argument(
        "--payload", type=int, default=2048, help="RoCE MTU: payload bytes per packet (default 2048)"
    )
    p.add_argument("--ecn", action="store_true", help="victim: keep ECN marking on (default: PFC only)")
    p.add_argument(
        "--from",
        dest="from_hosts",
        metavar="HOSTS",
        help="incast: senders only on these hosts, e.g. h1 or h1,h2 (default: every other host)",
    )
    p.add_argument(
        "--bottleneck",
        type=float,
        metavar="MBPS",
        help="incast: slow the receiver's ToR port to this rate for the run",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a DcqcnParams field for the reaction/notification points (rp_*, np_*)",
    )


def _root(args: argparse.Namespace) -> Path:
    from netd.lab.state import default_root

    return args.root or default_root()


def _print(args: argparse.Namespace, doc: Any, text: str) -> None:
    print(json.dumps(doc, indent=2, sort_keys=True) if args.json else text, end="" if not args.json else "\n")


def _up(args: argparse.Namespace, _cfg: object) -> int:
    from netd.lab.layout import LabLayout
    from netd.lab.manage import up
    from netd.lab.params import parse_overrides
    from netd.lab.status import lab_status

    try:
        layout = LabLayout(args.name, args.hosts, args.tors, args.rate, args.oversubscription)
    except ValueError as exc:
        raise LabError(str(exc)) from None
    if args.buffer_kb < 10:
        raise LabError("--buffer-kb must be at least 10")
    state, note = up(
        _root(args),
        layout,
        pfc=not args.no_pfc,
        buffer_bytes=args.buffer_kb * 1000,
        overrides=parse_overrides(args.param),
        lldp=not args.no_lldp,
    )
    doc = lab_status(_root(args), args.name)
    doc["result"] = note
    text = f"lab {state.name}: {note} ({state.hosts} hosts, {state.tors} ToRs, {state.link_mbps:g} Mb/s)\n"
    text += "".join(
        f"  {h['host']}: {h['address']} under {h['tor']}, netd --sysfs-root {h['sysfs_root']}\n"
        for h in doc["hosts_detail"]
    )
    _print(args, doc, text)
    return 0


def _status(args: argparse.Namespace, _cfg: object) -> int:
    from netd.lab.status import lab_status, render_status

    doc = lab_status(_root(args), args.name, lldp=args.lldp)
    _print(args, doc, render_status(doc))
    return 0 if doc["up"] else 1


def _down(args: argparse.Namespace, _cfg: object) -> int:
    from netd.lab.manage import down
    from netd.lab.status import list_labs

    names = list_labs(_root(args)) if args.all else [args.name]
    docs = [down(_root(args), name) for name in names]
    if args.all:
        from netd.lab.fabric import remove_namespaces
        from netd.lab.layout import NS_PREFIX

        docs.append(
            {"lab": "*", "namespaces_removed": remove_namespaces([], NS_PREFIX), "processes_stopped": 0}
        )
    text = (
        "".join(
            f"lab {d['lab']}: removed {len(d['namespaces_removed'])} namespaces, "
            f"stopped {d['processes_stopped']} lab daemon(s)\n"
            for d in docs
        )
        or "no labs\n"
    )
    _print(args, docs if args.all else docs[0], text)
    return 0


def _run(args: argparse.Namespace, _cfg: object) -> int:
    from netd.lab.params import lab_params, parse_overrides
    from netd.lab.render import render_summary
    from netd.lab.runner import run_scenario
    from netd.lab.scenarios import build_scenario
    from netd.lab.state import LabState, lab_dir
    from netd.lab.summary import summarize

    root = _root(args)
    state = LabState.load(lab_dir(root, args.name))
    if state is None:
        raise LabError(f"lab {args.name} is not up: run `netd lab up --name {args.name}` first")
    scenario = build_scenario(
        args.scenario,
        state.layout,
        senders=args.senders,
        duration_s=args.duration,
        ecn=args.ecn,
        from_hosts=_hosts(args.from_hosts),
        bottleneck_mbps=args.bottleneck,
    )
    params = lab_params(state.link_mbps, parse_overrides(args.param))
    if not 64 <= args.payload <= 4096:
        raise LabError("--payload must be 64..4096 bytes")
    print(f"running {scenario.name} on lab {args.name} for {scenario.duration_s:g} s ...", file=sys.stderr)
    doc = summarize(run_scenario(root, args.name, scenario, params, payload=args.payload))
    _print(args, doc, render_summary(doc))
    return 0


def _hosts(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(int(h.strip().removeprefix("h")) for h in text.split(",") if h.strip())
    except ValueError:
        raise LabError(f"--from {text!r}: expected host names like h1,h2") from None


def _bench(args: argparse.Namespace, _cfg: object) -> int:
    from netd.lab.bench import lab_bench

    doc = lab_bench(_root(args), args.name, senders=args.senders, duration_s=args.duration, keep=args.keep)
    print(json.dumps(doc, indent=2, sort_keys=True))
    return 0

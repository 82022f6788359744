"""``netd nccl-env``, ``netd nccl-table`` and ``netd bench nccl`` (docs/nccl.md).

``nccl-env`` and ``nccl-table show`` ask the running daemon (GET /v1/nccl/env, /v1/nccl/table);
``nccl-env --sysfs-root DIR`` (or a host with RDMA devices and no daemon) reads the tree directly.
``nccl-table export FILE`` saves the daemon's current table for an operator-pinned job and prints
the two variables every rank needs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from netd.api.client import daemon_get
from netd.config.settings import Config
from netd.errors import DaemonUnreachable, HintTableError, NetdError

__all__ = ["register", "register_bench"]

Common = Callable[..., None]


def _get(listen: str, path: str, params: dict[str, str] | None = None) -> httpx.Response:
    return daemon_get(
        listen,
        path,
        params=params,
        timeout_s=10.0,
        status_hints={404: "[nccl] is not served there (too old a netd?)"},
    )


def _env_locally(cfg: Config, root: Path) -> dict[str, Any]:
    from netd.nccl.nccl_env import recommend
    from netd.series.tracker import SeriesTracker
    from netd.sources.collect import Sampler
    from netd.sources.gids import read_gids
    from netd.sources.sysfs_io import list_dir

    if not list_dir(root / "class" / "infiniband"):
        raise NetdError(f"no RDMA devices in {root}/class/infiniband: nothing to recommend settings for")
    collector = Sampler.from_config(cfg, root)
    try:
        obs = SeriesTracker().update(collector.collect())
    finally:
        collector.close()
    gids = {
        (p.sample.device, p.sample.port): read_gids(root, p.sample.device, p.sample.port) for p in obs.ports
    }
    return recommend(obs, gids, str(cfg.nccl.socket_path()))


def _cmd_env(args: argparse.Namespace, cfg: Config) -> int:
    from netd.nccl.nccl_env import render
    from netd.sources.sysfs_io import list_dir

    if args.sysfs_root is not None:
        doc = _env_locally(cfg, args.sysfs_root)
    else:
        try:
            doc = _get(cfg.listen, "/v1/nccl/env").json()
        except DaemonUnreachable as exc:
            if not list_dir(cfg.sysfs_root / "class" / "infiniband"):
                raise NetdError(
                    f"{exc}, and no RDMA devices in {cfg.sysfs_root}/class/infiniband. Start the daemon "
                    "(`netd run`) or read a captured tree with --sysfs-root DIR."
                ) from exc
            doc = _env_locally(cfg, cfg.sysfs_root)
    fmt = "json" if args.json else args.format
    print(json.dumps(doc, indent=2) if fmt == "json" else render(doc, fmt), end="" if fmt != "json" else "\n")
    return 0


def _print_table(doc: dict[str, Any]) -> None:
    print(f"table {doc['version']}  sha256 {doc['sha256']}  {doc['hint_count']} hints  ({doc['reason']})")
    for h in doc.get("hints", []):
        print(f"  {h['n_nodes']:>5} nodes  {h['collective']:<14} ~{h['bytes']:>12} B  {h['hint']}")


def _show(doc: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(doc, indent=2))
    else:
        _print_table(doc)


def _cmd_table(args: argparse.Namespace, cfg: Config) -> int:
    from netd.nccl.layout import COLLECTIVES, NODE_BUCKETS, node_bucket_nodes, size_bucket_range
    from netd.nccl.table import unpack_table

    if args.action == "export":
        data = _get(cfg.listen, "/v1/nccl/table", {"format": "binary"}).content
        try:
            unpack_table(data)
        except HintTableError as exc:
            raise NetdError(f"the daemon sent an invalid table: {exc}") from exc
        args.file.write_bytes(data)
        sha = hashlib.sha256(data).hexdigest()
        print(f"wrote {args.file} ({len(data)} bytes). Give every rank of the job:")
        print(f"export NETD_TUNER_TABLE={args.file.resolve()}\nexport NETD_TUNER_TABLE_SHA256={sha}")
        return 0
    if args.file is None:
        _show(_get(cfg.listen, "/v1/nccl/table").json(), args.json)
        return 0
    try:
        data = args.file.read_bytes()
        table = unpack_table(data)
    except OSError as exc:
        raise NetdError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    except HintTableError as exc:
        raise NetdError(f"{args.file} is not a valid hint table: {exc} (the plugin would ignore it)") from exc
    hints = [
        {
            "n_nodes": node_bucket_nodes(nb),
            "collective": COLLECTIVES[c],
            "bytes": size_bucket_range(sb)[0],
            "hint": e.describe(),
        }
        for nb in range(NODE_BUCKETS)
        for c, row in enumerate(table.entries[nb])
        for sb, e in enumerate(row)
        if not e.empty
    ]
    doc = {
        "version": f"{table.version:016x}",
        "sha256": hashlib.sha256(data).hexdigest(),
        "hint_count": len(hints),
        "reason": f"file {args.file}",
        "hints": hints,
    }
    _show(doc, args.json)
    return 0


def register(sub: Any, common_options: Common) -> None:
    env = sub.add_parser(
        "nccl-env",
        help="NCCL environment settings for this host (NCCL_IB_HCA, GID index, TC/SL, QPs, the tuner plugin)",
        description="Recommended NCCL settings that the tuner plugin cannot change (NCCL reads them before "
        "the tuner starts), from this host's ports, PFC priorities and GID tables, each with its reason.",
    )
    common_options(env)
    env.add_argument(
        "--format",
        choices=("shell", "conf", "json"),
        default="shell",
        help="shell: export lines (default); conf: /etc/nccl.conf lines; json",
    )
    env.add_argument("--json", action="store_true", help="same as --format json")
    env.set_defaults(handler=_cmd_env, not_config=("sysfs_root",))
    table = sub.add_parser(
        "nccl-table",
        help="show this host's NCCL hint table, decode a table file, or export one to pin a job",
        description="show [FILE]: the daemon's current table (or FILE), with the model's reasons. "
        "export FILE: save the daemon's table for NETD_TUNER_TABLE and print its SHA-256.",
    )
    _table_options(table, common_options)
    # show and export are subcommands, not a positional with an optional FILE after it: argparse
    # cannot give FILE to a positional once an option came between them (`export --listen X FILE`)
    actions = table.add_subparsers(dest="action", required=True, metavar="{show,export}")
    show = actions.add_parser(
        "show",
        help="the daemon's current table, or decode FILE",
        description="The daemon's current table with the model's reasons, or the table in FILE.",
        argument_default=argparse.SUPPRESS,  # options given before `show` are kept
    )
    _table_options(show, common_options)
    show.add_argument("file", nargs="?", type=Path, default=None, help="a table file to decode")
    export = actions.add_parser(
        "export",
        help="save the daemon's table to FILE for NETD_TUNER_TABLE",
        description="Save the daemon's current table to FILE and print the NETD_TUNER_TABLE and "
        "NETD_TUNER_TABLE_SHA256 lines that pin a job to it.",
        argument_default=argparse.SUPPRESS,
    )
    _table_options(export, common_options)
    export.add_argument("file", type=Path, help="where to write the table")
    table.set_defaults(handler=_cmd_table)


def _table_options(p: argparse.ArgumentParser, common_options: Common) -> None:
    """On ``nccl-table`` and on each action, so the options may come before or after it."""
    common_options(p, sysfs_root=False)
    p.add_argument("--json", action="store_true", help="JSON output")


def _cmd_bench(args: argparse.Namespace, cfg: Config | None) -> int:
    from netd.nccl.bench import bench_nccl

    print(json.dumps(bench_nccl(calls=args.calls, repeat=args.repeat), indent=2))
    return 0


def register_bench(sub: Any) -> None:
    p = sub.add_parser(
        "nccl",
        help="ns per getCollInfo of libnccl-tuner-netd.so vs a no-op plugin (builds nccl_plugin/bench)",
    )
    p.add_argument("--calls", type=int, default=10_000_000, help="calls per round (default 10,000,000)")
    p.add_argument("--repeat", type=int, default=5, help="rounds of each plugin, alternating (default 5)")
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd_bench, needs_config=False)
    register_pins_bench(sub)


def _cmd_bench_pins(args: argparse.Namespace, cfg: Config | None) -> int:
    from netd.nccl.bench_pins import bench_pins

    results = bench_pins(args.ranks, args.ranks_per_host, args.timeout_ms, args.rounds)
    print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    return 0


def _ranks(text: str) -> list[int]:
    try:
        return [int(n) for n in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected a rank count or a comma list, e.g. 512,2048,4096: {text!r}"
        ) from exc


def register_pins_bench(sub: Any) -> None:
    p = sub.add_parser(
        "pins",
        help="N ranks of one communicator register against a real pin service (p50/p99, neutral, failures)",
        description="Starts the pin service (the real /v1/nccl router on uvicorn) in a child process and "
        "registers N ranks of one communicator through simulated hosts (netd's own pin client, which "
        "batches a host's ranks), all starting together with the plugin's budget. Prints JSON.",
    )
    p.add_argument("--ranks", type=_ranks, default=[4096], help="ranks, or a comma list (default 4096)")
    p.add_argument("--ranks-per-host", type=int, default=8, help="ranks on one host (default 8)")
    p.add_argument(
        "--timeout-ms", type=int, default=1000, help="each rank's budget (default 1000, the plugin's)"
    )
    p.add_argument(
        "--rounds", type=int, default=3, help="communicators registered one after another (default 3)"
    )
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd_bench_pins, needs_config=False)

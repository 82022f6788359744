"""`netd bench tune-faults`: does any crash or I/O error lose a DCQCN parameter or corrupt the journal?

Against three hosts built in a temporary directory — an upstream debugfs tree, an MLNX_OFED tree
(two NICs each) and the emulated fabric's own host 0 — it runs (:mod:`netd.tuning.torture`):

* ``--kills`` kill trials per host: a real SIGKILL of a child process at a random file operation
  of an apply (and, half the time, of the recovery after it), then recovery and the checks; in a
  quarter of them a recovery first runs with one device file failing, which must stop in the
  documented recovery-needed state (``recovery_needed``) before the final recovery;
* ``--eio`` device-fault trials: EIO, EPERM, EINVAL, ENOSPC or a short write on one device file
  operation; every one must end ``failed`` with every file back (``eio_restored``);
* ``--enospc`` journal trials: ENOSPC while writing the intent, which must be refused before any
  device file is touched (``enospc_refused``), and as many ENOSPC or short writes while appending
  the outcome, which must end ``failed`` with every file back (``enospc_commit_restored``).

The targets are ``lost: 0`` and ``corrupt_history: 0``; the exit status is 1 when they are missed.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from netd.config.settings import Config
from netd.emulated.fabric_host import EmulatedFabric
from netd.errors import BenchError
from netd.tuning.torture import Host, build_host, count_calls, fault_trial, kill_trial

__all__ = ["bench_tune_faults", "register_bench"]


def _hosts(stack: ExitStack, tmp: Path) -> list[Host]:
    hosts = []
    for kind in ("debugfs", "ofed"):
        stack.callback(build_host(tmp / kind, kind).close)
        hosts.append(Host(kind, tmp / kind))
    fabric = EmulatedFabric(tmp / "emulated", tors=1, hosts_per_tor=2, ports_per_host=2, seed=1)
    stack.callback(fabric.close)
    hosts.append(Host("emulated", fabric.host_root(0)))
    return hosts


def bench_tune_faults(*, kills: int = 40, eio: int = 20, enospc: int = 10, seed: int = 1) -> dict[str, Any]:
    """Counts per outcome, summed over the three hosts (``kills`` etc. are per host)."""
    if kills < 1 or eio < 0 or enospc < 0:
        raise BenchError("--kills must be at least 1, --eio and --enospc at least 0")
    rng = random.Random(seed)
    total: Counter[str] = Counter()
    per_host: dict[str, dict[str, int]] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="netd-tune-faults-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        for host in _hosts(stack, root / "hosts"):
            journals = root / "journals" / host.name
            calls = count_calls(host, journals / "count")
            counts: Counter[str] = Counter()
            for i in range(kills):
                counts += kill_trial(host, journals / f"kill-{i}", rng, calls)
            for i in range(eio):
                counts[f"eio_{fault_trial(host, journals / f'eio-{i}', rng, 'device')}"] += 1
            for i in range(enospc):
                counts[f"enospc_{fault_trial(host, journals / f'enospc-{i}', rng, 'journal')}"] += 1
                counts[f"commit_{fault_trial(host, journals / f'commit-{i}', rng, 'commit')}"] += 1
            per_host[host.name] = {**dict(sorted(counts.items())), "call_points": calls}
            total += counts
    hosts = len(per_host)
    return {
        "kills": total["kills"],
        "restored": total["restored"],
        "recovery_needed": total["recovery_needed"],
        "lost": total["lost"],
        "corrupt_history": total["corrupt_history"],
        "eio_cases": eio * hosts,
        "eio_restored": total["eio_restored"],
        "enospc_cases": enospc * hosts,
        "enospc_refused": total["enospc_restored"],
        "recovery_kills": total["recovery_kills"],
        "empty_after_kill": total["empty_after_kill"],
        "enospc_commit_cases": enospc * hosts,
        "enospc_commit_restored": total["commit_restored"],
        "hosts": per_host,
        "seed": seed,
        "wall_s": round(time.monotonic() - started, 1),
    }


def targets_met(doc: dict[str, Any]) -> bool:
    return (
        doc["lost"] == 0
        and doc["corrupt_history"] == 0
        and doc["empty_after_kill"] == 0
        and doc["eio_restored"] == doc["eio_cases"]
        and doc["enospc_refused"] == doc["enospc_cases"]
        and doc["enospc_commit_restored"] == doc["enospc_commit_cases"]
    )


def _cmd(args: argparse.Namespace, cfg: Config | None) -> int:
    doc = bench_tune_faults(kills=args.kills, eio=args.eio, enospc=args.enospc, seed=args.seed)
    print(json.dumps(doc, indent=2))
    return 0 if targets_met(doc) else 1


def register_bench(sub: Any) -> None:
    p = sub.add_parser(
        "tune-faults",
        help="DCQCN applier: SIGKILLs, EIO and ENOSPC at random points; nothing may be lost",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--kills", type=int, default=40, metavar="N", help="kill trials per host (default 40)")
    p.add_argument("--eio", type=int, default=20, metavar="N", help="device faults per host (default 20)")
    p.add_argument("--enospc", type=int, default=10, metavar="N", help="full journals per host (default 10)")
    p.add_argument("--seed", type=int, default=1, help="seed of the kill points and faults (default 1)")
    p.add_argument("--json", action="store_true", help="JSON output (the default; kept for scripts)")
    p.set_defaults(handler=_cmd, needs_config=False)

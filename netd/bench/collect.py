"""`netd bench collect`: CPU cost of one collection tick, against a naive reader.

Builds a realistic tree — N dual-port NICs as mlx5 presents them (2N devices
with one port each, the full PMA and hw_counters sets, an `ethtool -S` capture
per netdev) — or uses an existing tree, then alternates, tick by tick:

* the real sources (netd.sources.collect.Sampler: descriptors kept open, one pread per file), and
* a naive reader (listdir + open/read/close + parse per file, as most exporters do),

over the same files, changing every counter between ticks (the writes are not
timed). CPU time is process time, so other load on the machine matters less
than it would for wall time; the ratio of the two, measured in one run, is
what to compare across machines.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from netd.api.progress import Progress
from netd.emulated.fabric_host import rate_text
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.errors import BenchError
from netd.model.snapshot import CounterGroup
from netd.sources.collect import Sampler
from netd.sources.counter_specs import COUNTER_SETS, describe
from netd.sources.ethtool import format_ethtool_text

__all__ = ["bench_collect", "build_bench_tree", "naive_tick"]


def build_bench_tree(root: Path, nics: int, seed: int = 1) -> tuple[SysfsTree, dict[str, list[str]]]:
    """A tree of ``nics`` dual-port ConnectX NICs; returns the writer and the ethtool names per netdev."""
    tree = SysfsTree(root)
    (root / "ethtool").mkdir(parents=True, exist_ok=True)
    names: dict[str, list[str]] = {}
    for n in range(nics):
        for fn in range(2):
            dev = 2 * n + fn
            netdev = f"ens{n + 1}f{fn}np{fn}"
            tree.add_device(
                DeviceSpec(
                    name=f"mlx5_{dev}",
                    driver="mlx5",
                    netdev=netdev,
                    pci=f"0000:{0x41 + n:02x}:00.{fn}",
                    rate=rate_text(400),
                )
            )
            names[netdev] = mlx5_ethtool_names((3,))
    _churn(tree, root, names, random.Random(seed))
    return tree, names


def _limits(tree: SysfsTree, device: str) -> dict[str, int]:
    """Each counter's register maximum, so generated values fit (a 4-bit PMA counter holds 0..15)."""
    pma = set(COUNTER_SETS["mlx5"].pma)
    return {
        name: describe("mlx5", CounterGroup.PMA if name in pma else CounterGroup.HW, name).raw_max
        for name in tree.counter_names(device, 1)
    }


def _churn(tree: SysfsTree, root: Path, names: dict[str, list[str]], rng: random.Random) -> None:
    """New values for every counter (not timed)."""
    for dev in tree.devices():
        limits = _limits(tree, dev)
        tree.set_counters(dev, 1, {name: rng.randrange(min(top, 1 << 40)) for name, top in limits.items()})
    for netdev, stat_names in names.items():
        (root / "ethtool" / netdev).write_text(
            format_ethtool_text({n: rng.randrange(1 << 40) for n in stat_names})
        )


def naive_tick(root: Path) -> int:
    """Read everything the way a simple exporter does; returns the number of files read."""
    files = 0
    ib = root / "class" / "infiniband"
    for dev in os.listdir(ib):
        for port in os.listdir(ib / dev / "ports"):
            for group in ("counters", "hw_counters"):
                d = ib / dev / "ports" / port / group
                if not d.is_dir():
                    continue
                for name in os.listdir(d):
                    with open(d / name) as f:
                        text = f.read().strip()
                    try:
                        int(text)
                    except ValueError:
                        pass
                    files += 1
    eth = root / "ethtool"
    if eth.is_dir():
        for netdev in os.listdir(eth):
            with open(eth / netdev) as f:
                for line in f.read().splitlines()[1:]:
                    name, _, value = line.rpartition(":")
                    int(value)
            files += 1
    return files


def bench_collect(
    nics: int = 8, ticks: int = 200, sysfs_root: Path | None = None, progress: Progress | None = None
) -> dict[str, Any]:
    if ticks < 1:
        raise BenchError("--ticks must be at least 1")
    # sysfs is memory-backed: build the tree in tmpfs when there is one, so a disk filesystem's
    # journaling and writeback of the (untimed) counter updates do not leak into the timed reads.
    shm = Path("/dev/shm")
    tmp_parent = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="netd-bench-", dir=tmp_parent) as tmp:
        root = sysfs_root or Path(tmp)
        tree, names = (None, {}) if sysfs_root else build_bench_tree(root, nics)
        if not (root / "class" / "infiniband").is_dir():
            raise BenchError(f"{root}/class/infiniband does not exist: not a sysfs-shaped tree")
        collector = Sampler(root, ethtool_backend="files" if (root / "ethtool").is_dir() else "ioctl")
        rng = random.Random(2)
        real_cpu = naive_cpu = 0.0
        files = 0
        try:
            collector.collect()  # warm-up: opens descriptors, lists counter files
            naive_tick(root)
            for i in range(ticks):
                if progress is not None:
                    progress.update(i, "ticks")
                if tree is not None:
                    _churn(tree, root, names, rng)
                t0 = time.process_time()
                snap = collector.collect()
                t1 = time.process_time()
                naive_files = naive_tick(root)
                t2 = time.process_time()
                real_cpu += t1 - t0
                naive_cpu += t2 - t1
                files = collector.rdma.files_read + len(snap.ethtool)
        finally:
            collector.close()
            if tree is not None:
                tree.close()
        devices = len(os.listdir(root / "class" / "infiniband"))
    real_us = real_cpu / ticks * 1e6
    naive_us = naive_cpu / ticks * 1e6
    return {
        "devices": devices,
        "files_per_tick": files,
        "naive_files_per_tick": naive_files,
        "ticks": ticks,
        "cpu_us_per_tick": round(real_us, 1),
        "naive_cpu_us_per_tick": round(naive_us, 1),
        "speedup_vs_naive": round(naive_us / real_us, 2) if real_us else None,
    }

"""What netd's ethtool reads cost on the kernel path (``ETHTOOL_GSTATS`` through SIOCETHTOOL).

The footprint bench replays ``ethtool -S`` captures, which are cheaper to read than a kernel netdev:
a kernel read is three ioctls (count, names, values) and the names are re-read every time (a PFC move
keeps the count). This measures :class:`~netd.sources.ethtool.IoctlStatsReader` on a veth pair with
``queues`` queues (veth: 1 + 9 statistics per queue pair; 16 queues give 145, about an 8-channel mlx5
netdev's count) in a throwaway network namespace: a fast-path read (8 statistics picked), a calm probe
(the count and the values, not the name table; its pause statistics' stand-in taken unparsed,
netd.sources.ethtool_raw), a tick read (the used ones kept), and a calm fast sample of ``netdevs``
probes after a sleep of the fast path's calm interval, which is what a daemon pays between ticks
(work after a sleep runs slower than back to back; one sample a second also re-reads the names). The
NIC's firmware time (mlx5 issues register reads per GSTATS) is not in these figures. Needs root.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from typing import Any

from netd.errors import BenchError, LabError
from netd.lab.netns import in_netns
from netd.sources.ethtool import IoctlStatsReader
from netd.vocabulary.ethtool_names import used

__all__ = ["kernel_reads"]

_A, _B = "nk-a", "nk-b"


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise BenchError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def kernel_reads(
    *, queues: int = 16, netdevs: int = 16, samples: int = 40, calm_s: float = 0.1
) -> dict[str, Any] | None:
    """The figures, or None when this process cannot create a network namespace (not root, no ip)."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return None
    netns = f"netd-kr-{secrets.token_hex(3)}"
    _ip("netns", "add", netns)
    try:
        q = f"numrxqueues {queues} numtxqueues {queues}"
        _ip("-n", netns, *f"link add {_A} {q} type veth peer name {_B} {q}".split())
        _ip("-n", netns, "link", "set", _A, "up")
        try:
            with in_netns(netns):  # the reader's socket, and so its ioctls, belong to the namespace
                reader = IoctlStatsReader()
        except (LabError, OSError) as exc:  # setns refused (a container without CAP_SYS_ADMIN)
            raise BenchError(f"cannot read inside namespace {netns}: {exc}") from exc
        try:
            return _measure(reader, netdevs, samples, calm_s)
        finally:
            reader.close()
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, timeout=30)


def _measure(reader: IoctlStatsReader, netdevs: int, samples: int, calm_s: float) -> dict[str, Any]:
    whole = reader.read(_A)
    if whole.stats is None:
        raise BenchError(f"veth {_A} gave no ethtool statistics: {whole.reason}")
    picked = tuple(list(whole.stats)[-8:])  # 8 names, as the fast path asks of a PFC netdev

    def per_read_us(call: Any, n: int = 2000) -> float:
        start = time.thread_time()
        for _ in range(n):
            call()
        return round((time.thread_time() - start) / n * 1e6, 1)

    pause = picked[:6]  # the ~6 pause statistics whose stand-in a calm sample compares

    def calm_read() -> object:  # a calm sample's probe of one netdev: no name table, compared unparsed
        return reader.token(reader.read_raw(_A, False), pause)

    some = per_read_us(lambda: reader.read_some(_A, picked))
    calm = per_read_us(calm_read)
    kept = per_read_us(lambda: reader.read_kept(_A, used))
    full = per_read_us(lambda: reader.read(_A))
    cpu = 0.0
    for _ in range(samples):
        time.sleep(calm_s)
        start = time.thread_time()
        for _ in range(netdevs):
            calm_read()
        cpu += time.thread_time() - start
    sample_ms = cpu / samples * 1e3
    return {
        "statistics": len(whole.stats),
        "fast_read_us": some,
        "calm_read_us": calm,
        "tick_read_us": kept,
        "whole_read_us": full,
        "netdevs": netdevs,
        "calm_sample_ms_after_sleep": round(sample_ms, 3),
        "calm_cpu_percent": round(sample_ms / calm_s / 10, 3),  # ms per calm interval -> % of a core
        "note": "veth on the running kernel, back-to-back reads except the calm sample (probes: count and "
        "values, compared unparsed, as the fast path's calm samples are); no NIC firmware",
    }

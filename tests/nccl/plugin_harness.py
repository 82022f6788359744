"""Drive libnccl-tuner-netd.so exactly as NCCL does, from Python (ctypes), without NCCL or a GPU.

* ``dlopen(path, RTLD_NOW | RTLD_LOCAL)``, then the versioned symbol: ``ncclTunerPlugin_v6``,
  else ``ncclTunerPlugin_v5`` (NCCL 2.30 looks for v6 first, 2.28 for v5);
* ``init(&ctx, commId, nRanks, nNodes, logger, &nvlDomainInfo, &constants)`` with a 1152-byte
  constants block and a logger that records (level, flags, message);
* ``getCollInfo`` on a *contiguous* float[numAlgo][numProto] cost table passed as ``float**``,
  with ``nChannels`` starting at 0, and NCCL's pick: the strict minimum over entries >= 0, ties to
  the lowest algorithm then protocol.

Run as ``python -m tests.nccl.plugin_harness --comm HEX --ranks N --nodes M`` it is one "rank" in
its own process (the consistency tests start several): it prints its decisions as JSON.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_DIR = ROOT / "nccl_plugin"
PLUGIN = PLUGIN_DIR / "build" / "libnccl-tuner-netd.so"

NCCL_SUCCESS, NCCL_SYSTEM_ERROR, NCCL_INVALID_USAGE = 0, 2, 5
LOG_WARN, LOG_INFO = 2, 3
NCCL_TUNING = 0x40
TREE, RING, NVLS, NVLS_TREE, PAT = 0, 1, 4, 5, 6
ALLREDUCE, ALLGATHER, REDUCESCATTER = 4, 2, 3

# The plugin logs with fmt "netd tuner: %s": on x86-64 a variadic call passes the first variadic
# argument in the next integer register, so a 6-parameter callback receives the message.
LOGGER = ctypes.CFUNCTYPE(
    None, ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p
)
INIT = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.c_uint64,
    ctypes.c_size_t,
    ctypes.c_size_t,
    LOGGER,
    ctypes.c_void_p,
    ctypes.c_void_p,
)
GET_COLL_INFO = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.POINTER(ctypes.c_int),
)
FINALIZE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)


class TunerV5(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("init", INIT),
        ("getCollInfo", GET_COLL_INFO),
        ("finalize", FINALIZE),
    ]


class TunerV6(ctypes.Structure):
    _fields_ = [*TunerV5._fields_, ("getChunkSize", ctypes.c_void_p)]


class NvlDomainInfo(ctypes.Structure):
    _fields_ = [
        ("nNvlDomains", ctypes.c_int),
        ("minRanksPerNvlDomain", ctypes.c_int),
        ("maxRanksPerNvlDomain", ctypes.c_int),
    ]


Constants = ctypes.c_double * (1152 // 8)


def build_plugin() -> Path:
    """``make -C nccl_plugin``: a no-op when the .so is newer than its sources; no test runs a stale build."""
    done = subprocess.run(["make", "-s", "-C", str(PLUGIN_DIR)], capture_output=True, text=True)
    if done.returncode != 0 or not PLUGIN.exists():
        raise RuntimeError(f"building the plugin failed:\n{done.stdout}{done.stderr}")
    return PLUGIN


class Plugin:
    def __init__(self, path: Path = PLUGIN) -> None:
        self.lib = ctypes.CDLL(str(path), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        self.version = 0
        for version, cls in ((6, TunerV6), (5, TunerV5)):
            try:
                self.tuner: TunerV5 = cls.in_dll(self.lib, f"ncclTunerPlugin_v{version}")
            except ValueError:
                continue
            self.version = version
            break
        if not self.version:
            raise RuntimeError(f"{path} exports neither ncclTunerPlugin_v6 nor ncclTunerPlugin_v5")
        self.logs: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()
        self._logger = LOGGER(self._log)  # kept alive as long as the plugin

    def _log(self, level: int, flags: int, file: bytes, line: int, fmt: bytes, arg: bytes | None) -> None:
        text = fmt.decode().replace("%s", (arg or b"").decode(errors="replace"), 1)
        with self._lock:
            self.logs.append((level, flags, text))

    def init(self, comm_id: int, n_ranks: int, n_nodes: int) -> tuple[int, int | None]:
        ctx = ctypes.c_void_p()
        nvl = NvlDomainInfo(n_nodes, max(n_ranks // n_nodes, 1), max(n_ranks // n_nodes, 1))
        constants = Constants()
        rc = self.tuner.init(
            ctypes.byref(ctx),
            comm_id,
            n_ranks,
            n_nodes,
            self._logger,
            ctypes.addressof(nvl),
            ctypes.addressof(constants),
        )
        return rc, ctx.value

    def get_coll_info(
        self, ctx: int | None, coll: int, n_bytes: int, table: list[float], n_algo: int, n_proto: int = 3
    ) -> tuple[int, list[float], int]:
        cells = (ctypes.c_float * (n_algo * n_proto))(*table)
        channels = ctypes.c_int(0)
        rc = self.tuner.getCollInfo(
            ctx, coll, n_bytes, 1, ctypes.addressof(cells), n_algo, n_proto, 0, ctypes.byref(channels)
        )
        return rc, list(cells), channels.value

    def finalize(self, ctx: int | None) -> int:
        return int(self.tuner.finalize(ctx))


def nccl_pick(table: list[float], n_proto: int = 3) -> tuple[int, int] | None:
    """NCCL's topoGetAlgoInfo: strict minimum over entries >= 0 (-1.0 skipped), ties to lowest index."""
    best, best_cost = None, 3.6e9
    for i, cost in enumerate(table):
        if cost == -1.0 or math.isnan(cost):
            continue
        if cost >= 0.0 and cost < best_cost:
            best, best_cost = (i // n_proto, i % n_proto), cost
    return best


def nccl_cost_table(
    coll: int, n_bytes: int, n_nodes: int, ranks_per_node: int, n_algo: int = 7
) -> list[float]:
    """An NCCL-shaped cost table (µs): latency + size / bandwidth per (algorithm, protocol), from NCCL's
    default latencies, 2 x 200 Gb/s per node; -1.0 where NCCL would mark a pair unavailable
    (CollNet without a CollNet plugin, NVLS across nodes, PAT with several GPUs per node, Tree and
    PAT for collectives that do not have them)."""
    table = [-1.0] * (n_algo * 3)
    bytes_per_us = 50e3
    base = {TREE: (6.8, 14.0, 8.4), RING: (6.6, 14.0, 8.4)}
    net = {TREE: (5.0, 8.5, 14.0), RING: (2.7, 4.0, 14.0)}
    eff = (0.5, 120 / 128, 1.0)
    n, log_n = n_nodes, max(1, math.ceil(math.log2(max(n_nodes, 2))))
    for algo in (TREE, RING):
        if algo == TREE and coll != ALLREDUCE:
            continue
        if coll == ALLREDUCE:
            steps, volume = (2 * (n - 1), 2 * (n - 1) / n) if algo == RING else (2 * log_n, 2 / 0.92)
        else:
            steps, volume = n - 1, (n - 1) / n
        for p in range(3):
            table[algo * 3 + p] = (
                base[algo][p] + steps * net[algo][p] + volume * n_bytes / (bytes_per_us * eff[p])
            )
    if n_algo > PAT and coll in (ALLGATHER, REDUCESCATTER) and ranks_per_node == 1:
        table[PAT * 3 + 2] = 8.0 + log_n * 14.0 + (n - 1) / n * n_bytes / bytes_per_us
    return [round(c, 3) if c >= 0 else c for c in table]


SIZES = tuple(1 << k for k in range(6, 35))  # 64 B .. 16 GiB


def decisions(
    plugin: Plugin, ctx: int | None, n_nodes: int, ranks_per_node: int, n_algo: int = 7
) -> list[tuple[int, int, tuple[int, int] | None, int]]:
    """(collective, bytes, NCCL's pick after the plugin, nChannels) for every collective and size."""
    out = []
    for coll in range(5):
        for n_bytes in SIZES:
            table = nccl_cost_table(coll, n_bytes, n_nodes, ranks_per_node, n_algo)
            rc, after, channels = plugin.get_coll_info(ctx, coll, n_bytes, table, n_algo)
            assert rc == NCCL_SUCCESS
            out.append((coll, n_bytes, nccl_pick(after), channels))
    return out


def default_decisions(n_nodes: int, ranks_per_node: int, n_algo: int = 7) -> list[tuple[int, int, Any, int]]:
    """What NCCL picks with no plugin at all."""
    return [
        (coll, n, nccl_pick(nccl_cost_table(coll, n, n_nodes, ranks_per_node, n_algo)), 0)
        for coll in range(5)
        for n in SIZES
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="one NCCL rank's tuner plugin, as a process")
    ap.add_argument("--so", type=Path, default=PLUGIN)
    ap.add_argument("--comm", required=True, help="commId, hex")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--nodes", type=int, required=True)
    args = ap.parse_args(argv)
    plugin = Plugin(args.so)
    t0 = time.monotonic()
    rc, ctx = plugin.init(int(args.comm, 16), args.ranks, args.nodes)
    result: dict[str, Any] = {
        "init": rc,
        "init_s": time.monotonic() - t0,
        "context": ctx is not None,
        "logs": plugin.logs,
        "version": plugin.version,
    }
    if rc == NCCL_SUCCESS:
        result["decisions"] = decisions(plugin, ctx, args.nodes, args.ranks // args.nodes)
        plugin.finalize(ctx)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

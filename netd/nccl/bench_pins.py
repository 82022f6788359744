"""``netd bench pins``: N ranks of one communicator register against a real pin service.

The pin service is the real ``/v1/nccl`` router on uvicorn in its own process (as on the netd that
serves pins). The ranks live in this process: they are grouped into hosts of ``ranks_per_host``,
and each host is a real :class:`~netd.nccl.pin_client.RemotePins` — the daemon's client, which
batches its host's ranks into one request. All ranks start together (NCCL's ranks reach tuner
init together, after a bootstrap barrier) with the plugin's default budget, and each records how
long its verdict took. A healthy run has every rank APPLY with the same generation and table.

What this leaves out: the plugin <-> daemon Unix socket hop (one local round trip per rank, on
each host's own CPU; tests/nccl covers it with the built plugin).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx

from netd.errors import BenchError
from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_wire import PinStatus
from netd.nccl.pins import PinKey, PinVerdict
from netd.nccl.table import HintTable, pack_table
from netd.sources.procfs import proc_stat

__all__ = ["bench_pins", "register_rounds"]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def register_rounds(
    url: str,
    token: str,
    ranks: int,
    ranks_per_host: int,
    timeout_ms: int,
    rounds: int,
    service_cpu: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """``rounds`` communicators of ``ranks`` ranks, one after the other, against the service at ``url``.

    ``service_cpu()``: the service's CPU seconds so far, read once the hosts' connections are open
    and again after the last round (``service_cpu_per_comm_ms``)."""
    n_hosts = -(-ranks // ranks_per_host)
    # Each daemon offers its own table: the same hints, but stamped by its own tick somewhere in the
    # last second, so no two hosts' bytes are equal (as on a real cluster).
    now = time.time_ns()
    tables = [
        pack_table(HintTable(generated_at_ns=now - random.randrange(10**9), valid_for_ms=30_000))
        for _ in range(n_hosts)
    ]
    hosts = [RemotePins(url, token, timeout_ms / 1000, f"host{h:04d}") for h in range(n_hosts)]
    latencies: list[float] = []
    neutral = failures = disagreements = 0
    cpu0 = time.process_time()
    try:
        # Daemons run for days: their connections to the service are open before a job starts.
        await asyncio.gather(*(h.connect() for h in hosts))
        connected_cpu = service_cpu() if service_cpu is not None else 0.0
        for _ in range(rounds):
            key = PinKey(random.getrandbits(64), ranks, n_hosts)

            async def rank(r: int, key: PinKey = key) -> tuple[float, PinVerdict | None]:
                t0 = time.perf_counter()
                try:
                    h = r // ranks_per_host
                    v = await hosts[h].join(
                        key, random.getrandbits(64) | 1, tables[h], budget_s=timeout_ms / 1000
                    )
                except Exception:  # counted, not raised: the figure is how many
                    return time.perf_counter() - t0, None
                return time.perf_counter() - t0, v

            results = await asyncio.gather(*(rank(r) for r in range(ranks)))
            verdicts = [v for _, v in results]
            latencies += [t * 1000 for t, _ in results]
            failures += sum(v is None or v.status is PinStatus.FAIL for v in verdicts)
            neutral += sum(v is not None and v.status is PinStatus.NEUTRAL for v in verdicts)
            # split decisions: some ranks apply a table and others do not, or apply different ones
            applied = {
                (v.generation, v.table) for v in verdicts if v is not None and v.status is PinStatus.APPLY
            }
            disagreements += len(applied) > 1 or (
                len(applied) == 1 and any(v is None or v.status is not PinStatus.APPLY for v in verdicts)
            )
            await asyncio.sleep(0.05)  # let the service settle between communicators
        per_comm_ms = None if service_cpu is None else 1000 * (service_cpu() - connected_cpu) / rounds
    finally:
        await asyncio.gather(*(h.aclose() for h in hosts))
    return {
        "ranks": ranks,
        "hosts": n_hosts,
        "rounds": rounds,
        "timeout_ms": timeout_ms,
        "register_p50_ms": round(_percentile(latencies, 0.50), 1),
        "register_p99_ms": round(_percentile(latencies, 0.99), 1),
        "register_max_ms": round(max(latencies), 1),
        "neutral_fraction": round(neutral / len(latencies), 4),
        "failures": failures,
        "disagreements": disagreements,
        "hosts_cpu_s": round(time.process_time() - cpu0, 2),  # all simulated hosts, this process
        "service_cpu_per_comm_ms": None if per_comm_ms is None else round(per_comm_ms, 1),
    }


def _cpu_s(pid: int) -> float:
    st = proc_stat(pid)
    if st is None:
        raise BenchError(f"the pin service (pid {pid}) is gone")
    return st.cpu_s


def _serve(token: str, window_s: float) -> None:
    """The pin service process: the real router on uvicorn, on a port it picks and prints."""
    import uvicorn
    from fastapi import FastAPI

    from netd.nccl.pins import PinAuthority
    from netd.nccl.routes import nccl_router

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    app = FastAPI()
    app.include_router(nccl_router(token=token, authority=PinAuthority(window_s=window_s)))
    # access_log off as on every netd listener (netd.commands.run): uvicorn formats each access line's
    # arguments before the logger's level is checked
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", backlog=4096, timeout_keep_alive=60
    )
    uvicorn.Server(config).run(sockets=[sock])


def _start_service(token: str, window_s: float) -> tuple[subprocess.Popen[str], str]:
    # its stderr goes to a file: a pipe nobody reads during the run would fill with its warnings
    # (64 KiB) and block the service in its next log write, in the middle of the measurement
    errors = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [sys.executable, "-m", "netd.nccl.bench_pins", "--serve", "--window", str(window_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        env={**os.environ, "NETD_BENCH_PIN_TOKEN": token},
    )
    with errors:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        if not port.isdigit():
            proc.kill()
            proc.wait(timeout=10)
            errors.seek(0)
            said = errors.read().decode(errors="replace")[-500:]
            raise BenchError(f"the pin service did not start (exit status {proc.returncode}): {said}")
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/v1/nccl/pins", timeout=1.0).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise BenchError("the pin service did not answer within 30 s")


def bench_pins(
    ranks: list[int], ranks_per_host: int = 8, timeout_ms: int = 1000, rounds: int = 3
) -> list[dict[str, Any]]:
    if not ranks or min(ranks) < 1 or max(ranks) > 65536:
        raise BenchError("--ranks must be 1..65536")
    if not 1 <= ranks_per_host <= 72 or not 200 <= timeout_ms <= 60_000 or not 1 <= rounds <= 20:
        raise BenchError("--ranks-per-host 1..72, --timeout-ms 200..60000, --rounds 1..20")
    token = secrets.token_hex(16)
    proc, url = _start_service(token, window_s=timeout_ms / 1000)
    try:
        out = []
        for n in ranks:
            before = _cpu_s(proc.pid)
            result = asyncio.run(
                register_rounds(url, token, n, ranks_per_host, timeout_ms, rounds, lambda: _cpu_s(proc.pid))
            )
            result["service_cpu_s"] = round(_cpu_s(proc.pid) - before, 2)
            out.append(result)
        return out
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the pin service process of `netd bench pins`")
    ap.add_argument("--serve", action="store_true", required=True)
    ap.add_argument("--window", type=float, default=1.0)
    args = ap.parse_args(argv)
    _serve(os.environ["NETD_BENCH_PIN_TOKEN"], args.window)
    return 0


if __name__ == "__main__":
    sys.exit(main())

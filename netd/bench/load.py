"""Open-loop HTTP load for `netd bench api`, run as its own process (``python -m netd.bench.load``) so
the load generator does not share the server's interpreter lock.

Requests are scheduled at fixed times (``rate`` per second for ``seconds``) and handed to a pool of
keep-alive connections; each latency is measured from the *scheduled* send time, so a server that
falls behind is charged for the queueing it causes (no coordinated omission). The client is a few
lines of asyncio over raw HTTP/1.1 with a pre-built request, so the generator costs a small fraction
of what it measures. Prints one JSON line: ``{"sent", "errors", "latencies_ms": [...], "elapsed_s"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["main"]


def _request(url: str, body: bytes | None) -> tuple[str, int, bytes]:
    u = urlsplit(url)
    target = u.path + (f"?{u.query}" if u.query else "")
    head = f"{'POST' if body is not None else 'GET'} {target} HTTP/1.1\r\nHost: {u.netloc}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return u.hostname or "127.0.0.1", u.port or 80, (head + "\r\n").encode() + (body or b"")


async def _connection(
    host: str,
    port: int,
    request: bytes,
    todo: asyncio.Queue[float | None],
    latencies: list[float],
    errors: list[int],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while (due := await todo.get()) is not None:
            try:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
            except (OSError, asyncio.IncompleteReadError, ValueError):
                errors[0] += 1
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
                continue
            if status == 200:
                latencies.append((time.perf_counter() - due) * 1000.0)
            else:
                errors[0] += 1
    finally:
        writer.close()


async def _run(
    url: str, rate: float, seconds: float, body: bytes | None, connections: int
) -> dict[str, object]:
    host, port, request = _request(url, body)
    todo: asyncio.Queue[float | None] = asyncio.Queue()
    latencies: list[float] = []
    errors = [0]
    workers = [
        asyncio.create_task(_connection(host, port, request, todo, latencies, errors))
        for _ in range(connections)
    ]
    start = time.perf_counter()
    total = int(rate * seconds)
    for i in range(total):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        todo.put_nowait(due)
    for _ in workers:
        todo.put_nowait(None)
    await asyncio.gather(*workers)
    return {
        "sent": total,
        "errors": errors[0],
        "latencies_ms": latencies,
        "elapsed_s": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netd.bench.load")
    p.add_argument("url")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--body", help="JSON file to POST (default: GET)")
    p.add_argument("--connections", type=int, default=8)
    args = p.parse_args(argv)
    body = Path(args.body).read_bytes() if args.body else None
    json.dump(asyncio.run(_run(args.url, args.rate, args.seconds, body, args.connections)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

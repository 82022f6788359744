"""Open-loop HTTP load for `netd bench api`, run as its own process (``python -m netd.bench.load``) so
the load generator does not share the server's interpreter lock.

Requests are scheduled at fixed times (``rate`` per second for ``seconds``) and handed to a pool of
keep-alive connections, opened before the schedule starts; each latency is measured from the
*scheduled* send time, so a server that falls behind is charged for the queueing it causes (no
coordinated omission). ``--warmup N`` sends N requests per connection first and reports them apart
(``warmup_ms``): what a server pays once after it starts is not its steady latency, and is shown as
such. The client is a few lines of asyncio over raw HTTP/1.1 with a pre-built request, sent and read
without copies, so the generator costs a small fraction of what it measures. Prints one JSON line:
``{"sent", "errors", "latencies_ms": [...], "warmup_ms": [...], "elapsed_s"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
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


class _Exchange:
    """One keep-alive connection that sends a request straight from its bytes and reads the response
    into one reused buffer (``sock_sendall``/``sock_recv_into``, no copy): asyncio's streams copied a
    31 MB request into the transport's buffer and each 256 KB read twice, 35-70 ms of the client's
    CPU per 5000-node filter, which the measurement charged to the server."""

    def __init__(self, sock: socket.socket, expect: int = 1 << 16) -> None:
        self.sock = sock
        # sized for the expected answer and written once, so that its pages are not first touched
        # (a fault per 4 KB) while a measured answer arrives
        self.buf = bytearray(b"\0") * max(expect, 1 << 16)

    @classmethod
    async def connect(cls, host: str, port: int, expect: int = 1 << 16) -> _Exchange:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
        except BaseException:
            sock.close()
            raise
        return cls(sock, expect)

    def _room(self, have: int, want: int) -> memoryview:
        """The buffer past ``have``, at least ``want`` bytes long in all (a new array, reused after)."""
        if len(self.buf) < want:
            bigger = bytearray(want)
            bigger[:have] = memoryview(self.buf)[:have]
            self.buf = bigger
        return memoryview(self.buf)[have:]

    async def exchange(self, request: bytes) -> int:
        """Send ``request``; the status of its response, once all of it is read."""
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(self.sock, request)
        have, end = 0, -1
        while end < 0:  # the head
            got = await loop.sock_recv_into(self.sock, self._room(have, have + (1 << 16)))
            if not got:
                raise ConnectionResetError("the server closed the connection")
            end = self.buf.find(b"\r\n\r\n", max(0, have - 3), have + got)
            have += got
        head = bytes(self.buf[:end])
        status = int(head.split(b" ", 2)[1])
        length = next(
            (
                int(v)
                for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")[1:])
                if k.strip().lower() == b"content-length"
            ),
            0,
        )
        need = end + 4 + length
        while have < need:
            got = await loop.sock_recv_into(self.sock, self._room(have, need)[: need - have])
            if not got:
                raise ConnectionResetError("the server closed the connection")
            have += got
        return status

    def close(self) -> None:
        self.sock.close()


async def _connection(
    conn: _Exchange,
    address: tuple[str, int],
    request: bytes,
    todo: asyncio.Queue[float | None],
    latencies: list[float],
    errors: list[int],
) -> None:
    try:
        while (due := await todo.get()) is not None:
            try:
                status = await conn.exchange(request)
            except (OSError, ValueError, IndexError):
                errors[0] += 1
                conn.close()
                conn = await _Exchange.connect(*address, expect=len(conn.buf))
                continue
            if status == 200:
                latencies.append((time.perf_counter() - due) * 1000.0)
            else:
                errors[0] += 1
    finally:
        conn.close()


async def _warm(conn: _Exchange, request: bytes, count: int) -> list[float]:
    """``count`` requests on ``conn`` before the schedule starts: their latencies, reported apart."""
    took = []
    for _ in range(count):
        t0 = time.perf_counter()
        await conn.exchange(request)
        took.append((time.perf_counter() - t0) * 1000.0)
    return took


async def _run(
    url: str, rate: float, seconds: float, body: bytes | None, connections: int, warmup: int = 0
) -> dict[str, object]:
    host, port, request = _request(url, body)
    todo: asyncio.Queue[float | None] = asyncio.Queue()
    latencies: list[float] = []
    errors = [0]
    # connected before the schedule starts; an answer to a body is about as long as the body (a filter
    # echoes its Node objects)
    conns = [
        await _Exchange.connect(host, port, expect=len(body or b"") + (1 << 16)) for _ in range(connections)
    ]
    warm = [ms for c in conns for ms in await _warm(c, request, warmup)]
    workers = [
        asyncio.create_task(_connection(c, (host, port), request, todo, latencies, errors)) for c in conns
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
        "warmup_ms": warm,
        "elapsed_s": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netd.bench.load")
    p.add_argument("url")
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--body", help="JSON file to POST (default: GET)")
    p.add_argument("--connections", type=int, default=8)
    p.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="requests per connection sent before the schedule starts, reported apart as warmup_ms (0)",
    )
    args = p.parse_args(argv)
    body = Path(args.body).read_bytes() if args.body else None
    json.dump(
        asyncio.run(_run(args.url, args.rate, args.seconds, body, args.connections, args.warmup)), sys.stdout
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

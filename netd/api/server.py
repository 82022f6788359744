"""The HTTP listener both services use (`netd run`, `netd fabric`): socket, uvicorn server, lock sharing,
and the connection limits (netd.api.connections) every netd listener applies."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import anyio.to_thread
import uvicorn

from netd.api.connections import (
    FD_RESERVE,
    ConnectionLimits,
    ConnectionStats,
    accept_overshoot,
    connection_budget,
    protocol_options,
)
from netd.errors import NetdError

__all__ = ["SWITCH_INTERVAL_S", "Server", "bind", "share_interpreter_lock"]

# How long a thread that wants the interpreter lock waits before the holder is asked to let go
# (CPython's default is 5 ms). The listener shares the lock with the tick, the fast path and, in
# `netd fabric`, the cluster re-scoring; every request waits up to this long whenever one of them is
# running Python. 0.5 ms cut `netd bench api`'s p99 from 13-17 ms to 6-12 ms (docs/benchmarks.md).
SWITCH_INTERVAL_S = 0.0005


@contextlib.contextmanager
def share_interpreter_lock() -> Iterator[None]:
    """While serving HTTP beside the loops, hand the interpreter lock over quickly."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


class Server(uvicorn.Server):
    """uvicorn re-raises a captured SIGTERM/SIGINT after shutdown, so the process would die *by* the
    signal before netd's own cleanup runs; netd stops gracefully and exits 0 instead.

    Every netd listener is this server, so each gets the connection limits: ``limits`` (default
    :class:`ConnectionLimits`) with ``max_connections`` capped by the descriptor budget; what they
    refused and timed out is counted in ``connection_stats``."""

    def __init__(self, config: uvicorn.Config, limits: ConnectionLimits | None = None) -> None:
        limits = limits or ConnectionLimits()
        budget = connection_budget(limits.max_connections, FD_RESERVE + accept_overshoot(limits))
        limits = dataclasses.replace(limits, max_connections=budget)
        self.limits = limits
        state = getattr(config.app, "state", None)  # a netd app counts in its own (netd.api.base)
        self.connection_stats = getattr(state, "connection_stats", None) or ConnectionStats()
        for name, value in protocol_options(limits, self.connection_stats).items():
            setattr(config, name, value)
        super().__init__(config)

    # uvicorn's main loop wakes ten times a second to refresh the Date header (once a second) and
    # look at should_exit; on an idle daemon those wake-ups were a tenth of its CPU. This one wakes
    # once a second, and at once when stop() or a signal asks it to.
    MAIN_LOOP_PERIOD_S = 1.0

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.MAIN_LOOP_PERIOD_S)
            counter = (counter + 10) % 864000  # uvicorn's on_tick counts tenths of a second
            should_exit = await self.on_tick(counter)

    def stop(self) -> None:
        """Ask the server to shut down (from any thread); it starts at once, not at its next tick."""
        self.should_exit = True
        self._wake_loop()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._wake_loop()

    def _wake_loop(self) -> None:
        loop, wake = getattr(self, "_loop", None), getattr(self, "_wake", None)
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing to wake
                loop.call_soon_threadsafe(wake.set)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await warm_up(self.config.app)  # before the first client, which would wait for it
        await super().startup(sockets=sockets)
        # asyncio uses one number for the kernel's queue (listen) and for how many connections it
        # accepts per wake-up; the second is kept small (config.backlog = accept_batch) so a burst
        # cannot hold many descriptors past max_connections, and listen() again on the same socket
        # (Linux takes the new length) gives the kernel's queue its own, larger, size
        for sock in sockets or ():
            sock.listen(self.limits.backlog)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


WARM_UP_PATH = "/.netd-warm-up"  # no route: a 404 walks every router of the app


async def warm_up(app: object) -> None:
    """Build what the app's first request would otherwise build while a client waits: FastAPI makes
    each included router's routes on the first request that walks it, and anyio its thread pool
    (and imports its backend) on the first handler that runs in a thread. Measured: the first
    5000-name prioritize took 20-24 ms against 4 ms for the next. Done by one request for a path no
    route has, given to the router directly: no middleware, so it is not counted or logged as a
    request, and the router answers a plain 404 (not an exception) to a scope without ``app``."""
    router = getattr(app, "router", None)
    if router is None:
        return
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": WARM_UP_PATH,
        "raw_path": WARM_UP_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: object) -> None:
        pass

    await router(scope, receive, send)
    await anyio.to_thread.run_sync(int)


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything else starts, so a busy port fails fast and clearly.

    The protocol is named (IPPROTO_TCP, not the default 0) because asyncio sets TCP_NODELAY on an
    accepted connection only when its socket says it is TCP. Without it, a response written as head
    and body waits for the client's delayed ACK: every request after the first on a keep-alive
    connection took ~40 ms, which capped each connection at ~23 requests/s.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets too
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise NetdError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock

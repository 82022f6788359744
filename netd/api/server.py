"""The HTTP listener both services use (`netd run`, `netd fabric`): socket, uvicorn server, lock sharing,
and the connection limits (netd.api.connections) every netd listener applies."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import socket
import sys
import threading
from collections.abc import Iterator

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

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
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

"""Connection hygiene for the HTTP listener: bounded connections and deadlines per request.

uvicorn closes a keep-alive connection that stays idle after a response, but a connection that never
sends a request, or sends its head or body a byte at a time, stays open for as long as the client
likes; ~900 of them once exhausted the daemon's 1024 file descriptors, after which neither /healthz
nor the collector could open anything. This protocol (uvicorn's httptools one, plus):

* counts open connections and, past ``max_connections``, first closes the longest *idle* one (no
  request in progress: silent since accept, mid-head, or kept alive after a response), so silent clients
  cannot lock out a liveness probe; when none is idle it answers the new one ``503`` with
  ``Retry-After`` and closes it at once, so refused clients hold a descriptor for microseconds;
  ``max_connections`` is kept below the process's descriptor limit minus a reserve for the collector,
  the tuner and the NCCL socket (:func:`connection_budget`), so clients never take the last ones;
* gives each request head ``head_timeout_s`` from the connection (or the previous response) and
  each body ``body_timeout_s`` from the end of its head, as hard deadlines that trickled bytes do not
  extend; an expired connection is closed;
* counts requests that are not HTTP (answered 400 and closed by uvicorn) and logs them at most once
  per ``invalid_log_every_s`` with the count since the last line: uvicorn logs one warning per such
  request, so a flood of garbage grew the log without bound.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from asyncio import TimerHandle, Transport
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = [
    "ConnectionLimits",
    "ConnectionStats",
    "accept_overshoot",
    "InvalidRequestLog",
    "connection_budget",
    "guarded_protocol",
]

FD_RESERVE = 256  # descriptors kept for everything but HTTP clients (sysfs, netlink, BPF, sockets, logs)
# Accepted sockets beyond max_connections, at most, in batches of accept_batch: the batch being
# accepted, the one whose transports are being made, the one whose connection_made is running (and
# refusing or evicting), and the one being closed (a close takes effect a loop turn later).
ACCEPT_BATCHES_IN_FLIGHT = 4


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1024
    head_timeout_s: float = 10.0  # from accept (or the previous response) to a complete request head
    body_timeout_s: float = 30.0  # from the head to the last body byte (25 MB at >= ~1 MB/s)
    keep_alive_s: int = 5  # idle between requests on a kept-alive connection (uvicorn's own timer)
    retry_after_s: int = 1
    # the kernel's queue of connections not yet accepted (a burst of NCCL ranks or scheduler
    # threads waits here, not in a SYN retry a second later)
    backlog: int = 128
    # asyncio accepts up to this many connections per wake-up before any of them is looked at, and
    # the protocol only sees (and can refuse or evict for) a connection two loop turns after its
    # accept: see ACCEPT_BATCHES_IN_FLIGHT. uvicorn's default of 2048 let 2000 simultaneous clients
    # hold 1465 descriptors for a moment; 128 (the old value, shared with the kernel's queue) let
    # max_connections + ~500 be open at once.
    accept_batch: int = 32
    invalid_log_every_s: float = 60.0  # at most one log line about non-HTTP requests per this long


@dataclass
class ConnectionStats:
    """Counted by the protocol, read by /metrics (netd_http_connections_*)."""

    refused: int = 0
    evicted: int = 0
    timed_out: int = 0
    open: int = 0
    invalid: int = 0  # requests that were not HTTP


def accept_overshoot(limits: ConnectionLimits) -> int:
    """How many descriptors past ``max_connections`` a burst of connections can hold at once."""
    return ACCEPT_BATCHES_IN_FLIGHT * limits.accept_batch


def connection_budget(wanted: int, reserve: int = FD_RESERVE) -> int:
    """``wanted``, capped so that clients (and a burst of accepts, :func:`accept_overshoot`, part of
    ``reserve``) leave ``reserve`` descriptors free. Raises the soft limit to
    the hard one first (systemd's default soft limit is 1024 while the hard one is 512K)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # keep the soft limit we have
    return max(16, min(wanted, soft - reserve))


def _refusal(retry_after_s: int) -> bytes:
    body = json.dumps(
        {
            "type": "urn:netd:problem:unavailable",
            "title": "Service Unavailable",
            "status": 503,
            "detail": "too many open connections; retry later",
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\n"
        f"retry-after: {retry_after_s}\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


INVALID = "Invalid HTTP request received."  # uvicorn's message (httptools_impl.data_received)


class InvalidRequestLog:
    """Stands in for uvicorn's ``uvicorn.error`` logger on netd's connections: every call passes
    through, except uvicorn's warning about a request that is not HTTP, which is counted in
    ``stats.invalid`` and logged at most once per ``every_s`` (with how many there were)."""

    def __init__(
        self,
        stats: ConnectionStats,
        every_s: float,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats, self.every_s, self.clock = stats, every_s, clock
        self.logger = logger or logging.getLogger("uvicorn.error")
        self._last_line: float | None = None
        self._unlogged = 0

    def warning(self, msg: object, *args: Any, **kwargs: Any) -> None:
        if msg != INVALID:
            self.logger.warning(msg, *args, **kwargs)
            return
        self.stats.invalid += 1
        self._unlogged += 1
        now = self.clock()
        if self._last_line is None or now - self._last_line >= self.every_s:
            self.logger.warning(
                "%d invalid HTTP requests received (answered 400 and closed; logged at most once per %g s)",
                self._unlogged,
                self.every_s,
            )
            self._last_line, self._unlogged = now, 0

    def __getattr__(self, name: str) -> Any:  # level, log, error, info, ...: uvicorn's logger's own
        return getattr(self.logger, name)


def guarded_protocol(limits: ConnectionLimits, stats: ConnectionStats) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``limits`` (a class: uvicorn instantiates it per connection)."""
    refusal = _refusal(limits.retry_after_s)
    invalid_log = InvalidRequestLog(stats, limits.invalid_log_every_s)

    class GuardedHttp(HttpToolsProtocol):
        _deadline: TimerHandle | None = None
        _idle_since: float | None = None  # loop time since no request is in progress

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.logger = invalid_log  # type: ignore[assignment]

        def connection_made(self, transport: Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections and not self._evict_idle():
                stats.refused += 1
                transport.write(refusal)
                transport.close()
                return
            stats.open = len(self.connections)
            self._idle_since = self.loop.time()
            self._arm(limits.head_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)
            stats.open = len(self.connections)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._idle_since = None
            self._arm(limits.body_timeout_s)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._disarm()  # the app may take its time (a pin waits for its window); the client may not

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._idle_since = self.loop.time()
                self._arm(limits.head_timeout_s)

        def _evict_idle(self) -> bool:
            """Close the connection idle the longest (its request, if any, has not begun to arrive
            or was answered); the youngest ones usually have a request waiting to be read."""
            oldest: tuple[float, Transport] | None = None
            for other in self.connections:
                since = getattr(other, "_idle_since", None)
                if other is self or since is None or other.transport.is_closing():
                    continue
                if oldest is None or since < oldest[0]:
                    oldest = (since, other.transport)
            if oldest is None:
                return False
            stats.evicted += 1
            oldest[1].close()
            return True

        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                stats.timed_out += 1
                self.transport.close()

    return GuardedHttp


def protocol_options(limits: ConnectionLimits, stats: ConnectionStats) -> dict[str, Any]:
    """uvicorn.Config attributes that apply ``limits``."""
    return {
        "http": guarded_protocol(limits, stats),
        "timeout_keep_alive": limits.keep_alive_s,
        "backlog": limits.accept_batch,  # asyncio's batch; Server re-listens with limits.backlog
    }

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
  extend; an expired connection is closed.
"""

from __future__ import annotations

import json
import resource
from asyncio import TimerHandle, Transport
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["ConnectionLimits", "ConnectionStats", "connection_budget", "guarded_protocol"]

FD_RESERVE = 256  # descriptors kept for everything but HTTP clients (sysfs, netlink, BPF, sockets, logs)


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 1024
    head_timeout_s: float = 10.0  # from accept (or the previous response) to a complete request head
    body_timeout_s: float = 30.0  # from the head to the last body byte (25 MB at >= ~1 MB/s)
    keep_alive_s: int = 5  # idle between requests on a kept-alive connection (uvicorn's own timer)
    retry_after_s: int = 1
    # asyncio accepts up to this many connections per wake-up before any is looked at (uvicorn's
    # default of 2048 let 2000 simultaneous clients hold 1465 descriptors for a moment); it is also
    # the kernel's queue of connections not yet accepted
    backlog: int = 128


@dataclass
class ConnectionStats:
    """Counted by the protocol, read by /metrics (netd_http_connections_*)."""

    refused: int = 0
    evicted: int = 0
    timed_out: int = 0
    open: int = 0


def connection_budget(wanted: int, reserve: int = FD_RESERVE) -> int:
    """``wanted``, capped so that clients (and a backlog's burst of accepts, part of ``reserve``)
    leave ``reserve`` descriptors free. Raises the soft limit to
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


def guarded_protocol(limits: ConnectionLimits, stats: ConnectionStats) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``limits`` (a class: uvicorn instantiates it per connection)."""
    refusal = _refusal(limits.retry_after_s)

    class GuardedHttp(HttpToolsProtocol):
        _deadline: TimerHandle | None = None
        _idle_since: float | None = None  # loop time since no request is in progress

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
        "backlog": limits.backlog,
    }

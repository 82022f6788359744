"""Link events from the kernel: carrier changes and removals, event-driven over rtnetlink.

A thread blocks on an ``RTMGRP_LINK`` netlink socket (pyroute2) and a stop pipe, so it costs nothing
while links are quiet and hears a flap the moment the kernel does — a link that drops and comes back
between two counter reads is not missed. RTM_NEWLINK carries carrier and operstate but not the
speed, so the speed is read from ``<sysfs_root>/class/net/<netdev>/speed`` when an event arrives
(absent when unknown, e.g. -1 with no carrier). The kernel repeats RTM_NEWLINK for unrelated
changes; deciding what is a *transition* is the detector's job.

``netns``: listen in that network namespace (by name) instead of netd's own: tests use it with a
namespace they create.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netd.errors import SourceError
from netd.sources.sysfs_io import read_text

__all__ = ["LinkEvent", "LinkMonitor"]

log = logging.getLogger(__name__)
_MAX_QUEUED = 4096  # a storm of events between two drains keeps the newest
_RECV_BYTES = 1 << 16  # one netlink datagram (RTM_NEWLINK batches are a few KiB)


@dataclass(frozen=True, slots=True)
class LinkEvent:
    netdev: str
    monotonic: float
    timestamp: float
    carrier: bool | None
    operstate: str | None
    speed_mbps: int | None
    removed: bool = False


class LinkMonitor:
    def __init__(self, sysfs_root: Path = Path("/sys"), netns: str | None = None) -> None:
        self.sysfs_root = sysfs_root
        self.netns = netns
        self._events: deque[LinkEvent] = deque(maxlen=_MAX_QUEUED)
        self._lock = threading.Lock()
        self._stop_r, self._stop_w = os.pipe()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="netd-netlink", daemon=True)
        self.received = 0

    def start(self, timeout_s: float = 5.0) -> None:
        """Open the socket (in the thread, so a netns switch never touches other threads) and listen."""
        self._thread.start()
        if not self._ready.wait(timeout_s) or self._error is not None:
            self.close()
            raise SourceError("netlink", f"cannot listen for link events: {self._error or 'timed out'}")

    def pending(self) -> bool:
        """Whether events wait to be drained (without draining them)."""
        with self._lock:
            return bool(self._events)

    def drain(self) -> list[LinkEvent]:
        with self._lock:
            out = list(self._events)
            self._events.clear()
        return out

    def close(self) -> None:
        if self._stop_w >= 0:
            os.write(self._stop_w, b"x")
            if self._thread.is_alive():
                self._thread.join(2.0)
            os.close(self._stop_w)
            os.close(self._stop_r)
            self._stop_w = self._stop_r = -1

    def _open(self) -> Any:  # pyroute2's IPRoute (untyped)
        from pyroute2 import IPRoute
        from pyroute2.netlink.rtnl import RTMGRP_LINK

        if self.netns is None:
            ipr = IPRoute()
        else:  # setns(2) applies to this thread only; never create the namespace (flags=0)
            from pyroute2.netns import setns

            home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                setns(self.netns, flags=0)
                try:
                    ipr = IPRoute()
                finally:
                    setns(home)
            finally:
                os.close(home)
        ipr.bind(groups=RTMGRP_LINK)
        return ipr

    def _run(self) -> None:
        try:
            ipr = self._open()
        except Exception as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                readable, _, _ = select.select([ipr.fileno(), self._stop_r], [], [])
                if self._stop_r in readable:
                    return
                # Read the datagram ourselves: pyroute2's get() returns one message and keeps the rest
                # of a batch in its own buffer, where select() cannot see it (events would then wait
                # for the next, unrelated, netlink message).
                data = os.read(ipr.fileno(), _RECV_BYTES)
                for msg in ipr.marshal.parse(data):
                    self._on_message(msg)
        except Exception:
            log.exception("netlink link monitor stopped")
        finally:
            ipr.close()

    def _on_message(self, msg: Any) -> None:
        event = msg.get("event")
        if event not in ("RTM_NEWLINK", "RTM_DELLINK"):
            return
        name = msg.get_attr("IFLA_IFNAME")
        if not name:
            return
        carrier = msg.get_attr("IFLA_CARRIER")
        removed = event == "RTM_DELLINK"
        speed = None if removed else self._speed(name)
        ev = LinkEvent(
            name,
            time.monotonic(),
            time.time(),
            None if carrier is None else bool(carrier),
            msg.get_attr("IFLA_OPERSTATE"),
            speed,
            removed,
        )
        with self._lock:
            self._events.append(ev)
            self.received += 1

    def _speed(self, netdev: str) -> int | None:
        if self.netns is not None:
            return None  # /sys shows netd's own namespace, not the monitored one
        try:
            text = read_text(self.sysfs_root / "class" / "net" / netdev / "speed", source="netlink")
            value = int(text) if text is not None else -1
        except (SourceError, ValueError):  # EIO and friends, or garbage: the event still counts
            return None
        return value if value > 0 else None

"""systemd's service notification protocol (sd_notify(3)), spoken directly: no libsystemd binding.

``Type=notify`` units hand the service a datagram socket in ``$NOTIFY_SOCKET`` (a path, or an
abstract name written ``@name``); the service sends ``KEY=VALUE`` lines to it. netd sends
``READY=1`` after its first tick, ``RELOADING=1`` and ``READY=1`` around a SIGHUP reload,
``STOPPING=1`` on the way out, and ``WATCHDOG=1`` only while ticks keep coming: with
``WatchdogSec=`` set, systemd kills and restarts a daemon whose loop has stalled even though its
HTTP listener still answers. Outside systemd (no ``$NOTIFY_SOCKET``) every call is a no-op.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

__all__ = ["Notifier", "WatchdogPinger", "watchdog_interval_s"]

log = logging.getLogger(__name__)


def _address(name: str) -> str | bytes:
    # A leading '@' names a socket in the abstract namespace, which the kernel spells with a NUL.
    return b"\0" + name[1:].encode() if name.startswith("@") else name


class Notifier:
    """Sends notification lines to ``$NOTIFY_SOCKET``; silently nothing when there is none.

    A send that fails (systemd gone, socket full) is logged once and never raised: readiness
    reporting must not take the daemon down.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        name = env.get("NOTIFY_SOCKET", "")
        self.enabled = name.startswith(("@", "/"))
        self._address = _address(name) if self.enabled else ""
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._warned = False

    def send(self, *lines: str) -> bool:
        """Send ``KEY=VALUE`` lines in one datagram; True when it was delivered."""
        if not self.enabled:
            return False
        payload = "\n".join(lines).encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.sendto(payload, self._address)
                return True
            except OSError as exc:
                if not self._warned:
                    log.warning("sd_notify to %r failed: %s", self._address, exc)
                    self._warned = True
                return False

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def reloading(self) -> bool:
        # MONOTONIC_USEC lets systemd (>= 253, Type=notify-reload) tell this reload from a later one.
        return self.send(
            "RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"
        )

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """Half of ``$WATCHDOG_USEC`` (sd_watchdog_enabled(3) advises pinging at least that often), or
    None when the watchdog is off or meant for another process (``$WATCHDOG_PID``)."""
    env = os.environ if environ is None else environ
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid != str(os.getpid()):
        return None
    return int(usec) / 2e6


class WatchdogPinger:
    """Sends ``WATCHDOG=1`` every ``interval_s`` while ``healthy()`` holds.

    ``healthy`` is the daemon's tick freshness (the same rule as ``/readyz``): a loop that stopped
    ticking stops the pings, so systemd's ``WatchdogSec=`` restarts the service. A pinger with
    ``interval_s=None`` never starts.
    """

    def __init__(self, notifier: Notifier, interval_s: float | None, healthy: Callable[[], bool]) -> None:
        self.notifier = notifier
        self.interval_s = interval_s
        self.healthy = healthy
        self.pings = 0
        self.skipped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> bool:
        """One watchdog decision: ping when healthy, else hold back (and say why, once per stall)."""
        if self.healthy():
            if self.notifier.send("WATCHDOG=1"):
                self.pings += 1
            return True
        if self.skipped == 0 or self.pings > 0:
            log.warning("tick loop stalled: withholding the systemd watchdog ping")
        self.skipped += 1
        self.pings = 0
        return False

    def start(self) -> None:
        if self.interval_s is None or not self.notifier.enabled:
            return
        interval = self.interval_s
        self._thread = threading.Thread(target=self._run, args=(interval,), name="netd-watchdog", daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

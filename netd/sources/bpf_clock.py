"""Kernel ticks (jiffies) to wall-clock time, for the probes' first/last-seen stamps.

The packet programs stamp flows with ``bpf_jiffies64()`` because the verifier inlines it (a load),
while every clock helper is a real call that would cost more than the whole parser (docs/ebpf.md).
``/proc/timer_list`` prints ``now at <CLOCK_MONOTONIC ns>`` and ``jiffies: <n>`` from one read, which
pins ticks to the monotonic clock; the tick rate (CONFIG_HZ) comes from the kernel configuration, or
is measured from two reads and rounded to the nearest rate Linux offers.
"""

from __future__ import annotations

import gzip
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["JiffiesClock", "read_timer_list"]

TIMER_LIST = Path("/proc/timer_list")
HZ_CHOICES = (100, 250, 300, 1000)
_NOW = re.compile(rb"^now at (\d+) nsecs$", re.M)
_JIFFIES = re.compile(rb"^jiffies: (\d+)$", re.M)


def read_timer_list(path: Path = TIMER_LIST) -> tuple[int, int] | None:
    """(CLOCK_MONOTONIC ns, jiffies) at one instant, or None when the file is absent or unreadable."""
    try:
        with open(path, "rb") as f:
            buf = b""
            while True:  # the jiffies line follows the first CPU's timers; stop reading there
                chunk = f.read(4096)
                buf += chunk
                now, jif = _NOW.search(buf), _JIFFIES.search(buf)
                if now and jif:
                    return int(now.group(1)), int(jif.group(1))
                if not chunk:
                    return None
    except OSError:
        return None


def config_hz(release: str | None = None) -> int | None:
    """CONFIG_HZ of the running kernel from /proc/config.gz or /boot/config-<release>."""
    release = release or os.uname().release
    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{release}"), open)):
        try:
            with opener(path, "rt") as f:
                for line in f:
                    if line.startswith("CONFIG_HZ="):
                        return int(line.split("=", 1)[1])
        except (OSError, ValueError):
            continue
    return None


class JiffiesClock:
    """Converts jiffies to wall time. ``available`` is False when the kernel offers no anchor."""

    def __init__(
        self,
        sample: Callable[[], tuple[int, int] | None] = read_timer_list,
        hz: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._sample = sample
        first = sample()
        self.hz = hz or config_hz()
        if first is not None and self.hz is None:
            sleep(0.2)
            second = sample()
            if second is not None and second[0] > first[0]:
                rate = (second[1] - first[1]) / ((second[0] - first[0]) / 1e9)
                self.hz = min(HZ_CHOICES, key=lambda h: abs(h - rate))
        self.available = first is not None and self.hz is not None

    def converter(self) -> Callable[[int], float | None]:
        """A function jiffies -> wall-clock seconds, anchored now (call once per scan)."""
        anchor = self._sample() if self.available else None
        if anchor is None or not self.hz:
            return lambda _j: None
        mono_ns, jiffies = anchor
        hz = self.hz
        # wall = now_wall - (now_mono - t_mono); t_mono = mono_ns - (jiffies - j) / hz
        offset = time.time() - time.monotonic() + mono_ns / 1e9
        return lambda j: None if j == 0 else offset - (jiffies - j) / hz

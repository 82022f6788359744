"""Stopping the processes tests start, the way systemd stops a service: SIGTERM, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM ``proc`` if it still runs, wait up to ``timeout`` seconds (draining its pipes), then kill."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()

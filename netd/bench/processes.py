"""Ending a benchmark's child process: SIGTERM, a grace period, then SIGKILL (always reaped)."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["terminate"]


def terminate(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """Ask ``proc`` to stop and wait ``grace_s`` for it; kill it if it is still there."""
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

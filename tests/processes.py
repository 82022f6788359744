"""The processes tests start: :class:`Child` (stderr to a file, never to an unread pipe),
:func:`wait_ready` (polls a listener until it answers) and :func:`stop`, the way systemd stops a
service: SIGTERM, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from typing import Any

import httpx


class Child(subprocess.Popen[str]):
    """A process a test starts, with its stderr in a temporary file: a test reads a pipe only when
    it fails, and a child that writes more than a pipe holds (64 KiB: ~15 tracebacks) blocks in its
    next write, so a listener stops answering and the test reports that instead of the cause.
    stdout is discarded unless ``stdout`` says otherwise; text mode."""

    def __init__(self, args: Sequence[str], **kwargs: Any) -> None:
        self._stderr_file = tempfile.TemporaryFile()
        weakref.finalize(self, self._stderr_file.close)
        kwargs.setdefault("stdout", subprocess.DEVNULL)
        super().__init__(args, stderr=self._stderr_file, text=True, **kwargs)

    def stderr_text(self, tail: int = 20_000) -> str:
        """The last ``tail`` characters the child wrote to stderr so far."""
        size = os.fstat(self._stderr_file.fileno()).st_size
        data = os.pread(self._stderr_file.fileno(), tail * 4, max(0, size - tail * 4))
        return data.decode(errors="replace")[-tail:]


def wait_ready(url: str, proc: Child, timeout_s: float = 60.0, path: str = "/readyz") -> None:
    """Poll ``url + path`` until it answers 200; fail with the child's stderr if it exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args!r} exited early ({proc.returncode}): {proc.stderr_text()}")
        try:
            if httpx.get(url + path, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url}{path} did not answer 200 within {timeout_s:g} s: {proc.stderr_text()}")


def stop(proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """SIGTERM ``proc`` if it still runs, wait up to ``timeout`` seconds (draining its pipes), then kill."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()

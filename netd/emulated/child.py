"""The emulated fabric in a process of its own, driven in lockstep by the daemon.

Why a process: the emulator is netd's stand-in for NIC hardware, and simulating the fabric is numpy
work that holds the interpreter lock: ~60 ms of CPU per tick and ~12 ms per PFC fast-path sample on
the default fabric. Inside the daemon's process that time is taken from the HTTP listener, whose
requests then wait for the lock (docs/benchmarks.md, `netd bench api`). Real NICs count in their own
silicon; the emulator counts in its own process, on the other core.

Lockstep keeps the daemon's semantics exact: :meth:`EmulatorProcess.advance` returns only once the
child has simulated the slice and rewritten the trees, so a tick reads exactly what an in-process
emulator would have rendered. The wait is a blocking pipe read, which releases the interpreter lock.

Protocol (one JSON object per line): the child starts with ``{"ready": n_hosts}`` or
``{"error": message}``; each ``{"advance": [wall_s, sim_ms, render]}`` is answered by ``{"ok": true}``
or ``{"error": message}``. End of input ends the child (so it never outlives the daemon, even a
killed one); it ignores SIGINT and SIGTERM, so a Ctrl-C in the terminal or systemd's SIGTERM to the
whole process group stops the daemon first, which then closes the pipe.

Supervision: a child that dies (killed, out of memory) is restarted by the next :meth:`advance`
after a backoff (0.5 s doubling to 30 s); until then, and while a restart fails, :meth:`advance`
raises :class:`~netd.errors.NetdError` at once, which the daemon reports as its ``emulator`` source
being down. A restarted fabric starts from zero, as a NIC does after a reset.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from netd.emulated.fabric_host import EmulatedFabric, host_name, host_root
from netd.errors import NetdError

__all__ = ["EmulatorProcess", "main"]

_CLOSE_TIMEOUT_S = 10.0
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0)  # waits before restart attempts 1, 2, ... (then 30 s)


class _Exited(NetdError):
    """The child is gone (as opposed to a live child answering with an error)."""


class EmulatorProcess:
    """What the daemon needs of an :class:`EmulatedFabric` (advance, layout, close), with the fabric
    living in a supervised child process. ``options`` are EmulatedFabric's keyword arguments."""

    def __init__(
        self, state_dir: Path, *, clock: Callable[[], float] = time.monotonic, **options: Any
    ) -> None:
        self.state_dir = state_dir
        self.sim_ms_per_tick = float(options.get("sim_ms_per_tick", 50.0))
        self.elapsed_s = 0.0  # as EmulatedFabric's: the wall time the emulation has stepped
        self.restarts = 0
        self._spec = json.dumps({"state_dir": str(state_dir), **options})
        self._clock = clock
        self._proc: subprocess.Popen[str] | None = None
        self._failures = 0  # consecutive deaths and failed restarts: the backoff step
        self._retry_at = 0.0
        self._why = ""
        self._proc = self._start()  # the first start's failure is the caller's error, not a restart
        self.n_hosts = self._n_hosts

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "netd.emulated.child", self._spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,  # line-buffered: each request is one line
        )
        try:
            self._n_hosts = int(_reply(proc, "starting")["ready"])
        except NetdError:
            _stop(proc)
            raise
        return proc

    def _gone(self, why: str) -> NetdError:
        """Note a death or failed restart and when to try again; the error for this advance."""
        self._proc = None
        delay = BACKOFF_S[min(self._failures, len(BACKOFF_S) - 1)]
        self._failures += 1
        self._retry_at = self._clock() + delay
        self._why = f"{why}; restart attempt {self._failures} in {delay:g} s"
        return NetdError(self._why)

    def host_root(self, host: int) -> Path:
        return host_root(self.state_dir, host, self.n_hosts)

    @staticmethod
    def host_name(host: int) -> str:
        return host_name(host)

    def advance(
        self, wall_s: float, sim_ms: float | None = None, render: Sequence[int] | None = None
    ) -> None:
        if self._proc is None:
            if self._clock() < self._retry_at:
                raise NetdError(self._why)
            try:
                self._proc = self._start()
            except NetdError as exc:
                raise self._gone(f"restarting the emulated fabric process failed: {exc}") from None
            self.restarts += 1
        proc = self._proc
        try:
            _send(proc, {"advance": [wall_s, sim_ms, None if render is None else list(render)]})
            _reply(proc, "advancing")
        except _Exited as exc:
            _stop(proc)
            raise self._gone(str(exc)) from None
        self._failures = 0
        self.elapsed_s += wall_s

    def close(self) -> None:
        """End the child (end of input) and wait for it; kill it if it does not go."""
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None


def _send(proc: subprocess.Popen[str], request: dict[str, Any]) -> None:
    stdin = proc.stdin
    assert stdin is not None
    try:
        stdin.write(json.dumps(request) + "\n")
    except (BrokenPipeError, ValueError):
        raise _Exited(f"the emulated fabric process exited (status {proc.poll()})") from None


def _reply(proc: subprocess.Popen[str], doing: str) -> dict[str, Any]:
    stdout = proc.stdout
    assert stdout is not None
    line = stdout.readline()
    if not line:
        try:
            status = proc.wait(_CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            status = None
        raise _Exited(f"the emulated fabric process exited while {doing} (status {status})")
    reply: dict[str, Any] = json.loads(line)
    if "error" in reply:
        raise NetdError(reply["error"])
    return reply


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
    try:
        proc.wait(_CLOSE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _serve(fabric: EmulatedFabric, requests: IO[str], replies: IO[str]) -> None:
    for line in requests:
        wall_s, sim_ms, render = json.loads(line)["advance"]
        try:
            fabric.advance(wall_s, sim_ms=sim_ms, render=render)
        except (OSError, NetdError) as exc:
            replies.write(json.dumps({"error": f"emulated fabric: {exc}"}) + "\n")
        else:
            replies.write('{"ok": true}\n')
        replies.flush()


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon decides when we stop: see above
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # SIGHUP is the daemon's reload (`systemctl kill -s HUP`, `pkill -HUP netd`, a closed terminal reach
    # the whole group): by default it would kill this process and leave the host without counters.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    state_dir = Path(spec.pop("state_dir"))
    try:
        fabric = EmulatedFabric(state_dir, **spec)
    except (OSError, NetdError) as exc:
        print(json.dumps({"error": str(exc)}), flush=True)
        return 1
    try:
        print(json.dumps({"ready": fabric.n_hosts}), flush=True)
        _serve(fabric, sys.stdin, sys.stdout)
    finally:
        fabric.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

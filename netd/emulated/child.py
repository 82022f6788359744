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
killed one); it ignores SIGINT so a Ctrl-C in the terminal stops the daemon first, which then closes
the pipe.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from netd.emulated.fabric_host import EmulatedFabric, host_name, host_root
from netd.errors import NetdError

__all__ = ["EmulatorProcess", "main"]

_CLOSE_TIMEOUT_S = 10.0


class EmulatorProcess:
    """What the daemon needs of an :class:`EmulatedFabric` (advance, layout, close), with the fabric
    living in a child process. ``options`` are EmulatedFabric's keyword arguments."""

    def __init__(self, state_dir: Path, **options: Any) -> None:
        self.state_dir = state_dir
        self.sim_ms_per_tick = float(options.get("sim_ms_per_tick", 50.0))
        self.elapsed_s = 0.0  # as EmulatedFabric's: the wall time the emulation has stepped
        spec = json.dumps({"state_dir": str(state_dir), **options})
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "netd.emulated.child", spec],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,  # line-buffered: each request is one line
        )
        try:
            self.n_hosts = int(self._reply("starting")["ready"])
        except NetdError:
            self.close()
            raise

    def host_root(self, host: int) -> Path:
        return host_root(self.state_dir, host, self.n_hosts)

    @staticmethod
    def host_name(host: int) -> str:
        return host_name(host)

    def advance(
        self, wall_s: float, sim_ms: float | None = None, render: Sequence[int] | None = None
    ) -> None:
        self._send({"advance": [wall_s, sim_ms, None if render is None else list(render)]})
        self._reply("advancing")
        self.elapsed_s += wall_s

    def _send(self, request: dict[str, Any]) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(request) + "\n")
        except (BrokenPipeError, ValueError):
            raise NetdError(f"the emulated fabric process exited (status {self._proc.poll()})") from None

    def _reply(self, doing: str) -> dict[str, Any]:
        stdout = self._proc.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            status = self._proc.wait(_CLOSE_TIMEOUT_S)
            raise NetdError(f"the emulated fabric process exited while {doing} (status {status})")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise NetdError(reply["error"])
        return reply

    def close(self) -> None:
        """End the child (end of input) and wait for it; kill it if it does not go."""
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self._proc.wait(_CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


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
    import os

    os.nice(int(os.environ.get("EXP_NICE", "0")))
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

"""The tuner's simulations in a child process, so the daemon never carries the simulator's compiler.

The twins' step is compiled by numba (``cc.sim``): loading it maps LLVM into the process, about
120 MB of resident memory that would stay in ``netd run`` for its whole life after the first tuner
decision, on every GPU host. A decision needs it for a second or two every ``tuning.interval`` at
most, and only while the signals call for a search. So the simulations run in one spawned child:
started on the first search, kept while searches keep coming (a congested fabric searches every
interval, and a fresh child costs ~1 s of CPU to import numpy and load the cached kernels), and
exiting on its own after ``idle_exit`` seconds without work, which hands the memory back.

The child is also a fault boundary: a simulation that crashes the interpreter or runs away kills
the child, never the daemon. Every call is bounded by ``timeout``; on timeout or death the child is
killed and the call raises :class:`~netd.errors.TuningError` (the decision fails and is logged; the
next one starts a new child).

Values in, values out: the child runs :func:`cc.tune.twins.evaluate_replicated` on plain arguments
and sends back its result; both directions are pickled over a pipe.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from cc.model.params import DcqcnParams
from cc.tune.twins import TwinResult, evaluate_replicated
from netd.errors import TuningError

__all__ = ["SimulationWorker"]

# A fresh interpreter (``python -m netd.tuning.worker FD IDLE``), not fork: the daemon has threads
# (the loop, HTTP, the tuner) and a forked child could inherit a lock held by one of them. Not
# multiprocessing's spawn either: it re-runs the parent's ``__main__`` in the child, and netd's
# ``__main__`` starts the CLI.


def _serve(conn: Connection, idle_exit: float) -> None:
    """The child: answer simulation requests until the pipe closes or ``idle_exit`` passes idle."""
    try:
        while conn.poll(idle_exit):
            try:
                link_gbps, load, candidates, seeds = conn.recv()
            except EOFError:
                return
            try:
                reply: tuple[str, Any] = ("ok", evaluate_replicated(link_gbps, load, candidates, seeds))
            except Exception as exc:  # reported to the daemon as one line, the child stays usable
                reply = ("error", f"{type(exc).__name__}: {exc}")
            conn.send(reply)
    except (KeyboardInterrupt, BrokenPipeError):
        return


class SimulationWorker:
    """Callable like :func:`cc.tune.twins.evaluate_replicated`; runs it in the child process."""

    def __init__(self, timeout: float = 300.0, idle_exit: float = 120.0) -> None:
        if timeout <= 0 or idle_exit <= 0:
            raise ValueError("timeout and idle_exit must be > 0")
        self.timeout = timeout
        self.idle_exit = idle_exit
        self.started = 0  # children started, for tests and /v1/tuning
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()  # one request at a time: the pipe carries no request ids
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The live child's pid, or None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def __call__(
        self, link_gbps: float, load: float, candidates: Sequence[DcqcnParams], seeds: Iterable[int]
    ) -> dict[str, list[TwinResult]]:
        request = (float(link_gbps), float(load), list(candidates), list(seeds))
        with self._lock:
            if self._closed:
                raise TuningError("the tuner's simulation worker is closed (netd is stopping)")
            conn = self._ensure()
            try:
                conn.send(request)
                if not conn.poll(self.timeout):
                    self._stop(kill=True)
                    raise TuningError(
                        f"the tuner's simulation took longer than {self.timeout:g} s; child killed"
                    )
                status, value = conn.recv()
            except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
                code = self._proc.poll() if self._proc is not None else None
                self._stop(kill=True)
                raise TuningError(f"the tuner's simulation child died (exit code {code}): {exc}") from exc
        if status != "ok":
            raise TuningError(f"the tuner's simulation failed: {value}")
        result: dict[str, list[TwinResult]] = value
        return result

    def _ensure(self) -> Connection:
        """The pipe to a live child: the one idling, or a new one if it exited (idle or dead)."""
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            return self._conn
        self._stop(kill=True)
        ours, theirs = socket.socketpair()
        with ours, theirs:
            fd = theirs.fileno()
            args = [sys.executable, "-m", __name__, str(fd), repr(self.idle_exit)]
            try:
                proc = subprocess.Popen(
                    args, pass_fds=(fd,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
                )
            except OSError as exc:
                raise TuningError(f"cannot start the tuner's simulation child: {exc}") from exc
            conn = Connection(ours.detach())
        self._proc, self._conn = proc, conn
        self.started += 1
        return conn

    def _stop(self, kill: bool) -> None:
        conn, proc = self._conn, self._proc
        self._conn = self._proc = None
        if conn is not None:
            conn.close()  # an idle child sees EOF and returns
        if proc is None:
            return
        if kill and proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5)

    def close(self) -> None:
        """Stop the child (daemon shutdown). Does not wait for a simulation in flight: killing the child
        makes that call raise at once instead of holding the shutdown for up to ``timeout``."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        with self._lock:
            self._stop(kill=True)


if __name__ == "__main__":
    _serve(Connection(int(sys.argv[1])), float(sys.argv[2]))

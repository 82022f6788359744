"""The extender's worker processes, seen from the listener: who answers a request, and which score
table each worker holds.

The pool is one per process (every listener of the process shares it) and ``SIZE`` workers strong:
two, so that one answers while the other takes a new table (building its index from a 40,000-port
table takes ~0.1-1 s). Workers start on the first extender request, or at start with :meth:`start`
(`netd fabric` does; `netd run`, whose extender is rarely asked, spawns none until asked). A worker
that dies or stops answering is killed and replaced, and its request retried once on the new one.

:class:`Tables` is one router's side: a generation per congestion report, and the oldest generation
a request may be answered from. A small report (``INLINE_PORTS``) must be the one answered from, so
a worker that lacks it is sent it first (a few ms); a big one is rolled out to the workers one at a
time by a thread while requests are answered from the previous table, as before issue 18's workers.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import msgspec

from netd.api.child import spawn
from netd.api.extender_wire import Buffer
from netd.api.extender_worker import decode_meta, recv_frame, score_table, send_frame
from netd.api.service_view import EncodedScores
from netd.congestion.scheduling import UnknownPolicy
from netd.congestion.scorer import CongestionReport
from netd.errors import NetdError

__all__ = ["SIZE", "WORKER", "ExtenderPool", "Tables", "shared_pool"]

log = logging.getLogger(__name__)
SIZE = 2
TIMEOUT_S = 30.0  # a 25 MB body each way over a socket pair takes well under a second
WORKER = (sys.executable, "-m", "netd.api.extender_worker")
_KEYS = itertools.count(1)


class Tables:
    """One router's score tables: built once per congestion report, sent to each worker once."""

    # A host's own report (netd run) and a small cluster's are sent inline, so the request after a
    # tick that took a port down already filters it; above this, each worker taking every report
    # inline made the requests that carried it wait (100 nodes x 8 ports re-scored twice a second
    # in `netd bench api`: 2 % of requests, the whole p99)
    INLINE_PORTS = 256

    def __init__(self, pool: ExtenderPool, policy: UnknownPolicy) -> None:
        self.pool, self.policy = pool, policy
        self.key = next(_KEYS)
        self._lock = threading.Lock()
        self._swap = threading.Lock()
        self._report: object = self  # nothing yet (None is a report: "no view")
        self._gen = 0
        self.min_gen = 0  # the oldest table a request may be answered from
        self._encoded: dict[int, tuple[msgspec.Raw, Buffer]] = {}  # gen -> T frame's meta, payload; last two

    def wanted(self, report: CongestionReport | EncodedScores | None) -> int:
        """The oldest generation a request about ``report`` (or its scores, encoded elsewhere) may
        be answered from."""
        if report is self._report:
            return self.min_gen
        with self._lock:
            if report is not self._report:
                had_view = self._report is not None and self._report is not self
                self._gen += 1
                big = report is not None and _port_count(report) > self.INLINE_PORTS
                if not big or not had_view:  # needed now: stored before any request sees the report
                    self._store(self._gen, report)
                    self.min_gen = self._gen
                self._report = report
                if big:  # to every worker, one at a time (the first needed one may get it first)
                    threading.Thread(
                        target=self._roll,
                        args=(self._gen, report, had_view),
                        name="netd-extender-table",
                        daemon=True,
                    ).start()
        return self.min_gen

    def _store(self, gen: int, report: CongestionReport | EncodedScores | None) -> None:
        policy, scores = score_table(report, self.policy)
        meta = msgspec.Raw(msgspec.msgpack.encode({"key": self.key, "gen": gen, "policy": policy}))
        with self._swap:  # readers take the dict as it is, never while it changes
            self._encoded = dict(sorted({**self._encoded, gen: (meta, scores)}.items())[-2:])

    def latest(self) -> tuple[int, tuple[msgspec.Raw, Buffer]]:
        encoded = self._encoded
        gen = max(encoded)
        return gen, encoded[gen]

    def _roll(self, gen: int, report: CongestionReport | EncodedScores, store: bool) -> None:
        if store:
            self._store(gen, report)
        try:
            self.pool.broadcast(self, gen)
        except NetdError as exc:  # the replaced worker is sent the table by its first request
            if not self.pool.closed:  # at shutdown the workers went while the table was on its way
                log.warning("extender table not rolled out to every worker: %s", exc)
        with self._lock:
            self.min_gen = max(self.min_gen, gen)


def _port_count(report: CongestionReport | EncodedScores) -> int:
    return report.port_count if isinstance(report, EncodedScores) else len(report.ports)


class _Proc:
    def __init__(self, command: tuple[str, ...]) -> None:
        self.popen, ours = spawn(command, "an extender worker")
        ours.settimeout(TIMEOUT_S)
        self.sock = ours
        self.held: dict[int, int] = {}  # router key -> generation this worker holds
        self.busy = False

    def send_table(self, tables: Tables, background: bool = False) -> None:
        """``background``: a roll-out (requests meanwhile use the previous table), built by the
        worker at a lower CPU priority; else a table a request waits for."""
        gen, (meta, scores) = tables.latest()
        send_frame(self.sock, b"B" if background else b"T", meta, scores)
        kind, _, _ = recv_frame(self.sock)
        if kind != b"K":
            raise EOFError(f"extender worker answered {kind!r} to a table")
        self.held[tables.key] = gen

    def close(self) -> None:
        self.sock.close()  # the worker leaves when its socket closes
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class ExtenderPool:
    """``command``: a worker's command line, to which the socket's descriptor number is appended."""

    def __init__(self, size: int = SIZE, command: tuple[str, ...] = WORKER) -> None:
        self.size, self.command = size, command
        self._cond = threading.Condition()
        self._procs: list[_Proc] = []
        self.closed = False  # for good: a table still rolling out must not start new workers

    def start(self) -> None:
        with self._cond:
            if self.closed:
                raise NetdError("the extender's workers have been stopped")
            if not self._procs:
                procs: list[_Proc] = []
                try:
                    for _ in range(self.size):
                        procs.append(_Proc(self.command))
                except NetdError:
                    for p in procs:
                        p.close()
                    raise
                self._procs = procs
                atexit.register(self.close)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            procs, self._procs = self._procs, []
            self._cond.notify_all()  # a roll-out waiting for a worker gives up
        for p in procs:
            p.close()

    def pids(self) -> list[int]:
        return [p.popen.pid for p in self._procs]

    def held(self, key: int) -> list[int]:
        """The table generation of router ``key`` each worker has acknowledged (-1: none)."""
        return [p.held.get(key, -1) for p in self._procs]

    def _acquire(self, want: _Proc | None = None) -> _Proc | None:
        """A free worker (``want``: that one; None when it has been replaced meanwhile)."""
        self.start()
        with self._cond:
            while True:
                if self.closed:
                    raise NetdError("the extender's workers have been stopped")
                for i, p in enumerate(self._procs):
                    if not p.busy and p.popen.poll() is not None:  # died idle: replaced before use
                        log.warning("extender worker %d exited (%s); replaced", p.popen.pid, p.popen.poll())
                        p.sock.close()
                        self._procs[i] = _Proc(self.command)  # NetdError: this request answers 503
                if want is not None and want not in self._procs:
                    return None
                free = [p for p in self._procs if not p.busy and (want is None or p is want)]
                if free:
                    free[0].busy = True
                    return free[0]
                self._cond.wait()

    def _release(self, proc: _Proc, failed: bool) -> None:
        with self._cond:
            proc.busy = False
            if failed and proc in self._procs:  # killed and replaced in its slot
                try:
                    self._procs[self._procs.index(proc)] = _Proc(self.command)
                except NetdError as exc:  # left dead in its slot: the next request tries again
                    log.warning("%s", exc)
            self._cond.notify_all()
        if failed:
            proc.popen.kill()
            proc.close()

    def broadcast(self, tables: Tables, gen: int) -> None:
        """Send ``tables``' latest table to every worker that has not got ``gen``, one at a time (the
        others keep answering)."""
        for target in list(self._procs):
            if target.held.get(tables.key, -1) >= gen:
                continue
            proc = self._acquire(target)
            if proc is None:
                continue
            failed = True
            try:
                if proc.held.get(tables.key, -1) < gen:
                    proc.send_table(tables, background=True)
                failed = False
            except (OSError, EOFError) as exc:
                raise NetdError(f"extender worker {proc.popen.pid} failed: {exc}") from exc
            finally:
                self._release(proc, failed)

    def call(
        self,
        tables: Tables,
        kind: bytes,
        meta: list[Any],
        body: Buffer,
        peers: Callable[[str], Any],
        fd: int = -1,
    ) -> tuple[bytes, Any, bytearray]:
        """(kind, meta, payload) of the worker's answer: ``R`` or ``E``; ``meta[1]`` is the oldest
        table generation it may use. ``peers(group)`` answers a worker that asks for a pod group's.
        ``fd``: a memfd holding ``body``, sent instead of its bytes (the worker maps it)."""
        error: Exception | None = None
        for _ in range(2):
            proc = self._acquire()
            assert proc is not None
            failed = True
            try:
                out = self._exchange(proc, tables, kind, meta, b"" if fd >= 0 else body, peers, fd)
                failed = False
                return out
            except (OSError, EOFError) as exc:
                error = exc
                log.warning("extender worker %d failed (%s); replaced", proc.popen.pid, exc)
            finally:
                self._release(proc, failed)
        raise NetdError(f"extender workers failed: {error}")

    def _exchange(
        self,
        proc: _Proc,
        tables: Tables,
        kind: bytes,
        meta: list[Any],
        body: Buffer,
        peers: Callable[[str], Any],
        fd: int,
    ) -> tuple[bytes, Any, bytearray]:
        if proc.held.get(tables.key, -1) < meta[1]:
            proc.send_table(tables)
        send_frame(proc.sock, kind, meta, body, fd)
        while True:
            got, raw, payload = recv_frame(proc.sock)
            answer = decode_meta(raw)
            if got == b"M":  # it dropped our table (it keeps a few routers' only)
                proc.send_table(tables)
                send_frame(proc.sock, kind, meta, body, fd)
            elif got == b"Q":
                send_frame(proc.sock, b"G", peers(answer))
            else:
                return got, answer, payload


_SHARED: ExtenderPool | None = None
_SHARED_LOCK = threading.Lock()


def shared_pool() -> ExtenderPool:
    """The process's pool (started on first use)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            _SHARED = ExtenderPool()
        return _SHARED

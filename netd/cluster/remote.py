"""netd fabric's cluster view, refreshed in a process of its own.

A 5000-node refresh (parse the Prometheus answers, score 40,000 ports, build the report) is ~0.3-0.5 s
of interpreter time every ``cluster.refresh_interval``. Run beside the listener it held the listener's
interpreter lock for that long, and every request that arrived meanwhile waited for it at each step:
the scheduler extender's p99 was the refresh (issue 18; measured: the same CPU burnt in another
process left the p99 at 6-7 ms, in-process 34-40 ms). So the listener's process keeps only a
:class:`RemoteFabricView`: a child process (``python -m netd.cluster.refresher``) runs the
:class:`~netd.cluster.view.FabricView` and, after each refresh, sends the listener its stats, a
summary for /metrics and the snapshot encoded (netd.api.snapshot_wire), which the listener takes
without decoding: the extender forwards the encoded score table to its workers, and the topology and
report are decoded only if a route asks for them.

Frames on the socket pair (netd.api.extender_worker's framing): first ``S`` to the child, meta: what
it needs to set itself up (the configuration: never on its command line, where every user's ``ps``
would see a Prometheus URL's credentials); then ``V`` from the child after every refresh, meta:
``{"stats", "summary", "snapshot"}``, with a memfd holding the encoded snapshot's parts when there is
a new one (SCM_RIGHTS).

The child leaves when the listener's end of the socket closes. A child that exits or sends nothing
for ``hung_after_s`` (killed) is started again after a pause (1 s, doubling to 30 s): meanwhile the
last snapshot is served and ages (``/readyz`` says how old; ``netd_fabric_view_restarts`` counts).
The new child's scorer starts afresh (levels rebuild over a few refreshes); refresh counts carry on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import mmap
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from netd.api.child import lower_priority, spawn
from netd.api.extender_worker import map_body, recv_frame, send_frame
from netd.api.service_view import ClusterSnapshot
from netd.api.snapshot_wire import decode_snapshot, encode_snapshot
from netd.cluster.stats import FabricStats, FabricSummary
from netd.config.service import ClusterConfig
from netd.errors import NetdError

__all__ = ["RemoteFabricView", "Refreshing", "publish", "read_setup"]

log = logging.getLogger(__name__)
FIRST_PAUSE_S, LONGEST_PAUSE_S = 1.0, 30.0
STEADY_S = 60.0  # a child that lived this long resets the pause before the next restart


class Refreshing(Protocol):
    """What the view process refreshes: netd.cluster.view.FabricView (or netd bench's synthetic view)."""

    @property
    def stats(self) -> FabricStats: ...

    def refresh(self) -> ClusterSnapshot | None: ...

    def summary(self) -> FabricSummary | None: ...


class _Message(msgspec.Struct, frozen=True):
    stats: FabricStats
    summary: FabricSummary | None
    snapshot: dict[str, Any] | None


_MESSAGE = msgspec.msgpack.Decoder(_Message)


def read_setup(sock: socket.socket) -> Any:
    """In the child: the ``S`` frame's meta, the first thing the listener sends."""
    kind, meta, _ = recv_frame(sock)
    if kind != b"S":
        raise NetdError(f"the fabric view process expected its setup, got {kind!r}")
    return msgspec.msgpack.decode(meta)


def _closed_within(sock: socket.socket, seconds: float | None) -> bool:
    """Wait ``seconds`` (None: for good); True as soon as the listener's end closes (it never sends
    after ``S``)."""
    poller = select.poll()  # not select(): the descriptor is the listener's number, maybe over 1023
    poller.register(sock, select.POLLIN)
    ready = poller.poll(None if seconds is None else seconds * 1000.0)
    return bool(ready) and not sock.recv(1)


def publish(view: Refreshing, sock: socket.socket, interval_s: float | None) -> None:
    """The child's loop: refresh, send, wait ``interval_s`` (None: refresh once); returns when the
    listener is gone. The process runs at nice :data:`BACKGROUND_NICE`: on a busy host a refresh may
    take longer (it has ``interval_s``), a request may not: at nice 0 a 5000-node refresh took one of
    the two cores from the listener and its extender workers for ~0.5 s every refresh."""
    lower_priority()  # before any thread starts: they inherit it
    sent: ClusterSnapshot | None = None
    while True:
        try:
            snap = view.refresh()
        except Exception:  # the process outlives one bad refresh, as the view did in-process
            log.exception("fabric refresh raised")
            snap = sent
        encoded: dict[str, Any] | None = None
        fd = -1
        if snap is not None and snap is not sent:
            # "the same data": only against what the listener took (a failed hand-over sent none)
            same = sent is not None and snap.congestion is sent.congestion and snap.topology is sent.topology
            encoded, payload = encode_snapshot(snap, same)
            try:
                fd = _memfd(payload) if payload else -1
                sent = snap
            except OSError as exc:  # no memory for it (ENOMEM, ENOSPC): the listener keeps its view
                log.warning(
                    "fabric view: snapshot not handed over (%s); sent again after the next refresh", exc
                )
                encoded = None
        meta = {"stats": view.stats, "summary": view.summary(), "snapshot": encoded}
        try:
            try:
                send_frame(sock, b"V", meta, b"", fd)
            finally:
                if fd >= 0:
                    os.close(fd)  # the listener holds its own descriptor, or nothing
            if _closed_within(sock, interval_s):
                return
        except OSError:  # the listener's process is gone
            return


def _memfd(payload: bytes) -> int:
    """``payload`` in a new memfd. The snapshot travels as one (30 MB at 5000 nodes): through the
    socket the listener's thread took it in ~8 recv calls, each waiting for the interpreter lock,
    and the requests answered meanwhile were the slowest of the refresh; a memfd it maps costs it
    one message."""
    fd = os.memfd_create("netd-fabric-view", os.MFD_CLOEXEC)
    try:
        left = memoryview(payload)
        while left:
            left = left[os.write(fd, left) :]
    except OSError:
        os.close(fd)
        raise
    return fd


def _mapped(fds: list[int]) -> mmap.mmap | bytes:
    """The payload a frame's memfd holds (faulted in as it is decoded); b"" without one."""
    for extra in fds[1:]:
        os.close(extra)
    return map_body(fds[0], populate=False) if fds else b""


class RemoteFabricView:
    """A :class:`~netd.api.service_view.ServiceView` whose snapshots a child process refreshes.

    ``command`` starts the child (the socket's descriptor number is appended); ``setup`` is sent to
    each child started; ``peers`` answers pod-group questions here, on the request's thread."""

    def __init__(
        self,
        cfg: ClusterConfig,
        command: Sequence[str],
        setup: Any = None,
        peers: Callable[[str, str], Mapping[str, int] | None] | None = None,
        hung_after_s: float | None = None,
    ) -> None:
        self.cfg = cfg
        self.command, self.setup, self._peers = tuple(command), setup, peers
        # a paged refresh may take a few query timeouts; none takes ten refresh intervals
        self.hung_after_s = hung_after_s or max(120.0, 10 * cfg.refresh_interval)
        self.stats = FabricStats()
        self.history: deque[FabricStats] = deque(maxlen=64)  # the last messages' stats (diagnostics)
        self.generation = object()  # replaced after every message, as FabricView's after every refresh
        self._snapshot: ClusterSnapshot | None = None
        self._summary: FabricSummary | None = None
        self._carried = (0, 0, 0)  # refreshes, errors, restarts of the children before this one
        self._cond = threading.Condition()
        self._messages = 0
        self._ended = 0  # view processes that exited, hung or misbehaved
        self._closed = False
        self._child: tuple[subprocess.Popen[bytes], socket.socket] | None = None
        self._thread: threading.Thread | None = None

    def current(self) -> ClusterSnapshot | None:
        return self._snapshot

    def summary(self) -> FabricSummary | None:
        return self._summary

    def peers(self, label: str, group: str) -> Mapping[str, int] | None:
        return self._peers(label, group) if self._peers is not None else None

    def view_age_s(self) -> float | None:
        """Seconds since the last good refresh (the age of the view served), None before one."""
        last = self.stats.last_ok
        return None if last is None else time.monotonic() - last

    def pid(self) -> int | None:
        child = self._child
        return None if child is None else child[0].pid

    def start(self, wait_s: float = 0.0) -> None:
        """Start the child, and wait up to ``wait_s`` for its first refresh, or for it to end
        (NetdError: it cannot start)."""
        self._spawn()
        self._thread = threading.Thread(target=self._run, name="netd-fabric-view", daemon=True)
        self._thread.start()
        with self._cond:
            self._cond.wait_for(lambda: self._messages or self._ended or self._closed, wait_s)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._stop_child()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._stop_child()  # one the thread started as we closed

    def _spawn(self) -> None:
        popen, sock = spawn(self.command, "the fabric view process")
        try:
            send_frame(sock, b"S", self.setup)
        except OSError as exc:  # it died at once: the loop restarts it
            log.warning("fabric view process %d did not take its setup: %s", popen.pid, exc)
        sock.settimeout(self.hung_after_s)
        self._child = (popen, sock)

    def _stop_child(self) -> None:
        child = self._child
        if child is None:
            return
        popen, sock = child
        # shut down first: our reader thread may be blocked in recv on this socket, and a close alone
        # would leave the connection open (and the child waiting) until that recv returned
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()  # it leaves when its socket closes
        try:
            popen.wait(timeout=2)
        except subprocess.TimeoutExpired:  # inside a refresh: no need to let it finish
            popen.kill()
            popen.wait()

    def _run(self) -> None:
        pause = FIRST_PAUSE_S
        while True:
            started = time.monotonic()
            why = self._serve_child()
            if self._closed:
                return
            popen, _ = self._child or (None, None)
            self._stop_child()
            with self._cond:
                self._ended += 1
                self._cond.notify_all()
            code = popen.returncode if popen is not None else None
            refreshes, errors, restarts = self._carried
            self._carried = (self.stats.refreshes, self.stats.errors, restarts + 1)
            self.stats = dataclasses.replace(self.stats, restarts=restarts + 1)
            if time.monotonic() - started >= STEADY_S:
                pause = FIRST_PAUSE_S
            # SIGTERM: systemd stopping the whole service (this process is about to close) or an
            # operator's kill; either way not a failure worth a warning
            level = logging.INFO if code == -signal.SIGTERM else logging.WARNING
            log.log(
                level,
                "the fabric view process %s (%s, exit status %s); starting another in %g s, serving "
                "the last view meanwhile",
                popen.pid if popen else "?",
                why,
                code,
                pause,
            )
            while not self._closed:
                with self._cond:
                    if self._cond.wait_for(lambda: self._closed, pause):
                        return
                try:
                    self._spawn()
                    break
                except NetdError as exc:
                    log.warning("%s", exc)
                pause = min(pause * 2, LONGEST_PAUSE_S)
            pause = min(pause * 2, LONGEST_PAUSE_S)

    def _serve_child(self) -> str:
        """Take the child's messages until it goes; why it went."""
        assert self._child is not None
        popen, sock = self._child
        while True:
            fds: list[int] = []
            try:
                kind, meta, _ = recv_frame(sock, fds)
            except TimeoutError:
                popen.kill()
                return f"sent nothing for {self.hung_after_s:g} s and was killed"
            except (EOFError, OSError) as exc:
                return "stopped" if self._closed else f"went away ({exc})"
            try:
                payload = _mapped(fds)  # ValueError: an empty one
                if kind != b"V":
                    raise ValueError(f"unexpected frame {kind!r}")
                self._take(_MESSAGE.decode(meta), payload)
            except Exception as exc:  # whatever it was, this thread must go on
                # an unreadable message (a bug) or one this process could not map (ENOMEM): the
                # child's idea of what the listener holds is wrong now, so it starts afresh
                log.exception("fabric view process sent what the listener cannot take")
                popen.kill()
                return f"sent a message the listener could not take ({exc}) and was killed"

    def _take(self, msg: _Message, payload: mmap.mmap | bytes) -> None:
        refreshes, errors, restarts = self._carried
        stats = dataclasses.replace(
            msg.stats,
            refreshes=msg.stats.refreshes + refreshes,
            errors=msg.stats.errors + errors,
            restarts=restarts,
        )
        if msg.snapshot is not None:
            self._snapshot = decode_snapshot(msg.snapshot, payload, self._snapshot)
        self._summary = msg.summary
        self.stats = stats
        self.history.append(stats)
        self.generation = object()
        with self._cond:
            self._messages += 1
            self._cond.notify_all()

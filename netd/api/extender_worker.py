"""An extender worker process: reads kube-scheduler's bodies and scores them on its own interpreter.

Parsing a 25 MB ``v1.NodeList`` holds an interpreter lock for ~25-50 ms, and scoring 5000 names for a
few ms; in the listener's process either stalls the event loop, /healthz with it (issue 18). A worker
(``python -m netd.api.extender_worker FD``, started by netd.api.extender_pool) gets the raw body over
a socket — a big one as a memfd it maps, so the bytes are not copied between the processes — and
sends back the answer: its own bytes, and for a full-Node filter the slices of the body to echo
(netd.api.extender_wire.filter_parts), so the listener only moves bytes.

It holds one :class:`NodeIndex` per router (the latest it was sent), built from a **score table**:
each port's host, ToR, spines, identity, up/stormed and smoothed score, and each ToR's and spine's
smoothed score — what NodeIndex reads of a congestion report, a few MB at 40,000 ports instead of the
whole report. The listener's process pays only for writing that table once per report.

Frames (both ways): ``!cIQ`` = kind, meta length, payload length; then meta (msgpack), payload.

==========  ===================================  =========================================
kind        to the worker                        from the worker
==========  ===================================  =========================================
``T``       meta: router key, generation and      ``K``: table taken
            unknown-node policy; payload: the
            scores (msgpack; empty: no report)
``B``       the same, rolled out in the          ``K``: table taken
            background: built at a lower CPU
            priority
``F``/``P`` filter/prioritize; payload: body, or ``R``: meta [unknown, removed, pod, gen,
            none and the body's memfd passed     plan], payload: the answer's own bytes
            with the header (SCM_RIGHTS)         (the plan: body slices between them,
                                                 extender_wire.pack_parts); ``M``: no
                                                 table recent enough (send one, ask
                                                 again); ``E``: meta [kind, status,
                                                 detail-or-errors]
``G``       meta: peers (node -> pods) or None   (after ``Q``: meta = the pod's group)
==========  ===================================  =========================================
"""

from __future__ import annotations

import itertools
import mmap
import os
import signal
import socket
import struct
import sys
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import msgspec
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError

from netd.api.child import lower_priority
from netd.api.extender_wire import Buffer, encode_priorities, filter_parts, pack_parts, read_args
from netd.api.heap import SettledHeap
from netd.api.service_view import EncodedScores
from netd.congestion.scheduling import NodeIndex, UnknownPolicy
from netd.congestion.scorer import CongestionReport

__all__ = [
    "HEADER",
    "decode_meta",
    "encode_scores",
    "map_body",
    "node_index",
    "recv_frame",
    "score_table",
    "send_frame",
    "serve",
]

HEADER = struct.Struct("!cIQ")
PORTS_PER_PART = 2000
KEEP_ROUTERS = 16  # tables kept per worker (one per listener's router; tests create many)
_ENC = msgspec.msgpack.Encoder(enc_hook=str)  # a 422's ctx may hold the ValueError: its text


def send_frame(
    sock: socket.socket, kind: bytes, meta: Any = None, payload: Buffer = b"", fd: int = -1
) -> None:
    """The payload is sent as it is (a 25 MB body is not copied into the frame); ``fd`` (a request
    body in a memfd) goes with the header, as SCM_RIGHTS."""
    head = _ENC.encode(meta)
    frame = HEADER.pack(kind, len(head), len(payload)) + head
    if fd >= 0:
        socket.send_fds(sock, [frame], [fd])
    else:
        sock.sendall(frame)
    if payload:
        sock.sendall(payload)


def _recv_exact(sock: socket.socket, n: int, into: bytearray | None = None) -> bytearray:
    buf = into if into is not None else bytearray(n)
    view, got = memoryview(buf), len(buf) - n
    while got < len(buf):
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError("extender peer closed the socket")
        got += k
    return buf


def recv_frame(sock: socket.socket, fds: list[int] | None = None) -> tuple[bytes, bytearray, bytearray]:
    """(kind, meta as msgpack, payload); EOFError when the other side is gone. With ``fds``, the
    header is read with its ancillary data and a descriptor sent with it is appended to ``fds``
    (read without, the kernel would drop it)."""
    if fds is None:
        head = _recv_exact(sock, HEADER.size)
    else:
        data, got, _, _ = socket.recv_fds(sock, HEADER.size, 1)
        if not data:
            raise EOFError("extender peer closed the socket")
        fds += got
        rest = HEADER.size - len(data)
        head = _recv_exact(sock, rest, bytearray(data) + bytearray(rest))
    kind, meta_len, payload_len = HEADER.unpack(head)
    return kind, _recv_exact(sock, meta_len), _recv_exact(sock, payload_len)


def map_body(fd: int, populate: bool = True) -> mmap.mmap:
    """A memfd sent with a frame (a request body; netd fabric's view), mapped read-only and its
    descriptor closed (no copy: the pages are the sender's). ``populate``: fault every page in now
    (a body is read whole at once); else as it is read. ValueError: it is empty."""
    flags = mmap.MAP_SHARED | (mmap.MAP_POPULATE if populate else 0)
    try:
        return mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def score_table(
    report: CongestionReport | EncodedScores | None, policy: UnknownPolicy
) -> tuple[list[Any], Buffer]:
    """What a worker needs of ``report`` to build the same NodeIndex: (the unknown-node policy, a table
    frame's meta; the scores, its payload: empty for no report, every node unknown). Scores encoded
    elsewhere (netd fabric's view process) are forwarded as they are: no copy, no interpreter time."""
    rules = [policy.mode, policy.neutral_score]
    if isinstance(report, EncodedScores):
        return rules, report.data
    return rules, b"" if report is None else encode_scores(report)


def encode_scores(report: CongestionReport) -> bytes:
    """The ``report`` part of a score table: per port only C-level copies (labels, three fields). The
    ports are encoded :data:`PORTS_PER_PART` at a time: encoding is one C call that holds the
    interpreter lock, and 40,000 ports at once held it 10-18 ms, stalling the event loop of a
    listener that encodes it (the 5000-name prioritize's tail at each refresh)."""
    ports = report.ports
    return _ENC.encode(
        [
            [
                msgspec.Raw(_ENC.encode([[dict(p.labels), p.up, p.stormed, p.smoothed] for p in ports[i:j]]))
                for i, j in _parts(len(ports), PORTS_PER_PART)
            ],
            [[t.name, t.smoothed] for t in report.tors],
            [[s.name, s.smoothed] for s in report.spines],
        ]
    )


# What NodeIndex reads of a report's scores, decoded by msgspec at C speed (building ScopeScores in
# Python took ~1 s at 40,000 ports on a loaded machine, while that worker answered nothing).
class _Port(msgspec.Struct, array_like=True, frozen=True):
    labels: dict[str, str]
    up: bool
    stormed: bool
    smoothed: float


class _Scope(msgspec.Struct, array_like=True, frozen=True):
    name: str
    smoothed: float


class _Scores(msgspec.Struct, array_like=True, frozen=True):
    ports: tuple[tuple[_Port, ...], ...]  # in parts of PORTS_PER_PART
    tors: tuple[_Scope, ...]
    spines: tuple[_Scope, ...]


class _Report(msgspec.Struct, frozen=True):
    ports: tuple[_Port, ...]
    tors: tuple[_Scope, ...]
    spines: tuple[_Scope, ...]


def _parts(n: int, size: int) -> list[tuple[int, int]]:
    return [(i, min(i + size, n)) for i in range(0, n, size)]


class _TableFrame(msgspec.Struct, frozen=True):
    key: int
    gen: int
    policy: tuple[str, int]


_TABLE = msgspec.msgpack.Decoder(_TableFrame)
_SCORES = msgspec.msgpack.Decoder(_Scores)


def node_index(policy: Sequence[Any], scores: Buffer) -> NodeIndex:
    """The NodeIndex a score table describes (:func:`score_table`'s two parts): the same answers as
    the listener's NodeIndex of the report (NodeIndex reads only these fields of its ports and scopes)."""
    rules = UnknownPolicy(*policy)
    if not len(scores):
        return NodeIndex(None, rules)
    table = _SCORES.decode(scores)
    flat = _Report(tuple(itertools.chain.from_iterable(table.ports)), table.tors, table.spines)
    return NodeIndex(cast(CongestionReport, flat), rules)


def decode_meta(raw: bytes | bytearray) -> Any:
    return msgspec.msgpack.decode(raw) if raw else None


def _problem(exc: Exception) -> list[Any]:
    if isinstance(exc, RequestValidationError):
        return ["invalid", 422, list(exc.errors())]
    if isinstance(exc, HTTPException):
        return ["http", exc.status_code, str(exc.detail)]
    return ["error", 500, f"{type(exc).__name__}: {exc}"]


class _Worker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.tables: OrderedDict[int, tuple[int, NodeIndex]] = OrderedDict()  # router -> (gen, index)
        # Rolled-out tables (``B``) are built on a thread at nice BACKGROUND_NICE while this one
        # waits: a roll-out's CPU (~200 ms at 40,000 ports) shared two cores with the other worker,
        # the listener and the requests, and the slowest prioritize answers fell in it (issue 18).
        # It loses nothing by taking longer: requests use the previous table until every worker
        # has the new one.
        self._builder: ThreadPoolExecutor | None = None
        # A 40,000-port index is ~500,000 objects: without this, the full collections its build set
        # off went on after it (55-65 ms each), and the first requests after a roll-out waited for them
        self._heap = SettledHeap()

    def take_table(self, raw: bytearray, scores: bytearray, background: bool = False) -> None:
        def take() -> None:
            with self._heap.refresh() as settle:  # the old index is dropped, the new one frozen
                frame = _TABLE.decode(raw)
                held = self.tables.get(frame.key)
                if held is None or held[0] < frame.gen:
                    index = node_index(frame.policy, scores)
                    settle.ports = len(index.report.ports) if index.report is not None else 0
                    self.tables[frame.key] = (frame.gen, index)
                self.tables.move_to_end(frame.key)
                while len(self.tables) > KEEP_ROUTERS:
                    self.tables.popitem(last=False)

        if background:
            if self._builder is None:
                self._builder = ThreadPoolExecutor(1, "netd-table-builder", lower_priority)
            self._builder.submit(take).result()
        else:
            take()
        send_frame(self.sock, b"K")

    def answer(self, kind: bytes, meta: list[Any], body: Buffer) -> None:
        key, min_gen, group_label, peer_weight = meta
        held = self.tables.get(key)
        if held is None or held[0] < min_gen:
            send_frame(self.sock, b"M")
            return
        gen, index = held
        try:
            asked = read_args(body)
        except (HTTPException, RequestValidationError) as exc:
            send_frame(self.sock, b"E", _problem(exc))
            return
        plan: list[int] = []
        if kind == b"F":
            passed, failed, unknown = index.filter(asked.names)
            plan, out = pack_parts(filter_parts(asked, passed, failed, body))
            removed = len(failed)
        else:
            group = asked.group(group_label)
            peers = None
            if group:
                send_frame(self.sock, b"Q", group)
                _, said, _ = recv_frame(self.sock)
                peers = decode_meta(said)
            scores, unknown = index.prioritize(asked.names, peers, peer_weight)
            out, removed = encode_priorities(scores), 0
        send_frame(self.sock, b"R", [unknown, removed, asked.pod_name, gen, plan], out)

    def run(self) -> None:
        while True:
            fds: list[int] = []
            try:
                kind, meta, payload = recv_frame(self.sock, fds)
            except (EOFError, ConnectionError):
                return  # the listener's process stopped (or died): so do we
            if kind in (b"T", b"B"):
                self.take_table(meta, payload, background=kind == b"B")
                continue
            try:
                # a big body arrives as a memfd; a small one as the payload, read where it lies
                self.answer(kind, decode_meta(meta), map_body(fds[0]) if fds else payload)
            except (EOFError, ConnectionError):
                return
            except Exception as exc:  # a bug must cost one request a 500, not the worker
                send_frame(self.sock, b"E", _problem(exc))


def serve(fd: int) -> None:
    # Ctrl-C reaches the whole process group; the listener's process decides when workers stop
    # (they leave when their socket closes), so an interrupt prints no traceback here. The same for a
    # SIGHUP sent to the group: the daemon's reload, which would otherwise kill a worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _Worker(socket.socket(fileno=fd)).run()


if __name__ == "__main__":
    serve(int(sys.argv[1]))

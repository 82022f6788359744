"""The Unix socket libnccl-tuner-netd.so asks at communicator init (pin protocol of netd_hints.h).

One request per connection: the plugin sends a ``netd_pin_request``; the daemon writes an ACK,
*then* reads CLOCK_MONOTONIC (shared with the plugin) and registers the rank only if it is still
before the request's ``register_by_ns`` — with its own :class:`PinAuthority` for single-node
communicators, the pin service (:class:`RemotePins`) for multi-node ones — and answers
``netd_pin_response`` plus the table bytes on APPLY, before the request's ``deadline_ns``. A
plugin that saw no ACK by register_by therefore knows it is not registered (netd_hints.h).

A request the daemon refuses before registering (another protocol version, too many clients,
nonsense sizes, no pin service for a multi-node communicator) gets NEUTRAL without an ACK; one
taken after its register_by gets the ACK and then NEUTRAL, unregistered. Both are safe because an
unregistered rank keeps its communicator's pin from completing anywhere. A protocol-1 plugin gets
protocol 1's NEUTRAL, which it reads as "not registered".

Single-node pins use a short window: ranks of one host reach tuner init within milliseconds, and
a "single-node" communicator that spans hosts (NVLink domains across hosts report one node) can
never complete on one host — it must cost little, and ends NEUTRAL on every host alike.

The server runs its own asyncio loop in a thread, so communicator inits never wait on the HTTP
listener or the collection loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from netd.errors import NetdError
from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_wire import (
    PIN_ACK,
    PIN_ACK_MAGIC,
    PIN_MAX_MESSAGE,
    PIN_PREFIX,
    PIN_PROTO_VERSION,
    PIN_REQUEST,
    PIN_REQUEST_FIELDS,
    PIN_REQUEST_MAGIC,
    PIN_RESPONSE,
    PIN_RESPONSE_MAGIC,
    PIN_RESPONSE_V1,
    PinStatus,
)
from netd.nccl.pins import PinAuthority, PinKey, PinVerdict, unless_gone

__all__ = ["PinResolver", "PinSocketServer", "encode_response"]

log = logging.getLogger(__name__)

_REQUEST_READ_TIMEOUT_S = 5.0
LOCAL_WINDOW_S = 0.25  # single-node pins: see the module docstring
_ACK = PIN_ACK.pack(PIN_ACK_MAGIC, PIN_PROTO_VERSION, PIN_ACK.size)


def _reason(text: str, room: int) -> bytes:
    return text.encode("utf-8")[: room - 1].decode("utf-8", "ignore").encode("utf-8")


def encode_response(comm_id: int, verdict: PinVerdict) -> bytes:
    table = verdict.table if verdict.status is PinStatus.APPLY and verdict.table else b""
    header = PIN_RESPONSE.pack(
        PIN_RESPONSE_MAGIC,
        PIN_PROTO_VERSION,
        PIN_RESPONSE.size,
        int(verdict.status),
        len(table),
        comm_id,
        verdict.pinned_at_ns,
        verdict.generation,
        verdict.digest,
        _reason(verdict.reason, 80),
    )
    return header + table


def encode_v1_neutral(comm_id: int, reason: str) -> bytes:
    """Protocol 1's NEUTRAL: what an old plugin reads as "not registered, leave NCCL alone"."""
    return PIN_RESPONSE_V1.pack(
        PIN_RESPONSE_MAGIC,
        1,
        PIN_RESPONSE_V1.size,
        int(PinStatus.NEUTRAL),
        0,
        comm_id,
        0,
        _reason(reason, 96),
    )


class PinResolver:
    """Which authority pins a communicator, and with which table on offer."""

    def __init__(
        self,
        local: PinAuthority,
        remote: RemotePins | None,
        table: Callable[[], bytes | None],
        host: str,
    ) -> None:
        self.local, self.remote, self._table, self.host = local, remote, table, host

    def refusal(self, key: PinKey) -> str | None:
        """Why this communicator cannot be pinned at all (answered before registering), or None."""
        if key.n_nodes > 1 and self.remote is None:
            return "multi-node communicator and no [nccl] pin_service configured: this rank is not registered"
        return None

    async def resolve(
        self, key: PinKey, member: int, digest: int = 0, budget_s: float | None = None
    ) -> PinVerdict:
        why = self.refusal(key)
        if why is not None:
            return PinVerdict.neutral(why)
        # a static pin needs no table; otherwise the policy may run (once per tick)
        offer = None if digest else await asyncio.to_thread(self._table)
        if key.n_nodes <= 1:
            return await self.local.join(key, member, offer, self.host, digest=digest, budget_s=budget_s)
        assert self.remote is not None
        return await self.remote.join(key, member, offer, digest=digest, budget_s=budget_s)


class PinSocketServer:
    def __init__(self, path: Path, resolver: PinResolver, mode: int = 0o666, max_clients: int = 1024) -> None:
        self.path = path
        self.resolver = resolver
        self.mode = mode
        self.max_clients = max_clients
        self._active = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    def start(self) -> None:
        """Bind now (so a bad path fails clearly in the caller), then serve in a thread."""
        sock = _bind(self.path, self.mode)
        self._inode = self.path.lstat().st_ino
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, args=(sock,), name="netd-nccl-pins", daemon=True)
        self._thread.start()
        self._started.wait(5.0)

    def _run(self, sock: socket.socket) -> None:
        assert self._loop is not None
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_unix_server(self._on_connect, sock=sock))
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            if self.resolver.remote is not None:
                self._loop.run_until_complete(self.resolver.remote.aclose())
            self._loop.close()

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # called at accept time: shutdown can then find every connection, even one not yet served
        task = asyncio.get_running_loop().create_task(self._handle(reader, writer))
        self._handlers[task] = writer
        task.add_done_callback(self._handlers.pop)

    async def _shutdown(self) -> None:
        assert self._server is not None
        # Connections already accepted must finish attaching first: closing the server under an
        # accept in flight leaks its socket (CPython 3.11's Server._attach asserts it is open).
        for _ in range(3):
            await asyncio.sleep(0)
        self._server.close()
        # ranks still waiting get no verdict (their plugin fails init loudly, as it must)
        handlers = dict(self._handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        for writer in handlers.values():
            writer.close()  # a handler cancelled before it ran never closed its connection
        await self._server.wait_closed()
        for _ in range(3):  # closed transports run connection_lost, which closes the socket
            await asyncio.sleep(0)

    def close(self) -> None:
        if self._loop is not None and self._thread is not None and self._loop.is_running():
            with contextlib.suppress(TimeoutError, RuntimeError):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10.0)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10.0)
        with contextlib.suppress(FileNotFoundError):
            st = self.path.lstat()
            if stat.S_ISSOCK(st.st_mode) and st.st_ino == self._inode:  # ours, not a successor's
                self.path.unlink()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._active += 1
        try:
            req = await self._read_request(reader, writer)
            if req is None:
                return
            key = PinKey(req["comm_id"], req["n_ranks"], req["n_nodes"])
            verdict = await self._verdict(req, key, reader, writer)
            log.info(
                "nccl pin %s member %016x pid %d: %s (%s)",
                key,
                req["member"],
                req["pid"],
                verdict.status.name,
                verdict.reason,
            )
            writer.write(encode_response(key.comm_id, verdict))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            self._active -= 1
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> dict[str, int] | None:
        """The request's fields, or None when it was answered (other version) or is not the plugin's."""
        try:
            prefix = await asyncio.wait_for(reader.readexactly(PIN_PREFIX.size), _REQUEST_READ_TIMEOUT_S)
            magic, version, size = PIN_PREFIX.unpack(prefix)
            if magic != PIN_REQUEST_MAGIC or not PIN_PREFIX.size <= size <= PIN_MAX_MESSAGE:
                return None  # not the plugin
            rest = await asyncio.wait_for(reader.readexactly(size - PIN_PREFIX.size), _REQUEST_READ_TIMEOUT_S)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return None  # no complete request: nothing registered, nothing to answer
        other = f"netd speaks pin protocol {PIN_PROTO_VERSION}, not {version}: not registered"
        if version == 1:
            comm_id = int.from_bytes(rest[:8], "little") if len(rest) >= 8 else 0
            writer.write(encode_v1_neutral(comm_id, other))
            return None
        if version != PIN_PROTO_VERSION or size != PIN_REQUEST.size:
            writer.write(encode_response(0, PinVerdict.neutral(other)))  # no ACK: unregistered
            return None
        return dict(zip((n for n, _ in PIN_REQUEST_FIELDS), PIN_REQUEST.unpack(prefix + rest), strict=True))

    async def _verdict(
        self, req: dict[str, int], key: PinKey, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> PinVerdict:
        if not 1 <= key.n_nodes <= key.n_ranks:
            return PinVerdict.neutral(f"invalid communicator size ({key.n_ranks} ranks, {key.n_nodes} nodes)")
        if self._active > self.max_clients:
            return PinVerdict.neutral(
                f"netd is serving {self.max_clients} communicator inits: not registered"
            )
        refusal = self.resolver.refusal(key)
        if refusal is not None:
            return PinVerdict.neutral(refusal)
        # The fence: the ACK reaches the plugin's socket first, then the clock is read. A plugin that
        # gave up at register_by without an ACK is never registered after it.
        writer.transport.set_write_buffer_limits(0)  # drain() returns only once the kernel has it all
        writer.write(_ACK)
        try:
            await writer.drain()
        except ConnectionError:
            return PinVerdict.neutral("the plugin went away before the ACK: not registered")
        now = time.monotonic_ns()  # CLOCK_MONOTONIC, the plugin's clock
        if now >= req["register_by_ns"]:
            return PinVerdict.neutral("netd took the request after its register-by time: not registered")
        budget_s = (req["deadline_ns"] - now) / 1e9
        resolving = asyncio.ensure_future(
            self.resolver.resolve(key, req["member"], req["static_digest"], budget_s)
        )
        # The plugin sends nothing more: EOF means it died (or gave up). A rank that is gone must
        # not complete a pin, so its wait is cancelled, which withdraws it from a local pin.
        try:
            verdict = await unless_gone(resolving, reader.read(1))
            return verdict or PinVerdict.neutral("the plugin went away before the verdict")
        except Exception as exc:  # a bug must not fail NCCL: "no verdict", loudly in both logs
            log.exception("nccl pin %s failed", key)
            return PinVerdict.unknown(f"netd failed while pinning ({type(exc).__name__})")


def _bind(path: Path, mode: int) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        if not stat.S_ISSOCK(path.lstat().st_mode):
            raise NetdError(
                f"nccl.socket {path} exists and is not a socket; remove it or choose another path"
            )
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # a stale socket from a previous run
        else:
            raise NetdError(f"another process serves NCCL pins at {path}; stop it or set nccl.socket")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, mode)
        sock.listen(256)
    except OSError as exc:
        sock.close()
        raise NetdError(f"cannot serve NCCL pins at {path}: {exc.strerror or exc}") from exc
    return sock

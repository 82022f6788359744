"""The Unix socket libnccl-tuner-netd.so asks at communicator init (pin protocol of netd_hints.h).

One request per connection: the plugin sends a ``netd_pin_request``; the daemon registers the rank
with the right authority — its own :class:`PinAuthority` for single-node communicators, the pin
service (:class:`RemotePins`) for multi-node ones — and answers ``netd_pin_response`` plus the
table bytes on APPLY. Every complete request gets an answer; a request the daemon refuses
before registering (bad version, too many clients, nonsense sizes) gets NEUTRAL, which is safe
because an unregistered rank keeps its communicator's pin from completing anywhere.

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
from collections.abc import Callable
from pathlib import Path

from netd.errors import NetdError
from netd.nccl.pin_client import RemotePins
from netd.nccl.pin_wire import (
    PIN_PROTO_VERSION,
    PIN_REQUEST,
    PIN_REQUEST_FIELDS,
    PIN_REQUEST_MAGIC,
    PIN_RESPONSE,
    PIN_RESPONSE_MAGIC,
    PinStatus,
)
from netd.nccl.pins import PinAuthority, PinKey, PinVerdict

__all__ = ["PinResolver", "PinSocketServer", "encode_response"]

log = logging.getLogger(__name__)

_REQUEST_READ_TIMEOUT_S = 5.0


def encode_response(comm_id: int, verdict: PinVerdict) -> bytes:
    table = verdict.table if verdict.status is PinStatus.APPLY and verdict.table else b""
    reason = verdict.reason.encode("utf-8")[:95].decode("utf-8", "ignore").encode("utf-8")
    header = PIN_RESPONSE.pack(
        PIN_RESPONSE_MAGIC,
        PIN_PROTO_VERSION,
        PIN_RESPONSE.size,
        int(verdict.status),
        len(table),
        comm_id,
        verdict.pinned_at_ns,
        reason,
    )
    return header + table


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

    async def resolve(self, key: PinKey, member: int) -> PinVerdict:
        offer = await asyncio.to_thread(self._table)  # the policy may run (once per tick)
        if key.n_nodes <= 1:
            return await self.local.join(key, member, offer, self.host)
        if self.remote is None:
            return PinVerdict.neutral(
                "multi-node communicator and no [nccl] pin_service configured: this rank is not registered"
            )
        return await self.remote.join(key, member, offer)


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
            try:
                data = await asyncio.wait_for(reader.readexactly(PIN_REQUEST.size), _REQUEST_READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return  # no complete request: nothing registered, nothing to answer
            req = dict(zip((n for n, _ in PIN_REQUEST_FIELDS), PIN_REQUEST.unpack(data), strict=True))
            if req["magic"] != PIN_REQUEST_MAGIC:
                return  # not the plugin
            key = PinKey(req["comm_id"], req["n_ranks"], req["n_nodes"])
            verdict = await self._verdict(req, key)
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

    async def _verdict(self, req: dict[str, int], key: PinKey) -> PinVerdict:
        if req["version"] != PIN_PROTO_VERSION or req["size"] != PIN_REQUEST.size:
            return PinVerdict.neutral(f"netd speaks pin protocol {PIN_PROTO_VERSION}, not {req['version']}")
        if not 1 <= key.n_nodes <= key.n_ranks:
            return PinVerdict.neutral(f"invalid communicator size ({key.n_ranks} ranks, {key.n_nodes} nodes)")
        if self._active > self.max_clients:
            return PinVerdict.neutral(
                f"netd is serving {self.max_clients} communicator inits: not registered"
            )
        try:
            return await self.resolver.resolve(key, req["member"])
        except Exception as exc:  # the rank may be registered: the plugin must not guess
            log.exception("nccl pin %s failed", key)
            return PinVerdict.fail(f"netd failed while pinning ({type(exc).__name__})")


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

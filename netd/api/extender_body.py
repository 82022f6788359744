"""The extender's request and answer bytes in the listener's process.

A full-Node filter at 5000 nodes is a ~31 MB body and a ~31 MB answer that is almost all the body's
own Node objects. Before issue 18's third round the body was joined from uvicorn's chunks, copied
through a socket pair to a worker and out of it, and the answer the same way back: ~120 ms of a
~230 ms request at load average 5. Now a body over :data:`SHARED_MIN` is written once, chunk by chunk
as it arrives, into one memfd sized by its ``Content-Length``; the worker maps that memfd (no copy),
and answers with the slices of it to echo (netd.api.extender_wire.filter_parts), which
:class:`PartsResponse` writes to the client straight from the mapping. The memfds are reused
(:class:`BodyFiles`): writing 31 MB into a new one cost 15-21 ms (the kernel allocates and clears
7,600 pages), into one that held a body before ~5 ms.
"""

from __future__ import annotations

import asyncio
import mmap
import os
import threading
from collections.abc import MutableMapping
from typing import Any

from fastapi import HTTPException, Request, Response
from starlette.types import Receive, Scope, Send

from netd.api.extender_wire import Buffer

__all__ = ["SHARED_MIN", "BodyFiles", "PartsResponse", "RequestBody"]

# below this the bytes go through the socket pair: a memfd costs two system calls and a mapping on
# each side (~0.1 ms), copying 1 MB about as much
SHARED_MIN = 1 << 20
# the server copies what the socket does not take at once into its own buffer, and waits for it to
# drain before the next message: a 25 MB slice in one message was a 20+ MB copy, 1 MB pieces are not
WRITE_PIECE = 1 << 20


class BodyFiles:
    """The memfds that held request bodies, kept for the next ones: at most ``keep`` (as many as
    requests a burst of the scheduler's has in flight), each released after ``idle_s`` unused so a
    listener that is asked once (`netd run`) does not hold 31 MB for good."""

    def __init__(self, keep: int = 2, idle_s: float = 60.0) -> None:
        self.keep, self.idle_s = keep, idle_s
        self._idle: list[tuple[int, asyncio.TimerHandle]] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> int:
        """A memfd of ``size`` bytes (its pages kept where it held a body before), positioned at 0."""
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        if kept is not None:
            fd = kept[0]
            kept[1].cancel()
        else:
            fd = os.memfd_create("netd-extender-body", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)  # the worker maps the whole file: exactly the body
            os.lseek(fd, 0, os.SEEK_SET)
        except OSError:
            os.close(fd)
            raise
        return fd

    def idle(self) -> int:
        """How many memfds are kept for the next bodies."""
        return len(self._idle)

    def give(self, fd: int) -> None:
        """``fd`` is no longer read (no mapping of it is left in this process). Kept only when given
        on an event loop, whose timer releases it; elsewhere closed."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            os.close(fd)
            return
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append((fd, loop.call_later(self.idle_s, self._expire, fd)))
                return
        os.close(fd)

    def _expire(self, fd: int) -> None:
        with self._lock:
            kept = [(f, t) for f, t in self._idle if f != fd]
            if len(kept) == len(self._idle):
                return  # taken meanwhile
            self._idle = kept
        os.close(fd)


BODY_FILES = BodyFiles()


class RequestBody:
    """A request's body: ``data`` (bytes, or a shared mapping of the memfd ``fd``; -1: none)."""

    def __init__(self, data: Buffer, fd: int = -1, files: BodyFiles | None = None) -> None:
        self.data, self.fd, self.files = data, fd, files

    @classmethod
    async def read(cls, request: Request, files: BodyFiles = BODY_FILES) -> RequestBody:
        """The body, into a memfd when its announced length is :data:`SHARED_MIN` or more (the
        guard has refused lengths over the route's limit before a byte was read)."""
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length) < SHARED_MIN:
            return cls(await request.body())
        size = int(length)
        fd = files.take(size)
        try:
            at = 0
            # written, not copied into a mapping: a write fills the memfd's pages in the kernel, a
            # fresh mapping would take a page fault per 4 KB (31 MB: 15 ms of CPU against 21-25)
            async for chunk in request.stream():
                if at + len(chunk) > size:  # the HTTP parser delivers no more than announced
                    raise HTTPException(400, "request body longer than its Content-Length")
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
                at += len(chunk)
            if at != size:  # a client that stopped sending has disconnected (request.stream raised)
                raise HTTPException(400, "request body shorter than its Content-Length")
            # the answer's slices are written to the client from this mapping
            mapped = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ)
        except BaseException:
            os.close(fd)
            raise
        return cls(mapped, fd, files)

    def close(self) -> None:
        """Release the memfd: back to its :class:`BodyFiles` once nothing here maps it, else closed
        (the mapping goes when the last view of it does: an answer being written holds slices)."""
        fd, self.fd = self.fd, -1
        unmapped = True
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.close()
            except BufferError:
                unmapped = False  # views still exported: unmapped when they are released
        if fd < 0:
            return
        if unmapped and self.files is not None:
            self.files.give(fd)  # the next body may be written over it
        else:
            os.close(fd)


class PartsResponse(Response):
    """A 200 ``application/json`` answer written as its parts (views of the worker's bytes and of the
    request's body), in ASGI messages of at most :data:`WRITE_PIECE`, under one ``Content-Length``:
    the server writes each as the socket drains, so the answer is never joined or buffered whole."""

    def __init__(self, parts: list[memoryview], headers: MutableMapping[str, str], body: RequestBody) -> None:
        super().__init__(b"", 200, dict(headers), "application/json")
        self.parts, self.request_body = parts, body
        length = str(sum(len(p) for p in parts)).encode()
        self.raw_headers = [(k, length if k == b"content-length" else v) for k, v in self.raw_headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._send(send)
        finally:
            self.parts = []  # the last views of the body's mapping, so that it can be unmapped
            self.request_body.close()

    async def _send(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        await send(start)
        for part in self.parts:
            for at in range(0, len(part), WRITE_PIECE):
                piece = part[at : at + WRITE_PIECE]
                message: dict[str, Any] = {"type": "http.response.body", "body": piece, "more_body": True}
                await send(message)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

"""The extender's request and answer bytes in the listener's process.

A full-Node filter at 5000 nodes is a ~31 MB body and a ~31 MB answer that is almost all the body's
own Node objects. Before issue 18's third round the body was joined from uvicorn's chunks, copied
through a socket pair to a worker and out of it, and the answer the same way back: ~120 ms of a
~230 ms request at load average 5. Now a body over :data:`SHARED_MIN` is written once, chunk by chunk
as it arrives, into one memfd sized by its ``Content-Length``; the worker maps that memfd (no copy),
and answers with the slices of it to echo (netd.api.extender_wire.filter_parts), which
:class:`PartsResponse` writes to the client straight from the mapping.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import MutableMapping
from typing import Any

from fastapi import HTTPException, Request, Response
from starlette.types import Receive, Scope, Send

from netd.api.extender_wire import Buffer

__all__ = ["SHARED_MIN", "PartsResponse", "RequestBody"]

# below this the bytes go through the socket pair: a memfd costs two system calls and a mapping on
# each side (~0.1 ms), copying 1 MB about as much
SHARED_MIN = 1 << 20
# the server copies what the socket does not take at once into its own buffer, and waits for it to
# drain before the next message: a 25 MB slice in one message was a 20+ MB copy, 1 MB pieces are not
WRITE_PIECE = 1 << 20


class RequestBody:
    """A request's body: ``data`` (bytes, or a shared mapping of the memfd ``fd``; -1: none)."""

    def __init__(self, data: Buffer, fd: int = -1) -> None:
        self.data, self.fd = data, fd

    @classmethod
    async def read(cls, request: Request) -> RequestBody:
        """The body, into a memfd when its announced length is :data:`SHARED_MIN` or more (the
        guard has refused lengths over the route's limit before a byte was read)."""
        length = request.headers.get("content-length", "")
        if not length.isdigit() or int(length) < SHARED_MIN:
            return cls(await request.body())
        size = int(length)
        fd = os.memfd_create("netd-extender-body", os.MFD_CLOEXEC)
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
        return cls(mapped, fd)

    def close(self) -> None:
        """Release the memfd; the mapping goes when the last view of it does (an answer being
        written still holds slices of it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if isinstance(self.data, mmap.mmap):
            try:
                self.data.close()
            except BufferError:
                pass  # views still exported: unmapped when they are released


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
            start = {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            await send(start)
            for part in self.parts:
                for at in range(0, len(part), WRITE_PIECE):
                    piece = part[at : at + WRITE_PIECE]
                    message: dict[str, Any] = {"type": "http.response.body", "body": piece, "more_body": True}
                    await send(message)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.request_body.close()

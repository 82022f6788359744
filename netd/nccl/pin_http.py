"""A lean HTTP/1.1 client for the one call a daemon makes to the pin service: POST a small JSON body.

Why not httpx: a pin is a latency budget of a few hundred milliseconds shared by every host of a
communicator, and httpx's per-request work (and its connection pool's scan, linear in open
connections) made a 4096-rank registration CPU-bound on the daemon side of `netd bench pins`.
This speaks exactly what the pin route needs — keep-alive connections, Content-Length bodies,
bearer token, http or https — and reports, besides the answer, the one fact the consistency
rule needs: whether the request may have reached the service (``sent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["PinHttp", "PostResult"]

_MAX_HEAD = 16 << 10
_MAX_BODY = 1 << 20
_IDLE_S = 2.0  # reuse only connections idle for less: servers close idle ones (uvicorn after 5 s)


@dataclass(frozen=True, slots=True)
class PostResult:
    sent: bool  # False: the connection was never made, so nothing reached the service
    status: int = 0  # HTTP status; 0 when no complete answer came
    body: bytes = b""
    error: str = ""


class PinHttp:
    def __init__(self, base_url: str, token: str | None, tls: ssl.SSLContext | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.tls = (tls or ssl.create_default_context()) if parts.scheme == "https" else None
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._head = f"Host: {parts.netloc}\r\nContent-Type: application/json\r\n{auth}".encode()
        self._idle: list[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]] = []

    def _reuse(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        now = time.monotonic()
        while self._idle:
            since, reader, writer = self._idle.pop()
            if now - since < _IDLE_S and not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return None

    async def connect(self, timeout_s: float) -> bool:
        """Open one keep-alive connection ahead of need (a running daemon's steady state)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=self.tls), timeout_s
            )
        except (OSError, TimeoutError, ssl.SSLError):
            return False
        self._idle.append((time.monotonic(), reader, writer))
        return True

    async def post(self, path: str, body: bytes, timeout_s: float) -> PostResult:
        try:
            conn = self._reuse()
            if conn is None:
                conn = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port, ssl=self.tls), timeout_s
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            return PostResult(False, error=f"{type(exc).__name__}: {exc}")
        reader, writer = conn
        request = b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s" % (
            (self.prefix + path).encode(),
            self._head,
            len(body),
            body,
        )
        try:
            writer.write(request)
            # asyncio.timeout, not wait_for: no task per request (512 of them per big communicator)
            async with asyncio.timeout(timeout_s):
                status, answer, keep = await _read_response(reader)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, ssl.SSLError) as exc:
            writer.close()
            return PostResult(True, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        except asyncio.CancelledError:
            writer.close()
            raise
        if keep:
            self._idle.append((time.monotonic(), reader, writer))
        else:
            writer.close()
        return PostResult(True, status, answer)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, _, writer in idle:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, keep-alive) of one Content-Length response; ValueError for anything else."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > _MAX_HEAD:
        raise ValueError("response head too large")
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
    }
    if "content-length" not in headers:
        raise ValueError("response without Content-Length")
    length = int(headers["content-length"])
    if not 0 <= length <= _MAX_BODY:
        raise ValueError(f"response body of {length} bytes")
    body = await reader.readexactly(length)
    keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return int(rest[:3]), body, keep

"""Files an operator names: the configuration, the API token, a topology file.

Each is read whole, and only when it is a regular file. It is opened non-blocking: a FIFO at the path
(planted, or left by a tool) would otherwise block ``open()`` until a writer came. That happens at
netd's start, or in a SIGHUP reload on the thread that serves HTTP, so the service would hang with no
message. A directory (a Kubernetes ConfigMap mounted without ``subPath`` makes one at the file's path)
or a device is refused the same way, with a reason an operator can act on.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["NotARegularFile", "read_regular"]

# O_NONBLOCK: regular files ignore it; a FIFO opens at once (and is refused below) instead of waiting.
_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


class NotARegularFile(OSError):
    """The path names a directory, a FIFO, a socket or a device."""

    def __init__(self, path: Path | str, mode: int) -> None:
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        super().__init__(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, kind, str(path))


def read_regular(path: Path | str) -> bytes:
    """The whole content of ``path``. Raises :class:`OSError`, :class:`NotARegularFile` included; its
    ``strerror`` says why ("No such file or directory", "a directory", "not a regular file", ...)."""
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path, mode)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)

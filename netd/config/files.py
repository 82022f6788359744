"""Files an operator names (the configuration, the API token, a topology file), and the per-user
directory of a netd that does not run as root.

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
import tempfile
from pathlib import Path

from netd.errors import ConfigError

__all__ = ["NotARegularFile", "per_user_dir", "read_regular"]

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


def per_user_dir(xdg_variable: str, uid: int | None = None) -> Path:
    """``$<xdg_variable>/netd-<uid>``, else ``<temporary directory>/netd-<uid>``: where a netd that does
    not run as root keeps its NCCL socket, tuning journal and emulated fabric. Made 0700 when missing,
    and refused unless it is a directory of this user's that nobody else may write to: in a shared
    ``/tmp`` anyone can make that name first (or a link by it), then serve the socket NCCL connects to
    or rewrite the journal and the counters netd reads (tmux refuses its ``/tmp/tmux-<uid>`` on the
    same grounds). One that others may only read (an older netd's, made with the umask's 0755) is
    closed to 0700."""
    uid = os.getuid() if uid is None else uid
    path = Path(os.environ.get(xdg_variable) or tempfile.gettempdir()) / f"netd-{uid}"
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise ConfigError(f"cannot make netd's directory {path}: {exc.strerror or exc}") from exc
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        problem = "a link" if stat.S_ISLNK(st.st_mode) else "not a directory"
    elif st.st_uid != uid:
        problem = f"owned by uid {st.st_uid}"
    elif st.st_mode & 0o022:  # others could have put anything in it: nothing there can be trusted
        problem = f"writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    else:
        if st.st_mode & 0o077:
            # Ours, readable by others (an older netd made it with the umask's 0755): nobody else could
            # add or replace anything in it, so closing it is enough.
            os.chmod(path, 0o700)
        return path
    raise ConfigError(
        f"{path} is {problem}, not a private directory of uid {uid}: remove it, or set ${xdg_variable} "
        "to a directory of your own"
    )

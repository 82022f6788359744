"""Reading sysfs-shaped files: one errno policy, and a bounded number of descriptors kept open.

The errno policy (docs/architecture.md, Safety rules) lives here and nowhere else:

* ENOENT, ENODEV, ENXIO, EACCES, EPERM, EINVAL, EOPNOTSUPP, EIO-free "not
  there" cases mean *absent*: the reader returns ``None``.
* Anything else (EIO, ENOMEM, EBADF, ...) raises :class:`SourceError`.

A file an operator names (:func:`read_regular_file`: a topology file, lldpcli's JSON) is different:
asked for, it must be there, so every failure raises.

sysfs attributes support ``pread`` at offset 0, which makes the kernel
regenerate the value; so a :class:`PreadCache` keeps one descriptor per file
and re-reads it with a single syscall per tick instead of open/read/close
(three syscalls plus a path walk). When a device disappears, its descriptors
fail with ENODEV (real sysfs) or keep pointing at unlinked files (a fake tree
rewritten by replacement), so callers drop them with :meth:`PreadCache.forget`
when they see the device directory change identity.

**Budget.** One descriptor per counter file is ~56 per port: 16 ports took 909 descriptors and 20
did not start under the common 1024 limit. A cache keeps at most ``max_open`` descriptors (the
first files it is asked for: a stable set, since a tick reads in the same order) and reads every
other file with open-pread-close, so netd's descriptors do not grow with the number of ports.

**Directories.** Past the budget, a file is opened by name relative to a kept descriptor of its
directory (``openat``) rather than by its full path: the kernel walks one component instead of
nine, ~30 % of an open-pread-close on a replayed tree (sysfs is no cheaper). A kept directory
serves every file in it (a port's ~30 ``hw_counters``), so directory descriptors are worth far more
of the budget than file descriptors: at most ``max_dirs`` are kept, the first directories asked for.
A kept file saves ~4 µs a tick, a kept ``hw_counters`` directory ~45 µs, so netd's RDMA source keeps
directories only (``DEFAULT_MAX_OPEN`` 0, ``DEFAULT_MAX_DIRS`` 24: 12 ports' two counter directories).

**Replayed trees.** A kept descriptor of a file that was replaced by rename or deleted keeps
reading the old inode: a frozen value, forever. With ``verify`` (every root that is not the real
``/sys``, where files are never replaced), each kept descriptor is checked with one ``fstat``
before it is read: an unlinked inode is closed and the path opened again, so a replaced file reads
its new value and a vanished one is absent (the caller reports it), never frozen. A kept directory
is checked once per :meth:`PreadCache.read_many` (its path's identity against the descriptor's,
taken when it was opened): a directory replaced by rename or removed is closed, and its files are
opened by full path again.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from netd.config.files import read_regular
from netd.errors import SourceError

__all__ = [
    "ABSENT_ERRNOS",
    "DEFAULT_MAX_DIRS",
    "DEFAULT_MAX_OPEN",
    "PreadCache",
    "READ_FLAGS",
    "list_dir",
    "read_regular_file",
    "read_text",
    "stat_identity",
]

# Errors that mean "this value is not available here", not "something broke".
# EINVAL: empty GID slots; EOPNOTSUPP: hw_counters a firmware cannot serve;
# ENODEV/ENXIO: device went away between listdir and read.
ABSENT_ERRNOS = frozenset(
    {
        errno.ENOENT,
        errno.ENODEV,
        errno.ENXIO,
        errno.EACCES,
        errno.EPERM,
        errno.EINVAL,
        errno.EOPNOTSUPP,
        errno.ENOTDIR,
    }
)

_READ_SIZE = 4096  # every sysfs attribute fits in one page
# descriptors one cache keeps (netd.daemon.limits: netd's descriptor budget): files, directories
DEFAULT_MAX_OPEN = 0
DEFAULT_MAX_DIRS = 24
# O_NONBLOCK: sysfs attributes and regular files ignore it, but a FIFO (or a terminal) planted in a
# replayed tree would otherwise block open() until a writer came, and with it the tick, forever. Opened
# non-blocking, a FIFO reads as empty or fails (pread on a pipe: ESPIPE), and only that file is bad.
READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK


def _absent_or_raise(source: str, path: str | Path, exc: OSError) -> None:
    """Return (the caller reports absence) or raise SourceError, by the errno policy."""
    if exc.errno in ABSENT_ERRNOS:
        return
    raise SourceError(source, f"reading {path}: {exc.strerror or exc}") from exc


def read_text(path: Path, source: str = "sysfs") -> str | None:
    """The stripped text of a small file, or None when absent under the errno policy."""
    try:
        fd = os.open(path, READ_FLAGS)
        try:
            data = os.read(fd, _READ_SIZE)
        finally:
            os.close(fd)
    except OSError as exc:
        _absent_or_raise(source, path, exc)
        return None
    return data.decode("utf-8", "replace").strip()


def read_regular_file(path: Path, source: str) -> str:
    """The whole UTF-8 text of a file an operator or a replayed tree names (a topology file, lldpcli's
    JSON), re-read by a background refresh. Refused unless it is a regular file
    (:func:`netd.config.files.read_regular`): a FIFO planted there would otherwise stop the refresh in
    open() for good (holding its lock), and a device could be read forever. Every failure, absence
    included, raises :class:`SourceError`."""
    try:
        data = read_regular(path)
    except OSError as exc:
        raise SourceError(source, f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(source, f"cannot read {path}: not UTF-8 (byte {exc.start})") from exc


def list_dir(path: Path, source: str = "sysfs") -> list[str]:
    """Sorted entry names of a directory; [] when absent."""
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        _absent_or_raise(source, path, exc)
        return []


def stat_identity(path: str | Path) -> tuple[int, int, int] | None:
    """(st_dev, st_ino, st_ctime_ns) of a path, following symlinks; None when it does not exist.

    ctime is part of the identity because ext4 (where fake trees live) reuses a deleted
    directory's inode number for the next one created.

    Used to notice that a device directory was removed and recreated (hot
    unplug, driver reload, an emulator restart) so that cached descriptors
    are reopened.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


class PreadCache:
    """Open-once, pread-many access to a set of small files, with at most ``max_open`` kept.

    Not thread-safe: one cache belongs to one source, used by one loop.
    """

    def __init__(
        self,
        source: str = "sysfs",
        max_open: int = DEFAULT_MAX_OPEN,
        verify: bool = False,
        max_dirs: int = 0,
    ) -> None:
        self._source = source
        self._fds: dict[str, int] = {}
        # directory path -> its kept descriptor (openat past the budget) and that descriptor's
        # (st_dev, st_ino), taken when it was opened: an open descriptor's identity never changes, so
        # verifying a kept directory needs no fstat of it
        self._dirs: dict[str, tuple[int, tuple[int, int]]] = {}
        self._max_open = max_open
        self._max_dirs = max_dirs
        self._verify = verify
        self.opens = 0  # for tests and the benchmark: how many open() calls were made
        self.transient = 0  # reads made by open-pread-close because the budget was full
        self.replaced = 0  # kept descriptors found pointing at a replaced or deleted file

    def read(self, path: str, size: int = _READ_SIZE) -> bytes | None:
        """Raw bytes of ``path`` (one pread of at most ``size`` bytes), or None when absent.

        A small ``size`` suits counters ("%llu\n" is at most 21 bytes) and saves allocating a
        page per read; a caller that gets exactly ``size`` bytes back reads again with more.
        """
        fd = self._fds.get(path)
        if fd is not None and self._verify and self._unlinked(path, fd):
            fd = None
        if fd is None:
            try:
                fd = os.open(path, READ_FLAGS)
            except OSError as exc:
                _absent_or_raise(self._source, path, exc)
                return None
            self.opens += 1
            if len(self._fds) >= self._max_open:
                self.transient += 1
                try:
                    return os.pread(fd, size, 0)
                except OSError as exc:
                    _absent_or_raise(self._source, path, exc)
                    return None
                finally:
                    os.close(fd)
            self._fds[path] = fd
        try:
            return os.pread(fd, size, 0)
        except OSError as exc:
            # A descriptor that went bad (device gone) is dropped so the next
            # tick reopens the path, which may by then exist again.
            self._close(path)
            _absent_or_raise(self._source, path, exc)
            return None

    def read_many(self, paths: Sequence[str], size: int = _READ_SIZE) -> list[bytes | None | SourceError]:
        """:meth:`read` for many paths, one result per path; an error is returned in place, not raised,
        so one bad file never hides the others. The loop is the per-tick hot path of a host with
        hundreds of counter files: already-open descriptors take a single pread and nothing else
        (plus one fstat with ``verify``)."""
        fds = self._fds
        pread = os.pread
        fast = not self._verify
        full = len(fds) >= self._max_open
        dirs: dict[str, int | None] = {}  # this call's directory descriptors, checked once each
        out: list[bytes | None | SourceError] = []
        for path in paths:
            fd = fds.get(path)
            if fd is not None and fast:
                try:
                    out.append(pread(fd, size, 0))
                    continue
                except OSError:
                    pass  # the careful path below closes, reopens and applies the errno policy
            elif fd is None and full and self._max_dirs:
                head, _, name = path.rpartition("/")
                dfd = dirs[head] if head in dirs else dirs.setdefault(head, self._dir(head))
                if dfd is not None:
                    try:
                        fd = os.open(name, READ_FLAGS, dir_fd=dfd)
                    except OSError:
                        pass  # by full path below, which applies the errno policy
                    else:
                        self.opens += 1
                        self.transient += 1
                        try:
                            out.append(pread(fd, size, 0))
                            continue
                        except OSError:
                            pass
                        finally:
                            os.close(fd)
            try:
                out.append(self.read(path, size))
            except SourceError as exc:
                out.append(exc)
        return out

    def read_dir(
        self, directory: str, names: Sequence[str], size: int = _READ_SIZE
    ) -> list[bytes | None | SourceError]:
        """:meth:`read_many` of ``directory/name`` for each name: the per-tick path of a counter
        directory once no file descriptor is kept, with one directory check and the fewest steps
        per file (open by name, pread, close). Anything unusual takes :meth:`read_many`."""
        dfd = None
        if not self._fds and self._max_open <= 0:
            dfd = self._dir(directory)
        if dfd is None:
            return self.read_many([f"{directory}/{n}" for n in names], size)
        open_, pread, close = os.open, os.pread, os.close
        out: list[bytes | None | SourceError] = []
        opened = 0
        for name in names:
            try:
                fd = open_(name, READ_FLAGS, dir_fd=dfd)
            except OSError:
                out.extend(self.read_many([f"{directory}/{name}"], size))  # the errno policy decides
                continue
            opened += 1
            try:
                out.append(pread(fd, size, 0))
            except OSError:
                out.extend(self.read_many([f"{directory}/{name}"], size))
            finally:
                close(fd)
        self.opens += opened
        self.transient += opened
        return out

    def _dir(self, path: str) -> int | None:
        """A kept descriptor of directory ``path`` (opened now when there is room), or None: then its
        files are opened by full path. With ``verify``, a kept one whose path now names another
        directory (replaced by rename) or nothing is closed first."""
        kept = self._dirs.get(path)
        dfd = None if kept is None else kept[0]
        if kept is not None and self._verify:
            try:
                st = os.stat(path)
                same = (st.st_dev, st.st_ino) == kept[1]
            except OSError:
                same = False
            if not same:
                self.replaced += 1
                self._close_dir(path)
                dfd = None
        if dfd is None and len(self._dirs) < self._max_dirs:
            try:
                dfd = os.open(path, READ_FLAGS | os.O_DIRECTORY)
            except OSError:
                return None
            try:
                st = os.fstat(dfd)
            except OSError:
                os.close(dfd)
                return None
            self._dirs[path] = (dfd, (st.st_dev, st.st_ino))
            self.opens += 1
        return dfd

    def _unlinked(self, path: str, fd: int) -> bool:
        """Whether a kept descriptor reads a file no longer in the tree (then it is closed)."""
        try:
            gone = os.fstat(fd).st_nlink == 0
        except OSError:
            gone = True
        if gone:
            self.replaced += 1
            self._close(path)
        return gone

    def forget(self, prefix: str) -> None:
        """Close every descriptor whose path starts with ``prefix``."""
        for path in [p for p in self._fds if p.startswith(prefix)]:
            self._close(path)
        for path in [p for p in self._dirs if f"{p}/".startswith(prefix)]:
            self._close_dir(path)

    def close(self) -> None:
        for path in list(self._fds):
            self._close(path)
        for path in list(self._dirs):
            self._close_dir(path)

    def __len__(self) -> int:
        """Descriptors kept open: files and directories."""
        return len(self._fds) + len(self._dirs)

    def _close(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def _close_dir(self, path: str) -> None:
        os.close(self._dirs.pop(path)[0])

    def __del__(self) -> None:  # best effort; the daemon calls close() explicitly
        try:
            self.close()
        except Exception:
            pass

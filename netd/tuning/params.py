"""Reading and writing one DCQCN parameter file so that no crash can leave it empty or half-written.

A parameter file is one of two things, told apart by the filesystem it lives on (statfs f_type):

* a **kernel attribute** (mlx5 debugfs ``cc_params``, MLNX_OFED sysfs ``ecn/``): a write is a command
  the driver parses whole. It gets exactly one ``pwrite()`` of the whole value at offset 0 on a
  descriptor opened *without* ``O_TRUNC`` (``echo N >`` truncates first; a kill between the two
  could leave an attribute a driver exposes as storage empty). A short write is a failure.
* a **regular file** (the emulated fabric's tree, a captured or test tree): replaced atomically
  (temporary file, fsync, rename, directory fsync), so a reader — the emulator, or recovery after a
  kill — sees the old value or the new one, never a truncated or empty file.

Every read and write error (EIO, EPERM, ENOSPC, a short write, a value that reads back different)
is a :class:`~netd.errors.TuningError` naming the file: the applier undoes the change set on any.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from netd.errors import TuningError
from netd.tuning.files import KERNEL_FS_MAGIC, Files, atomic_replace, read_bytes

__all__ = ["is_kernel_attribute", "read_param", "write_param", "write_verified"]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def is_kernel_attribute(files: Files, path: Path) -> bool:
    try:
        return files.fs_magic(path.parent) in KERNEL_FS_MAGIC
    except OSError as exc:
        raise TuningError(f"cannot tell what filesystem holds {path}: {_why(exc)}") from exc


def read_param(files: Files, path: Path) -> int:
    """The value in ``path``; any error (including an absent file) is a TuningError."""
    try:
        text = read_bytes(files, path).decode("ascii", "replace").strip()
    except OSError as exc:
        raise TuningError(f"reading {path} failed: {_why(exc)}") from exc
    try:
        return int(text, 10)
    except ValueError:
        raise TuningError(f"{path}: expected an unsigned integer, read {text[:40]!r}") from None


def write_param(files: Files, path: Path, value: int) -> None:
    data = f"{int(value)}\n".encode()
    kernel = is_kernel_attribute(files, path)
    try:
        if not kernel:
            fd = files.open(path, os.O_RDONLY)
            try:
                mode = files.fstat(fd).st_mode & 0o777
            finally:
                files.close(fd)
            atomic_replace(files, path, data, mode)
            return
        fd = files.open(path, os.O_WRONLY)  # no O_TRUNC: the one write below is the whole change
        try:
            n = files.pwrite(fd, data, 0)
        finally:
            files.close(fd)
        if n != len(data):
            raise OSError(errno.EIO, f"short write: {n} of {len(data)} bytes")
    except OSError as exc:  # EINVAL: the firmware refused the value; EIO: the command failed
        raise TuningError(f"writing {value} to {path} failed: {_why(exc)}") from exc


def write_verified(files: Files, path: Path, value: int) -> None:
    """Write ``value`` and read it back; a different value (the firmware clamped it) is a failure."""
    write_param(files, path, value)
    back = read_param(files, path)
    if back != value:
        raise TuningError(f"{path}: wrote {value} but it reads back {back}; the device did not take it")

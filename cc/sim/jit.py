"""numba for the simulator's step kernel, with its on-disk cache in a directory the process can write.

numba compiles a kernel on its first call (about a second per kernel here) and can keep the machine
code on disk, keyed by the source file and the argument types, so later processes load it instead.
Where that cache goes matters for the daemon: under systemd with ``ProtectSystem=strict`` the
package directory and ``$HOME`` are read-only, and numba's default (``__pycache__`` beside the
source) would fail there. The first writable one of these is used, unless ``NUMBA_CACHE_DIR`` is set
already:

1. ``$NETD_CACHE_DIR/numba`` (an operator's explicit choice);
2. ``$CACHE_DIRECTORY/numba`` and ``$STATE_DIRECTORY/numba``, which systemd sets for a unit with
   ``CacheDirectory=``/``StateDirectory=`` (netd.service has ``StateDirectory=netd``);
3. ``$XDG_CACHE_HOME/netd/numba`` or ``~/.cache/netd/numba``;
4. ``<tempdir>/netd-numba-<uid>``.

If none is writable the kernels are compiled in every process (``cached()`` is False): slower to
start, never wrong. The directory must be chosen before numba is imported, because numba reads
``NUMBA_CACHE_DIR`` once, at import.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = ["cache_dir", "cached", "kernel"]

F = TypeVar("F", bound=Callable[..., Any])


def _candidates(env: Mapping[str, str]) -> list[Path]:
    out = [
        Path(env[name]) / "numba"
        for name in ("NETD_CACHE_DIR", "CACHE_DIRECTORY", "STATE_DIRECTORY")
        if env.get(name)
    ]
    xdg = env.get("XDG_CACHE_HOME") or (str(Path(env["HOME"]) / ".cache") if env.get("HOME") else "")
    if xdg:
        out.append(Path(xdg) / "netd" / "numba")
    out.append(Path(tempfile.gettempdir()) / f"netd-numba-{os.getuid()}")
    return out


def _writable(path: Path) -> bool:
    """Create ``path`` if needed and prove it writable by creating a file in it."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            return True
    except OSError:
        return False


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The cache directory to use (``NUMBA_CACHE_DIR`` if set and writable), or None."""
    env = os.environ if env is None else env
    preset = env.get("NUMBA_CACHE_DIR")
    candidates = [Path(preset)] if preset else _candidates(env)
    return next((p for p in candidates if _writable(p)), None)


_CACHE = cache_dir()
if _CACHE is not None:
    os.environ["NUMBA_CACHE_DIR"] = str(_CACHE)

import numba  # noqa: E402  (after NUMBA_CACHE_DIR is settled: numba reads it at import)


def cached() -> bool:
    """Whether compiled kernels are kept on disk between processes."""
    return _CACHE is not None


def kernel(fn: F) -> F:
    """Compile ``fn`` in nopython mode, strict IEEE arithmetic (no fastmath: no reassociation or
    contraction, so the kernel rounds exactly as numpy's element-wise operations do), cached when a
    directory allows."""
    return cast(F, numba.njit(cache=cached(), fastmath=False, nogil=True)(fn))  # a Dispatcher, called like fn

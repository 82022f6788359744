"""A helper process of the listener's, and the socket pair between them: the extender's workers
(netd.api.extender_pool) and netd fabric's view process (netd.cluster.remote) are started this way,
and lower their own priority for work that may take longer (:func:`lower_priority`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from netd.errors import NetdError

__all__ = ["BACKGROUND_NICE", "SOCKET_BUFFER", "lower_priority", "spawn"]

SOCKET_BUFFER = 4 << 20
# Work a request never waits for (a worker's table roll-out, a view refresh): ~10 % of a core against
# a busy nice-0 task instead of half of it
BACKGROUND_NICE = 10
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the directory holding netd/


def spawn(command: Sequence[str], what: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start ``command`` with the number of its end of a new socket pair appended, and return it and
    our end. The child finds this netd (the directory holding the package leads its PYTHONPATH, as
    for ``python -m netd``, whatever the working directory) and reads nothing from stdin.
    ``what`` names it in the error (a :class:`NetdError`) when it cannot start."""
    ours, theirs = socket.socketpair()
    for sock, opt in itertools.product((ours, theirs), (socket.SO_SNDBUF, socket.SO_RCVBUF)):
        # fewer, larger writes for a 25 MB body or view (the kernel caps this at net.core.wmem_max)
        sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (_PACKAGE_ROOT, env.get("PYTHONPATH"))))
    try:
        popen = subprocess.Popen(
            [*command, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except OSError as exc:
        ours.close()
        raise NetdError(f"cannot start {what} ({command[0]}): {exc.strerror or exc}") from exc
    finally:
        theirs.close()
    return popen, ours


def lower_priority() -> None:
    """Raise the calling thread's nice to :data:`BACKGROUND_NICE` (threads it starts afterwards
    inherit it; a higher nice is kept). Linux's nice applies per thread, and raising it needs no
    privilege; not Linux, or a sandbox that forbids it: the work runs at the priority it has."""
    with contextlib.suppress(OSError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), BACKGROUND_NICE))

"""A helper process of the listener's, and the socket pair between them: the extender's workers
(netd.api.extender_pool) and netd fabric's view process (netd.cluster.remote) are started this way."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from netd.errors import NetdError

__all__ = ["SOCKET_BUFFER", "spawn"]

SOCKET_BUFFER = 4 << 20
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

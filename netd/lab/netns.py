"""Small system helpers for the lab: namespaces, batched ip/tc commands, processes in namespaces.

iproute2 does the configuration (``ip -n NS -batch -``): one process per namespace and step, the
commands readable in an error message exactly as a user would type them. ``setns`` (through libc,
Python 3.11 has no ``os.setns``) is only used where a descriptor must be *created* inside a namespace
(AF_PACKET sockets, BPF attachments); it switches the calling thread and always switches back.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from netd.errors import LabError
from netd.sources.procfs import proc_stat

__all__ = [
    "NETNS_DIR",
    "in_netns",
    "ip_batch",
    "kill_pids",
    "list_netns",
    "netns_pids",
    "pid_alive",
    "reap",
    "run",
    "spawn",
    "tc_batch",
]

NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def run(cmd: Sequence[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(list(cmd), input=stdin, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise LabError(f"{cmd[0]} is not installed (the lab needs iproute2; run `make setup`)") from None
    if check and proc.returncode != 0:
        shown = " ".join(cmd) + (f" <<'EOF'\n{stdin}EOF" if stdin else "")
        raise LabError(f"command failed ({proc.returncode}): {shown}\n{proc.stderr.strip()}")
    return proc


def ip_batch(netns: str | None, lines: Iterable[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    if text:
        run(["ip", *(["-n", netns] if netns else []), "-batch", "-"], stdin=text)


def tc_batch(netns: str, lines: Iterable[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    if text:
        run(["tc", "-n", netns, "-batch", "-"], stdin=text)


def list_netns(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(NETNS_DIR) if n.startswith(prefix))
    except FileNotFoundError:
        return []


def _ns_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def netns_pids(netns: str) -> list[int]:
    """Processes whose network namespace is ``netns`` (what ``ip netns pids`` does)."""
    target = _ns_id(str(NETNS_DIR / netns))
    if target is None:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _ns_id(f"/proc/{entry}/ns/net") == target:
            pids.append(int(entry))
    return pids


def pid_alive(pid: int, proc: Path = Path("/proc")) -> bool:
    """Whether ``pid`` runs (a zombie does not). The process may exit between the signal test and the
    read of its stat: a read that fails (ENOENT, or ESRCH once the task is gone) means it is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    st = proc_stat(pid, proc)
    return st is not None and st.state != "Z"


def kill_pids(pids: Iterable[int], grace_s: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is still there after ``grace_s``; reaps our own children."""
    pending = [p for p in set(pids) if p > 1 and p != os.getpid()]
    everyone = list(pending)
    for pid in pending:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    while pending and time.monotonic() < deadline:
        reap(pending)
        pending = [p for p in pending if pid_alive(p)]
        if pending:
            time.sleep(0.02)
    for pid in pending:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)  # our child: SIGKILL is quick; not ours: ChildProcessError at once
        except (ProcessLookupError, ChildProcessError):
            pass
    reap(everyone)


def reap(pids: Iterable[int]) -> None:
    """Collect our own exited children (spawned by this process); others are not ours to wait for."""
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass


def spawn(argv: Sequence[str], log_path: Path, netns: str | None = None) -> int:
    """Start a long-lived process in its own session (``ip netns exec`` execs in place, so the pid
    is the program's), stdout and stderr to ``log_path``; returns its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full = ["ip", "netns", "exec", netns, *argv] if netns else list(argv)
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    try:
        return os.posix_spawnp(full[0], full, dict(os.environ), file_actions=actions, setsid=True)
    except FileNotFoundError:
        raise LabError(f"{full[0]} is not installed") from None


@contextmanager
def in_netns(netns: str) -> Iterator[None]:
    """Run the block with the calling thread in ``netns`` (for creating sockets there)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        os.close(own)
        raise LabError(f"network namespace {netns} does not exist (is the lab up?)") from None
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(target)
        os.close(own)


def _setns(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise LabError(f"setns failed: {os.strerror(err)}")

"""Network namespaces and lldpd instances for integration tests: unique names, always cleaned up."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.netns import add_netns, del_netns

__all__ = ["lldpd", "lldpd_socket_dir", "need_root_tools", "run", "two_namespaces", "wait_for"]


def need_root_tools(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def run(*cmd: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def wait_for(predicate, timeout_s: float = 15.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextmanager
def lldpd_socket_dir() -> Iterator[Path]:
    """A directory for control sockets that lldpcli can reach: it drops to the _lldpd group, so pytest's
    private (0700) tmp_path will not do."""
    path = Path(tempfile.mkdtemp(prefix="netd-lldp-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def two_namespaces(prefix: str = "nsvc") -> Iterator[tuple[str, str, str, str]]:
    """(ns_switch, ns_host, if_switch, if_host): a veth pair between two fresh namespaces."""
    tag = secrets.token_hex(3)
    ns_a, ns_b = f"{prefix}a{tag}", f"{prefix}b{tag}"
    if_a, if_b = f"sw{tag}", f"ho{tag}"
    try:
        add_netns(ns_a)
        add_netns(ns_b)
        run("ip", "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b)
        for ns, ifname, addr in ((ns_a, if_a, "192.0.2.1/30"), (ns_b, if_b, "192.0.2.2/30")):
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "addr", "add", addr, "dev", ifname)
            run("ip", "-n", ns, "link", "set", ifname, "up")
        yield ns_a, ns_b, if_a, if_b
    finally:
        del_netns(ns_a, ns_b)  # deleting a namespace deletes its end of the veth pair


# lldpd forks a privilege-separated child that outlives its monitor by a moment; where PID 1 does not
# reap orphans (containers) it would stay a zombie. This wrapper is a child subreaper for lldpd: it
# ignores the SIGTERM sent to its process group and exits once every descendant has been reaped.
_REAPER = """
import ctypes, os, signal, subprocess, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen(sys.argv[1:], preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


@contextmanager
def lldpd(netns: str, interface: str, socket_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """lldpd in the foreground (-d) inside ``netns`` with its own control socket; stopped on exit."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _REAPER,
            "ip",
            "netns",
            "exec",
            netns,
            "lldpd",
            "-d",
            "-u",
            str(socket_path),
            "-I",
            interface,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: socket_path.exists() or proc.poll() is not None, what=f"lldpd socket {socket_path}")
        if proc.poll() is not None:
            raise RuntimeError(f"lldpd in {netns} exited with {proc.returncode}")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # lldpd and its child; the wrapper reaps them and exits
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        socket_path.unlink(missing_ok=True)

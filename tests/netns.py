"""Network namespaces for the root tests: create them under unique names, always delete them, run
commands in them, and enter one from Python.

Entering is netd's own :func:`netd.lab.netns.in_netns` (``setns`` moves the calling thread only, which
is what a test wants for opening a socket or an ioctl descriptor inside a namespace).
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from netd.lab.netns import in_netns as inside

__all__ = ["add_netns", "del_netns", "inside", "ip", "netns_exec", "throwaway_netns"]


def ip(*argv: str) -> str:
    """``ip ARGV...``; its stdout (raises CalledProcessError on failure)."""
    return subprocess.run(["ip", *argv], check=True, capture_output=True, text=True).stdout


def netns_exec(netns: str, *argv: str) -> str:
    """Run a command inside ``netns``; its stdout."""
    return ip("netns", "exec", netns, *argv)


def add_netns(name: str, *, ipv6: bool = True) -> None:
    """Create namespace ``name``; ``ipv6=False`` turns IPv6 off in it, because router solicitations and
    duplicate address detection would add frames that no test sent."""
    ip("netns", "add", name)
    if not ipv6:
        netns_exec(
            name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"
        )


def del_netns(*names: str) -> None:
    """Delete namespaces, whether or not they exist (cleanup must not fail); their interfaces go too."""
    for name in names:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


@contextmanager
def throwaway_netns(prefix: str, *, ipv6: bool = True) -> Iterator[str]:
    """A fresh namespace ``<prefix>-<random>`` for the block, deleted afterwards even on failure."""
    name = f"{prefix}-{secrets.token_hex(3)}"
    try:
        add_netns(name, ipv6=ipv6)
        yield name
    finally:
        del_netns(name)

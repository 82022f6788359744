"""A pair of throwaway network namespaces joined by a veth, for the eBPF probes' kernel tests.

The veth is created in the root namespace and then moved, so each end keeps a distinct ifindex
(the PFC counter refuses interfaces that share a slot). Frames are sent with an AF_PACKET socket
opened inside the sending namespace: they cross that end's tc egress hook and the peer's tc ingress
hook, where the probes sit. Everything is removed in ``close`` (also on failure).
"""

from __future__ import annotations

import secrets
import socket
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from tests.netns import add_netns, del_netns, inside, ip, netns_exec

__all__ = ["VethPair", "inside"]


@dataclass
class VethPair:
    """Namespaces ``ns_a``/``ns_b`` with veth ends ``dev_a``/``dev_b`` and IPv4 ``ip_a``/``ip_b``."""

    ns_a: str
    ns_b: str
    dev_a: str
    dev_b: str
    ip_a: str
    ip_b: str

    @classmethod
    def create(cls, prefix: str = "nbpf") -> VethPair:
        tag = secrets.token_hex(3)
        net = 64 + secrets.randbelow(64)  # 10.<net>.<x>.0/24 inside the namespaces only
        third = secrets.randbelow(250) + 1
        pair = cls(
            f"{prefix}-{tag}-a",
            f"{prefix}-{tag}-b",
            f"{prefix}{tag}a",
            f"{prefix}{tag}b",
            f"10.{net}.{third}.1",
            f"10.{net}.{third}.2",
        )
        try:
            pair._build()
        except BaseException:
            pair.close()
            raise
        return pair

    def _build(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            add_netns(ns, ipv6=False)
        ip("link", "add", self.dev_a, "type", "veth", "peer", "name", self.dev_b)
        for ns, dev, addr in ((self.ns_a, self.dev_a, self.ip_a), (self.ns_b, self.dev_b, self.ip_b)):
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def run(self, netns: str, *argv: str) -> str:
        return netns_exec(netns, *argv)

    def ifindex(self, netns: str, dev: str) -> int:
        return int(self.run(netns, "cat", f"/sys/class/net/{dev}/ifindex"))

    def send(self, frames: Iterable[bytes], netns: str | None = None, dev: str | None = None) -> int:
        """Send raw Ethernet frames from ``dev`` (default: dev_a in ns_a); returns how many."""
        with inside(netns or self.ns_a):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        count = 0
        with sock:
            sock.bind((dev or self.dev_a, 0))
            for frame in frames:
                sock.send(frame)
                count += 1
        return count

    def tc_filters(self, netns: str, dev: str, hook: str) -> str:
        try:
            return self.run(netns, "tc", "filter", "show", "dev", dev, hook)
        except subprocess.CalledProcessError:
            return ""

    def close(self) -> None:
        del_netns(self.ns_a, self.ns_b)

"""IoctlStatsReader against the running kernel: a veth pair in a throwaway network namespace.

veth's ethtool set is ``peer_ifindex`` plus 7 names per rx queue and 2 per tx queue, so changing the
channel count (``ethtool -L``) changes the stat count the way a PFC change does on mlx5. Its per-queue
``xdp_packets`` count only frames that take veth's NAPI path: the receiver must have GRO *requested*
(``ethtool -K gro on``, although it already shows "on") and the sender's frames must be GRO-eligible
(TSO off, veth_skb_is_eligible_for_gro()); otherwise nothing moves but ``ip -s link``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from netd.sources.ethtool import EthtoolSource, IoctlStatsReader
from tests.netns import inside, ip, netns_exec, throwaway_netns

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(not (shutil.which("ip") and shutil.which("ethtool")), reason="needs ip, ethtool"),
]


@dataclass(frozen=True)
class Lab:
    netns: str
    a: str = "nt-a"
    b: str = "nt-b"

    def run(self, *argv: str) -> str:
        return netns_exec(self.netns, *argv)

    def ethtool_s(self, dev: str) -> list[tuple[str, int]]:
        """ethtool(8)'s own view, parsed independently of netd's parser."""
        text = self.run("ethtool", "-S", dev)
        return [(n, int(v)) for n, v in re.findall(r"^\s+(.+?):\s+(\d+)$", text, re.M)]


@pytest.fixture
def lab() -> Iterator[Lab]:
    # No IPv6: router solicitations would add packets the counter test did not send.
    with throwaway_netns("netd-t", ipv6=False) as netns:
        lab = Lab(netns)
        queues = "numrxqueues 2 numtxqueues 2"
        ip("-n", lab.netns, *f"link add {lab.a} {queues} type veth peer name {lab.b} {queues}".split())
        yield lab


@pytest.fixture
def reader(lab: Lab) -> Iterator[IoctlStatsReader]:
    with inside(lab.netns):  # the socket, and so every ioctl on it, belongs to the lab's namespace
        r = IoctlStatsReader(names_recheck_every=0)  # prove the count check alone on a real kernel
    yield r
    r.close()


def test_reads_what_ethtool_prints(lab: Lab, reader: IoctlStatsReader) -> None:
    for dev in (lab.a, lab.b):
        got = reader.read(dev)
        assert got.stats is not None and got.bad == ()
        assert list(got.stats.items()) == lab.ethtool_s(dev)
        assert len(got.stats) == 1 + 2 * 7 + 2 * 2
    stats, peer = reader.read(lab.a).stats, lab.run("cat", f"/sys/class/net/{lab.b}/ifindex")
    assert stats is not None and stats["peer_ifindex"] == int(peer)


def test_the_socket_not_the_thread_picks_the_namespace(lab: Lab, reader: IoctlStatsReader) -> None:
    out: list[object] = []
    worker = threading.Thread(target=lambda: out.append(reader.read(lab.a).stats))
    worker.start()
    worker.join()
    assert out[0] is not None
    outside = IoctlStatsReader()
    try:
        assert outside.read(lab.a).stats is None  # nt-a exists only in the lab namespace
    finally:
        outside.close()


def _send(lab: Lab, frames: int) -> bytes:
    frame = b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x01" + b"\x88\xb5" + b"netd" * 15  # local experimental type
    with inside(lab.netns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    with sock:
        sock.bind((lab.a, 0))
        for _ in range(frames):
            sock.send(frame)
    return frame


def test_channel_change_reloads_names_and_values_follow(lab: Lab, reader: IoctlStatsReader) -> None:
    for dev in (lab.a, lab.b):
        lab.run("ip", "link", "set", dev, "up")
    lab.run("ethtool", "-K", lab.a, "tso", "off")
    lab.run("ethtool", "-K", lab.b, "gro", "on")
    frame = _send(lab, 7)
    before = reader.read(lab.b).stats
    assert before is not None
    queues = {k: v for k, v in before.items() if re.fullmatch(r"rx_queue_\d_xdp_(packets|bytes)", k)}
    assert sum(v for k, v in queues.items() if k.endswith("packets")) == 7
    # skb->len after eth_type_trans() pulled the 14-byte Ethernet header on the way into the peer.
    assert sum(v for k, v in queues.items() if k.endswith("bytes")) == 7 * (len(frame) - 14)

    lab.run("ethtool", "-L", lab.b, "rx", "1", "tx", "1")  # 19 -> 10 stats
    # This kernel refuses a stale size (7b07be1ff1cb): n_stats comes back 0 and nothing is written.
    assert reader._stats(lab.b, len(before)) is None
    # The sender too: a frame leaving on a tx queue the peer has no rx queue for skips NAPI, uncounted.
    lab.run("ethtool", "-L", lab.a, "rx", "1", "tx", "1")
    after = reader.read(lab.b).stats
    assert reader.names_reloads == 1
    assert after is not None and list(after.items()) == lab.ethtool_s(lab.b)
    assert len(after) == 1 + 7 + 2 and after["peer_ifindex"] == before["peer_ifindex"]
    _send(lab, 3)
    moved = reader.read(lab.b).stats
    assert moved is not None and reader.names_reloads == 1
    assert moved["rx_queue_0_xdp_packets"] - after["rx_queue_0_xdp_packets"] == 3
    assert moved["rx_queue_0_xdp_bytes"] - after["rx_queue_0_xdp_bytes"] == 3 * (len(frame) - 14)

    lab.run("ethtool", "-L", lab.b, "rx", "2", "tx", "2")
    again = reader.read(lab.b).stats
    assert reader.names_reloads == 2 and again is not None
    assert list(again.items()) == lab.ethtool_s(lab.b) and list(again) == list(before)


def test_absent_interfaces_do_not_raise(lab: Lab, reader: IoctlStatsReader) -> None:
    source = EthtoolSource(reader)
    samples, reasons = source.read([lab.a, "lo", "nt-missing", "x" * 16])
    assert list(samples) == [lab.a]
    assert "no ethtool statistics" in reasons["lo"]  # lo: sset_mask bit cleared, not an errno
    assert "No such device" in reasons["nt-missing"]
    assert "1..15 bytes" in reasons["x" * 16]


def test_raw_reads_pick_and_token_what_the_kernel_counts(lab: Lab, reader: IoctlStatsReader) -> None:
    """The fast path's unparsed reads on a real kernel: the same values as read_some, and a token that
    stays equal while nothing is counted and differs once frames are."""
    for dev in (lab.a, lab.b):
        lab.run("ip", "link", "set", dev, "up")
    lab.run("ethtool", "-K", lab.a, "tso", "off")
    lab.run("ethtool", "-K", lab.b, "gro", "on")
    names = ("rx_queue_0_xdp_packets", "rx_queue_1_xdp_packets")
    first = reader.read_raw(lab.b)
    assert reader.pick(first, names) == reader.read_some(lab.b, names)
    assert reader.token(reader.read_raw(lab.b), names) == reader.token(first, names)
    _send(lab, 3)
    after = reader.read_raw(lab.b)
    assert reader.token(after, names) != reader.token(first, names)
    picked = reader.pick(after, names).stats
    assert picked is not None and sum(picked.values()) == 3
    probe = reader.read_raw(lab.b, False)  # the calm probe: no name table, the same values
    assert reader.token(probe, names) == reader.token(after, names)
    assert reader.pick(probe, names).stats == picked

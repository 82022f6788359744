"""Capture the RoCEv2 frames crossing one interface of a lab namespace, as tcpdump would (without it).

``Capture(netns, ifname)`` starts a child process (``python -m netd.lab.capture NETNS IFNAME``) that
opens an AF_PACKET socket inside the namespace, so it sees every frame the interface sends
(``outgoing``) or receives, with the kernel's timestamp (``SO_TIMESTAMPNS``: when the frame passed
the tap, which for a sent frame is its departure). It decodes each frame on the spot
(netd.lab.wire: headers and ICRC, from the bytes alone) and keeps only the decoded fields; ``stop()``
ends it and returns them, with the frames the kernel could not queue to the socket (``dropped``, from
``PACKET_STATISTICS``) so an analysis can tell an incomplete capture.

A process, not a thread: the lab's DCQCN controller runs in the caller at a real-time priority and
must never wait for a capture thread to release the interpreter lock.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
from dataclasses import astuple, dataclass, field

from netd.errors import LabError
from netd.lab.netns import in_netns
from netd.lab.wire import RoceFrame, decode

__all__ = ["Capture", "Captured"]

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_TIMESTAMPNS = 35
SO_RCVBUFFORCE = 33
SNAPLEN = 9216


@dataclass
class Captured:
    """The RoCEv2 frames, in capture order, and what the capture missed."""

    frames: list[RoceFrame] = field(default_factory=list)
    dropped: int = 0  # frames the kernel dropped before the capture read them


class Capture:
    """Capturing from construction until ``stop()``."""

    def __init__(self, netns: str, ifname: str) -> None:
        argv = [sys.executable, "-m", "netd.lab.capture", netns, ifname]
        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = self._proc.stdout.readline() if self._proc.stdout else ""
        if ready.strip() != "capturing":
            err = self._proc.communicate()[1]
            raise LabError(f"capture on {netns}/{ifname} did not start: {err.strip() or ready.strip()}")

    def kill(self) -> None:
        """End the capture and discard it (cleanup after a failure)."""
        self._proc.kill()
        self._proc.communicate()

    def stop(self) -> Captured:
        self._proc.send_signal(signal.SIGTERM)
        out, err = self._proc.communicate(timeout=60)
        if self._proc.returncode != 0:
            raise LabError(f"capture failed: {err.strip()}")
        doc = json.loads(out)
        return Captured([RoceFrame(*f) for f in doc["frames"]], doc["dropped"])


def _capture(netns: str, ifname: str) -> int:
    with in_netns(netns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    sock.bind((ifname, 0))
    stop = os.pipe()  # SIGTERM writes here, so the select below wakes up at once
    signal.signal(signal.SIGTERM, lambda *_: os.write(stop[1], b"x"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C of the caller's terminal: the caller stops us
    print("capturing", flush=True)
    frames: list[RoceFrame] = []
    anc = socket.CMSG_SPACE(16)
    sock.setblocking(False)
    while True:
        ready, _, _ = select.select([sock.fileno(), stop[0]], [], [])
        try:
            data, ancdata, _, addr = sock.recvmsg(SNAPLEN, anc)
        except BlockingIOError:  # nothing left to read: stop if asked to
            if stop[0] in ready:
                break
            continue
        t = 0.0
        for level, kind, value in ancdata:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", value[:16])
                t = sec + nsec / 1e9
        frame = decode(data, t, addr[2] == PACKET_OUTGOING)
        if frame is not None:
            frames.append(frame)
    dropped = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
    json.dump({"frames": [astuple(f) for f in frames], "dropped": dropped}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_capture(sys.argv[1], sys.argv[2]))

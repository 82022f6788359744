"""PFC (802.1Qbb) emulation for the lab's switches, run inside the lab daemon.

A Linux switch namespace has no MAC that honours or generates pause frames, so the lab does it:

* **generate**: the data plane reports each egress queue crossing XOFF upwards (and falling back
  below XON) as a ring-buffer event. The agent then pauses the *ingress* ports that fed that queue in
  the last few milliseconds (the data plane records ``skb->ingress_ifindex`` per egress queue): it
  sends them an XOFF frame for priority 3 with the maximum quanta, refreshes it while the queue stays
  above XON, and sends XON (quanta 0) once no congested queue needs that port any more;
* **honour**: a PFC frame arriving on a switch port stops that port's egress (its TBF is set to a
  trickle rate, so the queue is kept, not dropped) for the frame's quanta (512 bit times each at the
  port's rate), or until an XON. Frames are sent with ``PACKET_QDISC_BYPASS`` so a pause is never
  stuck behind the congested queue it is about. Resuming needs a *kick*: ``tc qdisc change`` resets
  the TBF's tokens but not its watchdog, which stays armed for the trickle rate's next departure
  (seconds away), so the agent enqueues a small frame (ethertype 0x88B5, local experimental; the
  peer drops it) to run the queue. The rate change is applied asynchronously by a ``tc -batch``
  process, so kicks go out at KICK_DELAYS_S after the resume, until one lands after the change.

Hosts do the same in their agent (csrc/lab_host.c). Everything runs on priority 3, the lab's one
lossless class; CNPs ride DSCP 48 and are never paused.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from netd.lab.layout import LabLayout, Port
from netd.lab.netns import in_netns

__all__ = ["PFC_PRIORITY", "PfcAgent", "PortPfc", "pfc_frame", "parse_pfc"]

PFC_PRIORITY = 3
ETH_P_MACCTRL = 0x8808
_SOL_PACKET = 263
_PACKET_QDISC_BYPASS = 20
_PACKET_OUTGOING = 4
_DST = bytes.fromhex("0180c2000001")
_KICK_DST = bytes.fromhex("ffffffffffff")
_KICK_BODY = b"\x88\xb5" + b"netd-lab queue kick".ljust(46, b"\0")
CONTRIB_WINDOW_NS = 20_000_000  # an ingress port "feeds" a queue if it sent to it in the last 20 ms
# A shaper cannot be stopped, only slowed: 1 kbit/s (one 1 KB frame per 8 s) is a pause. Much lower
# rates overflow TBF's token buffer (burst / rate, in 32-bit scheduler ticks).
PAUSE_RATE_BPS = 1000
KICK_DELAYS_S = (0.002, 0.01, 0.05)


def pfc_frame(src_mac: bytes, quanta: int, priority: int = PFC_PRIORITY) -> bytes:
    times = [0] * 8
    times[priority] = quanta
    body = struct.pack("!HH8H", 0x0101, 1 << priority, *times)
    return (_DST + src_mac + struct.pack("!H", ETH_P_MACCTRL) + body).ljust(60, b"\0")


def parse_pfc(frame: bytes, priority: int = PFC_PRIORITY) -> int | None:
    """The quanta for ``priority`` of a PFC frame, or None if it is not one that names it."""
    if len(frame) < 34 or frame[12:14] != b"\x88\x08":
        return None
    opcode, enabled = struct.unpack_from("!HH", frame, 14)
    if opcode != 0x0101 or not enabled & (1 << priority):
        return None
    return int(struct.unpack_from("!H", frame, 18 + 2 * priority)[0])


@dataclass
class PortPfc:
    """Per switch port: what it asserts towards its peer, and whether its own egress is paused."""

    port: Port
    sock: socket.socket  # PFC frames, bypassing the port's queue
    kick: socket.socket  # through the queue: restarts a resumed TBF
    mac: bytes
    asserted_for: set[int] = field(default_factory=set)  # congested egress ports this pause serves
    next_refresh: float = 0.0
    paused_until: float = 0.0  # monotonic seconds; 0: egress running
    xoff_sent: int = 0
    xon_sent: int = 0
    pause_frames_rx: int = 0
    paused_s: float = 0.0
    pause_started: float = 0.0
    kicks: list[float] = field(default_factory=list)  # monotonic times of pending queue kicks

    def as_dict(self) -> dict[str, float | int]:
        paused = self.paused_s + (time.monotonic() - self.pause_started if self.pause_started else 0.0)
        return {
            "xoff_sent": self.xoff_sent,
            "xon_sent": self.xon_sent,
            "pause_frames_rx": self.pause_frames_rx,
            "paused_s": round(paused, 6),
            "asserting": bool(self.asserted_for),
        }


class PfcAgent:
    def __init__(
        self,
        layout: LabLayout,
        set_rate: Callable[[Port, float], None],
        contributors: Callable[[Port], list[int]],
        rate_of: Callable[[Port], float] | None = None,
        refresh_s: float = 0.1,
    ) -> None:
        self.layout = layout
        self._set_rate = set_rate
        self._contributors = contributors
        self.rate_of = rate_of or (lambda port: port.rate_mbps * 1e6)  # a port's rate when not paused
        self.refresh_s = refresh_s
        self.ports: dict[int, PortPfc] = {}
        for node in layout.switches:
            with in_netns(node.netns):
                for p in layout.ports_of(node):
                    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_MACCTRL))
                    s.bind((p.ifname, ETH_P_MACCTRL))
                    s.setsockopt(_SOL_PACKET, _PACKET_QDISC_BYPASS, 1)
                    s.setblocking(False)
                    kick = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                    kick.bind((p.ifname, 0))
                    kick.setblocking(False)
                    self.ports[p.id] = PortPfc(p, s, kick, bytes.fromhex(p.mac.replace(":", "")))

    def sockets(self) -> dict[int, PortPfc]:
        return {pp.sock.fileno(): pp for pp in self.ports.values()}

    # -- generating pauses ---------------------------------------------------------------------
    def on_queue(self, egress_id: int, xoff: bool) -> None:
        egress = self.ports.get(egress_id)
        if egress is None:
            return
        if xoff:
            feeders = [j for j in self._contributors(egress.port) if j != egress_id and j in self.ports]
            for j in feeders or [p.id for p in self.layout.ports_of(egress.port.node) if p.id != egress_id]:
                pp = self.ports[j]
                if not pp.asserted_for:
                    self._send(pp, 0xFFFF)
                pp.asserted_for.add(egress_id)
        else:
            for pp in self.ports.values():
                if egress_id in pp.asserted_for:
                    pp.asserted_for.discard(egress_id)
                    if not pp.asserted_for:
                        self._send(pp, 0)

    def _send(self, pp: PortPfc, quanta: int) -> None:
        try:
            pp.sock.send(pfc_frame(pp.mac, quanta))
        except OSError:
            return
        if quanta:
            pp.xoff_sent += 1
            pp.next_refresh = time.monotonic() + self.refresh_s
        else:
            pp.xon_sent += 1

    # -- honouring pauses ----------------------------------------------------------------------
    def receive(self, pp: PortPfc) -> None:
        while True:
            try:
                frame, addr = pp.sock.recvfrom(128)
            except BlockingIOError:
                return
            if addr[2] == _PACKET_OUTGOING:
                continue
            quanta = parse_pfc(frame)
            if quanta is None:
                continue
            pp.pause_frames_rx += 1
            now = time.monotonic()
            if quanta == 0:
                self._resume(pp, now)
            else:
                if not pp.paused_until:
                    pp.pause_started = now
                    self._set_rate(pp.port, PAUSE_RATE_BPS)
                pp.paused_until = now + quanta * 512 / (pp.port.rate_mbps * 1e6)

    def _resume(self, pp: PortPfc, now: float) -> None:
        if pp.paused_until:
            pp.paused_until = 0.0
            pp.paused_s += now - pp.pause_started
            pp.pause_started = 0.0
            self._set_rate(pp.port, self.rate_of(pp.port))
            pp.kicks = [now + d for d in KICK_DELAYS_S]

    def tick(self) -> float:
        """Refresh asserted pauses and end expired ones; returns seconds until the next deadline."""
        now = time.monotonic()
        deadline = now + 1.0
        for pp in self.ports.values():
            if pp.asserted_for:
                if now >= pp.next_refresh:
                    self._send(pp, 0xFFFF)
                deadline = min(deadline, pp.next_refresh)
            if pp.paused_until:
                if now >= pp.paused_until:
                    self._resume(pp, now)
                else:
                    deadline = min(deadline, pp.paused_until)
            if pp.kicks and not pp.paused_until:
                if now >= pp.kicks[0]:
                    pp.kicks.pop(0)
                    try:
                        pp.kick.send(_KICK_DST + pp.mac + _KICK_BODY)
                    except OSError:
                        pass
                if pp.kicks:
                    deadline = min(deadline, pp.kicks[0])
        return max(deadline - now, 0.0)

    def close(self) -> None:
        for pp in self.ports.values():
            pp.sock.close()
            pp.kick.close()

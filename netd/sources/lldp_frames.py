"""LLDP neighbours without lldpd: listen for LLDP frames on the RoCE ports and parse them with scapy.

Switches send an LLDPDU every 30 s by default (TTL 120 s). The listener opens one AF_PACKET socket
per interface, bound to the LLDP ethertype (0x88cc) and joined to the nearest-bridge multicast group
01:80:c2:00:00:0e (NICs drop unjoined multicast), waits on all of them in one thread, and keeps the
latest neighbour per interface until its TTL runs out. It only receives: netd never sends LLDP.

Caveat worth knowing on real hosts: ConnectX NICs with the firmware LLDP agent enabled consume LLDP
frames before the kernel sees them; so does an lldpd that is running (use the lldpd source then).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import logging
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from netd.errors import SourceError
from netd.model.topology import LldpNeighbor

__all__ = ["ETH_P_LLDP", "LldpFrameListener", "parse_lldp_frame"]

log = logging.getLogger(__name__)

ETH_P_LLDP = 0x88CC
_LLDP_MULTICAST = bytes.fromhex("0180c200000e")
_SOL_PACKET = 263
_PACKET_ADD_MEMBERSHIP = 1
_PACKET_MR_MULTICAST = 0
_CLONE_NEWNET = 0x40000000
# IEEE 802.3 organizationally specific TLV (802.3 clause 79): OUI 00-12-0F, subtype 4 = Maximum Frame Size
_OUI_8023 = 0x00120F
_MFS_SUBTYPE = 4
# LLDP Port ID subtypes (IEEE 802.1AB table 8-3) in lldpd's vocabulary
_PORT_SUBTYPES = {1: "ifalias", 2: "port", 3: "mac", 4: "ip", 5: "ifname", 6: "agent-circuit-id", 7: "local"}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").strip("\x00 ") or None
    return str(value) or None


def _max_frame_size(pkt: Any, org_layer: type) -> int | None:
    """The 802.3 Maximum Frame Size TLV's value (two octets), if the frame has one."""
    layer = pkt.getlayer(org_layer)
    while layer is not None:
        data = bytes(layer.data or b"")
        if layer.org_code == _OUI_8023 and layer.subtype == _MFS_SUBTYPE and len(data) == 2:
            return int(struct.unpack("!H", data)[0])
        layer = layer.payload.getlayer(org_layer)
    return None


def parse_lldp_frame(frame: bytes, interface: str) -> LldpNeighbor | None:
    """One received Ethernet frame to a neighbour; None if it is not a well-formed LLDPDU."""
    from scapy.contrib import lldp as L  # scapy costs ~0.3 s to import: only when frames are used
    from scapy.layers.l2 import Ether

    try:
        pkt = Ether(frame)
    except Exception:  # scapy raises assorted errors on garbage; a bad frame is just ignored
        return None
    if not pkt.haslayer(L.LLDPDUChassisID) or not pkt.haslayer(L.LLDPDUPortID):
        return None
    chassis, port = pkt[L.LLDPDUChassisID], pkt[L.LLDPDUPortID]
    mgmt: list[str] = []
    layer = pkt.getlayer(L.LLDPDUManagementAddress)
    while layer is not None:
        raw = layer.management_address
        if isinstance(raw, bytes) and layer.management_address_subtype in (1, 2) and len(raw) in (4, 16):
            mgmt.append(str(ipaddress.ip_address(raw)))
        layer = layer.payload.getlayer(L.LLDPDUManagementAddress)
    ttl = pkt[L.LLDPDUTimeToLive].ttl if pkt.haslayer(L.LLDPDUTimeToLive) else None
    return LldpNeighbor(
        interface=interface,
        chassis_name=_text(pkt[L.LLDPDUSystemName].system_name) if pkt.haslayer(L.LLDPDUSystemName) else None,
        chassis_id=_text(chassis.id),
        port_id=_text(port.id),
        port_id_type=_PORT_SUBTYPES.get(int(port.subtype)),
        port_descr=(
            _text(pkt[L.LLDPDUPortDescription].description) if pkt.haslayer(L.LLDPDUPortDescription) else None
        ),
        mgmt_addresses=tuple(mgmt),
        system_descr=(
            _text(pkt[L.LLDPDUSystemDescription].description)
            if pkt.haslayer(L.LLDPDUSystemDescription)
            else None
        ),
        ttl_s=int(ttl) if ttl is not None else None,
        source="lldp-frames",
        max_frame_size=_max_frame_size(pkt, L.LLDPDUGenericOrganisationSpecific),
    )


def _open_socket(interface: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_LLDP))
    try:
        sock.bind((interface, ETH_P_LLDP))
        mreq = struct.pack(
            "iHH8s", socket.if_nametoindex(interface), _PACKET_MR_MULTICAST, 6, _LLDP_MULTICAST
        )
        sock.setsockopt(_SOL_PACKET, _PACKET_ADD_MEMBERSHIP, mreq)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _open_in_netns(netns: str, interfaces: Sequence[str]) -> list[socket.socket]:
    """Sockets belong to the network namespace of the thread that creates them: make them in a
    short-lived thread that first joins ``netns`` (setns changes only the calling thread)."""
    result: list[socket.socket] = []
    error: list[BaseException] = []

    def worker() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, os.strerror(err))
            finally:
                os.close(fd)
            result.extend(_open_socket(i) for i in interfaces)
        except BaseException as exc:  # handed to the caller's thread
            error.append(exc)

    t = threading.Thread(target=worker, name=f"netd-lldp-netns-{netns}")
    t.start()
    t.join()
    if error:
        for s in result:
            s.close()
        raise error[0]
    return result


class LldpFrameListener:
    """Receives LLDP frames on ``interfaces`` in a background thread (needs CAP_NET_RAW)."""

    def __init__(
        self,
        interfaces: Sequence[str],
        netns: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interfaces = tuple(interfaces)
        self.netns = netns
        self._clock = clock
        self._latest: dict[str, tuple[LldpNeighbor, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread: threading.Thread | None = None
        self.frames = 0

    def start(self) -> None:
        try:
            self._sockets = (
                _open_in_netns(self.netns, self.interfaces)
                if self.netns
                else [_open_socket(i) for i in self.interfaces]
            )
        except OSError as exc:
            raise SourceError("lldp-frames", f"cannot listen for LLDP: {exc.strerror or exc}") from exc
        self._thread = threading.Thread(target=self._run, name="netd-lldp-frames", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        names = {s.fileno(): i for s, i in zip(self._sockets, self.interfaces, strict=True)}
        while not self._stop.is_set():
            ready, _, _ = select.select(self._sockets, [], [], 0.5)
            for sock in ready:
                with contextlib.suppress(BlockingIOError, InterruptedError):
                    frame = sock.recv(9216)
                    self.frames += 1
                    n = parse_lldp_frame(frame, names[sock.fileno()])
                    if n is not None:
                        with self._lock:
                            self._latest[n.interface] = (n, self._clock())

    def neighbors(self) -> tuple[LldpNeighbor, ...]:
        """The latest neighbour per interface whose TTL has not run out."""
        now = self._clock()
        with self._lock:
            alive = [n for n, seen in self._latest.values() if now - seen <= (n.ttl_s or 120)]
        return tuple(sorted(alive, key=lambda n: n.interface))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        for s in self._sockets:
            s.close()
        self._sockets = []

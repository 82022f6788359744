"""Python's view of a lab host agent's shared memory (mirror of netd/lab/csrc/lab_shm.h).

:class:`HostShm` maps ``<lab>/host<i>.shm`` and gives ctypes access to the structs, plus numpy
views over the flow table for the vectorised DCQCN controller. Field names match the C header;
tests/lab/test_shm_layout.py compiles the header and checks every offset.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from ctypes import c_uint32, c_uint64
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from netd.errors import LabError

__all__ = [
    "COUNTER_FIELDS",
    "LAB_MAX_FLOWS",
    "LAB_MAX_RQPS",
    "LAB_SHM_MAGIC",
    "LAB_SHM_VERSION",
    "Control",
    "Counters",
    "Flow",
    "HostShm",
    "Rqp",
    "Shm",
]

LAB_SHM_MAGIC = 0x424C444E
LAB_SHM_VERSION = 3
LAB_MAX_FLOWS = 64
LAB_MAX_RQPS = 256


class Control(ctypes.Structure):
    _fields_ = [
        ("np_interval_us", c_uint32),
        ("ack_every", c_uint32),
        ("stuck", c_uint32),
        ("storm_refresh_us", c_uint32),
        ("storm_warn_ms", c_uint32),
        ("ack_timeout_us", c_uint32),
        ("link_bps", c_uint64),
    ]


COUNTER_FIELDS = (
    "tx_pkts",
    "tx_bytes",
    "rx_pkts",
    "rx_bytes",
    "tx_data_pkts",
    "tx_data_bytes",
    "rx_data_pkts",
    "rx_data_bytes",
    "ecn_marked_rx",
    "cnp_sent",
    "cnp_handled",
    "cnp_ignored",
    "out_of_sequence",
    "duplicate_request",
    "packet_seq_err",
    "out_of_buffer",
    "local_ack_timeout_err",
    "rx_pause",
    "rx_pause_duration_us",
    "rx_pause_transition",
    "tx_pause",
    "tx_pause_duration_us",
    "pause_storm_warning",
    "pacer_late_ns",
    "tx_errors",
)


class Counters(ctypes.Structure):
    _fields_ = [(name, c_uint64) for name in COUNTER_FIELDS]


class Flow(ctypes.Structure):
    _fields_ = [
        ("active", c_uint32),
        ("qpn", c_uint32),
        ("dst_ip", c_uint32),
        ("payload", c_uint32),
        ("rate_bps", c_uint64),
        ("generation", c_uint64),
        ("seen_generation", c_uint64),
        ("tx_pkts", c_uint64),
        ("tx_bytes", c_uint64),
        ("tx_payload_bytes", c_uint64),
        ("psn", c_uint64),
        ("acked_psn", c_uint64),
        ("cnp_rx", c_uint64),
        ("nak_rx", c_uint64),
        ("retransmitted", c_uint64),
        ("last_progress_ns", c_uint64),
        ("timeouts", c_uint64),
    ]


class Rqp(ctypes.Structure):
    _fields_ = [
        ("qpn", c_uint32),
        ("src_ip", c_uint32),
        ("expected_psn", c_uint64),
        ("rx_pkts", c_uint64),
        ("rx_payload_bytes", c_uint64),
        ("ce_pkts", c_uint64),
        ("cnp_sent", c_uint64),
        ("oos", c_uint64),
        ("dup", c_uint64),
        ("nak_sent", c_uint64),
        ("ack_sent", c_uint64),
        ("last_cnp_ns", c_uint64),
        ("last_ack_ns", c_uint64),
        ("nak_armed", c_uint32),
        ("since_ack", c_uint32),
    ]


class Shm(ctypes.Structure):
    _fields_ = [
        ("magic", c_uint32),
        ("version", c_uint32),
        ("agent_pid", c_uint32),
        ("ready", c_uint32),
        ("heartbeat_ns", c_uint64),
        ("paused_until_ns", c_uint64),
        ("ctl", Control),
        ("c", Counters),
        ("flows", Flow * LAB_MAX_FLOWS),
        ("rqps", Rqp * LAB_MAX_RQPS),
    ]


def _u64_view(array: ctypes.Array[Flow], field: str) -> NDArray[np.uint64]:
    """A strided numpy view of one u64 field across the flow table (no copy)."""
    buf = (ctypes.c_char * ctypes.sizeof(array)).from_address(ctypes.addressof(array))
    return np.ndarray(
        shape=(LAB_MAX_FLOWS,),
        dtype=np.uint64,
        buffer=memoryview(buf),
        offset=getattr(Flow, field).offset,
        strides=(ctypes.sizeof(Flow),),
    )


class HostShm:
    """A mapped agent file. ``create()`` before the agent starts (so the control block can be set
    first); the agent keeps the control block and zeroes the rest when it starts."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path = Path(path)
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileNotFoundError:
            raise LabError(f"{self.path} does not exist: is the lab up?") from None
        try:
            size = ctypes.sizeof(Shm)
            if create:
                os.ftruncate(fd, size)
            elif os.fstat(fd).st_size < size:
                raise LabError(f"{self.path} is too small: written by a different agent version")
            self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self.s = Shm.from_buffer(self._map)

    @property
    def ready(self) -> bool:
        return self.s.magic == LAB_SHM_MAGIC and self.s.version == LAB_SHM_VERSION and bool(self.s.ready)

    def flow_view(self, field: str) -> NDArray[np.uint64]:
        return _u64_view(self.s.flows, field)

    def counters(self) -> dict[str, int]:
        c = self.s.c
        return {name: int(getattr(c, name)) for name in COUNTER_FIELDS}

    def close(self) -> None:
        del self.s
        try:
            self._map.close()
        except BufferError:  # a caller still holds a struct view: the mapping goes with the last one
            pass

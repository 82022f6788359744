"""The Python mirror of ebpf/netd_bpf.h: map names, struct layouts, enum orders, program names.

One place on the Python side names what the C side defines; tests/sources/test_bpf_layout.py compiles
the header with gcc and checks every size, offset and enum value against this module, and checks that
each map named here is declared in its C file.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

__all__ = [
    "EBPF_DIR",
    "MAPS",
    "PRIORITIES",
    "PROGRAMS",
    "RDMA_CM_EVENT_NAMES",
    "RDMA_EVENTS",
    "ROCE_EVENTS",
    "TCP_EVENTS",
    "ClassVal",
    "FlowKey",
    "FlowSlot",
    "FlowVal",
    "PfcVal",
    "TcpKey",
    "TcpVal",
]

EBPF_DIR = Path(__file__).resolve().parents[2] / "ebpf"

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64

DIRECTIONS = ("ingress", "egress")  # NETD_DIR_INGRESS, NETD_DIR_EGRESS
CLASS_SLOTS = 512  # NETD_CLASS_SLOTS: (dir << 8) | (dscp << 2) | ecn
PRIORITIES = 8
PSN_UNKNOWN = 0xFFFFFFFF


class ClassVal(ctypes.Structure):
    _fields_ = [("packets", u64), ("bytes", u64)]


class FlowKey(ctypes.Structure):
    _fields_ = [
        ("src", u8 * 16),
        ("dst", u8 * 16),
        ("dest_qp", u32),
        ("dir", u8),
        ("used", u8),
        ("pad", u8 * 2),
    ]


FLOW_COUNTERS = (
    "packets",
    "bytes",
    "ce",
    "ect",
    "cnp",
    "acks",
    "naks",
    "nak_seq",
    "psn_gaps",
    "psn_missing",
    "psn_rewinds",
)


class FlowVal(ctypes.Structure):
    _fields_ = [
        *((name, u64) for name in FLOW_COUNTERS),
        ("first_jiffies", u64),
        ("last_jiffies", u64),
        ("dscp", u8),
        ("opcode", u8),
        ("pad", u8 * 6),
    ]


class FlowSlot(ctypes.Structure):
    _fields_ = [("key", FlowKey), ("val", FlowVal)]


class PfcVal(ctypes.Structure):
    _fields_ = [
        ("ifindex", u32),
        ("pad", u32),
        ("pause_frames", u64),
        ("pause_quanta", u64),
        ("pause_xon", u64),
        ("pfc_frames", u64),
        ("other_opcode", u64),
        ("malformed", u64),
        ("prio_frames", u64 * PRIORITIES),
        ("prio_quanta", u64 * PRIORITIES),
        ("prio_xon", u64 * PRIORITIES),
    ]


class TcpKey(ctypes.Structure):
    _fields_ = [("daddr", u8 * 16), ("dport", u16), ("family", u16), ("pad", u32)]


class TcpVal(ctypes.Structure):
    _fields_ = [
        ("retransmits", u64),
        ("first_jiffies", u64),
        ("last_jiffies", u64),
        ("state", u32),
        ("pad", u32),
    ]


# enum netd_roce_event, in order (C name NETD_EV_<NAME.upper()>)
ROCE_EVENTS = (
    "cnp",
    "ack",
    "nak_seq",
    "nak_rnr",
    "nak_other",
    "psn_gap",
    "psn_missing",
    "psn_rewind",
    "flow_new",
    "flow_lost",
    "flow_writeback",
    "rej_truncated",
    "rej_ip",
    "rej_fragment",
    "rej_udp_length",
    "rej_bth",
)
# enum netd_tcp_event (C names NETD_TCP_RETRANSMITS, NETD_TCP_ENDPOINT_NEW, NETD_TCP_ENDPOINT_LOST)
TCP_EVENTS = ("retransmits", "endpoint_new", "endpoint_lost")
# enum netd_rdma_event (C names NETD_RDMA_<NAME.upper()>)
RDMA_EVENTS = ("cm_errors", "qp_create", "qp_create_fail", "qp_destroy")
RDMA_CM_SLOTS = 32  # NETD_RDMA_CM_EVENTS
# enum rdma_cm_event_type (include/rdma/rdma_cm.h), index = value
RDMA_CM_EVENT_NAMES = (
    "addr_resolved",
    "addr_error",
    "route_resolved",
    "route_error",
    "connect_request",
    "connect_response",
    "connect_error",
    "unreachable",
    "rejected",
    "established",
    "disconnected",
    "device_removal",
    "multicast_join",
    "multicast_error",
    "addr_change",
    "timewait_exit",
)

# C file -> the maps it declares (bcc names; the kernel truncates names to 15 characters)
MAPS: dict[str, tuple[str, ...]] = {
    "roce_parser.c": (
        "netd_roce_class",
        "netd_roce_events",
        "netd_flow_cache",
        "netd_roce_flows",
        "netd_psn_state",
    ),
    "pfc_counter.c": ("netd_pfc_stats",),
    "tcp_retrans.c": ("netd_tcp_retrans", "netd_tcp_events"),
    "rdma_events.c": ("netd_rdma_cm", "netd_rdma_events"),
}
# C file -> its packet programs (tc), by hook
PROGRAMS: dict[str, dict[str, str]] = {
    "roce_parser.c": {"ingress": "netd_roce_ingress", "egress": "netd_roce_egress"},
    "pfc_counter.c": {"ingress": "netd_pfc_ingress"},
}

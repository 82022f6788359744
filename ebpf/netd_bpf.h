// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * netd_bpf.h: the map keys and values that netd's eBPF programs share with user space, and (for the
 * programs only) the helpers they share.
 *
 * Mirrored field by field in netd/sources/bpf_layout.py; tests/sources/test_bpf_layout.py compiles this
 * header with gcc and compares every size and offset, so change both sides together. Only fixed-width
 * types, explicit padding, no bitfields: the layout is the same for the BPF target and for x86-64.
 *
 * License: the programs in ebpf/ are GPL-2.0-only OR Apache-2.0 (netd itself is Apache-2.0) because the
 * kernel lets only GPL-compatible programs call GPL-only helpers (bpf_probe_read_kernel in tcp_retrans.c
 * and lab_switch.c); bcc loads every program with the license string "GPL", its default BPF_LICENSE.
 */
#ifndef NETD_BPF_H
#define NETD_BPF_H

/* Directions of the tc hooks (the index of every per-direction counter). */
#define NETD_DIR_INGRESS 0
#define NETD_DIR_EGRESS 1
#define NETD_DIRS 2

/* netd_roce_class: per-CPU array indexed by (direction << 8) | (dscp << 2) | ecn. */
#define NETD_CLASS_SLOTS 512
struct netd_class_val {
    __u64 packets;
    __u64 bytes; /* whole frames as the hook sees them: Ethernet header included, FCS excluded */
};

/* netd_roce_events: per-CPU array of u64 indexed by direction * NETD_EV_COUNT + event. */
enum netd_roce_event {
    NETD_EV_CNP = 0,        /* BTH opcode 0x81 */
    NETD_EV_ACK,            /* RC/XRC Acknowledge with an ACK syndrome */
    NETD_EV_NAK_SEQ,        /* NAK, PSN sequence error (AETH syndrome 0x60) */
    NETD_EV_NAK_RNR,        /* receiver-not-ready NAK (syndrome 0x20..0x3f) */
    NETD_EV_NAK_OTHER,      /* invalid request, remote access or remote operational error */
    NETD_EV_PSN_GAP,        /* request packets whose PSN skipped ahead of the expected one */
    NETD_EV_PSN_MISSING,    /* PSNs skipped over in total */
    NETD_EV_PSN_REWIND,     /* request packets whose PSN went back (retransmission, reordering) */
    NETD_EV_FLOW_NEW,       /* records created in netd_roce_flows (evictions = created - live) */
    NETD_EV_FLOW_LOST,      /* write-backs the flow table refused (counts lost) */
    NETD_EV_FLOW_WRITEBACK, /* cache slots handed to another flow (their counts written back) */
    NETD_EV_REJ_TRUNCATED,  /* UDP/4791 whose headers run past the frame, or IP length > frame */
    NETD_EV_REJ_IP,         /* UDP/4791 with a bad IPv4 checksum or an IPv6 payload length mismatch */
    NETD_EV_REJ_FRAGMENT,   /* UDP/4791 in an IP fragment (RoCEv2 never fragments) */
    NETD_EV_REJ_UDP_LENGTH, /* UDP length inconsistent with the IP length, or too short for BTH */
    NETD_EV_REJ_BTH,        /* transport version not 0, or an opcode no transport defines */
    NETD_EV_COUNT
};
#define NETD_ROCE_EVENT_SLOTS (NETD_DIRS * NETD_EV_COUNT)

/* Per-flow records, keyed by (source GID, destination GID, DestQP, direction). The source and
 * destination are GIDs as RoCEv2 writes them: the IPv6 address, or ::ffff:a.b.c.d for IPv4.
 *
 * netd_flow_cache: per-CPU array of NETD_FLOW_CACHE_SLOTS direct-mapped slots (one slot per key hash),
 *   updated on every packet without locks or helper calls. A flow that needs a slot already taken by
 *   another flow writes the other flow's counts back into
 * netd_roce_flows: LRU hash of NETD_FLOW_TABLE_SIZE records, the table of record. A flow's counts are
 *   its record plus its slots on every CPU; user space adds them up. */
struct netd_flow_key {
    __u8 src[16];
    __u8 dst[16];
    __u32 dest_qp; /* BTH DestQP, 24 bits */
    __u8 dir;      /* NETD_DIR_*: the same flow seen on both hooks stays two records */
    __u8 used;     /* 1 in every written key: an all-zero slot is empty */
    __u8 pad[2];
};

/* The next expected PSN before a flow's first request, and after an RDMA READ (netd_psn_state). */
#define NETD_PSN_UNKNOWN 0xffffffffu
struct netd_flow_val {
    __u64 packets;
    __u64 bytes;
    __u64 ce;  /* ECN Congestion Experienced */
    __u64 ect; /* ECT(0) or ECT(1) */
    __u64 cnp; /* CNPs addressed to dest_qp */
    __u64 acks;
    __u64 naks; /* every NAK (sequence, RNR, other) */
    __u64 nak_seq;
    __u64 psn_gaps;
    __u64 psn_missing;
    __u64 psn_rewinds;
    __u64 first_jiffies; /* bpf_jiffies64(): user space converts with the kernel's HZ */
    __u64 last_jiffies;
    __u8 dscp;   /* of the last packet */
    __u8 opcode; /* BTH opcode of the last packet */
    __u8 pad[6]; /* (the PSN state is not here: it lives in netd_psn_state, shared by all CPUs) */
};

struct netd_flow_slot {
    struct netd_flow_key key;
    struct netd_flow_val val;
};

/* netd_pfc_stats: per-CPU array indexed by the receiving ifindex modulo its size; each slot records
 * the ifindex it counts (user space never attaches two interfaces that share a slot). */
#define NETD_PRIORITIES 8
struct netd_pfc_val {
    __u32 ifindex;
    __u32 pad;
    __u64 pause_frames;                 /* 802.3x PAUSE, opcode 0x0001 */
    __u64 pause_quanta;                 /* sum of pause_time (units of 512 bit times) */
    __u64 pause_xon;                    /* PAUSE with pause_time 0 (resume) */
    __u64 pfc_frames;                   /* 802.1Qbb PFC, opcode 0x0101 */
    __u64 other_opcode;                 /* MAC control frames with any other opcode */
    __u64 malformed;                    /* MAC control frames too short for their opcode */
    __u64 prio_frames[NETD_PRIORITIES]; /* PFC frames with the class-enable bit set */
    __u64 prio_quanta[NETD_PRIORITIES]; /* sum of the enabled classes' pause times */
    __u64 prio_xon[NETD_PRIORITIES];    /* enabled classes with pause time 0 */
};

/* netd_tcp_retrans: LRU hash of TCP retransmissions per remote endpoint. */
struct netd_tcp_key {
    __u8 daddr[16]; /* IPv6, or IPv4-mapped */
    __u16 dport;    /* host byte order */
    __u16 family;   /* AF_INET or AF_INET6 */
    __u32 pad;
};
struct netd_tcp_val {
    __u64 retransmits;
    __u64 first_jiffies; /* bpf_jiffies64() */
    __u64 last_jiffies;
    __u32 state; /* TCP state at the last retransmission (TCP_ESTABLISHED = 1, ...) */
    __u32 pad;
};

/* netd_tcp_events: per-CPU array of u64. */
enum netd_tcp_event {
    NETD_TCP_RETRANSMITS = 0,
    NETD_TCP_ENDPOINT_NEW,
    NETD_TCP_ENDPOINT_LOST,
    NETD_TCP_EV_COUNT
};

/* netd_rdma_cm: per-CPU array of u64 indexed by RDMA CM event (enum rdma_cm_event_type, clamped). */
#define NETD_RDMA_CM_EVENTS 32
/* netd_rdma_events: per-CPU array of u64. */
enum netd_rdma_event {
    NETD_RDMA_CM_ERRORS = 0, /* CM events delivered with a non-zero status */
    NETD_RDMA_QP_CREATE,
    NETD_RDMA_QP_CREATE_FAIL,
    NETD_RDMA_QP_DESTROY,
    NETD_RDMA_EV_COUNT
};

/* Shared by the programs; only where bcc compiles them (its helpers.h defines BCC_SEC), so user space and
 * the gcc layout check above see the layout alone. bcc rewrites map calls (m.lookup(&k)) only where a
 * program's own file spells them, not in macros or in this header, so lookups stay at the call sites. */
#ifdef BCC_SEC
#define BE16(x) ((__u16)__builtin_bswap16((__u16)(x))) /* BPF runs host-endian: x86-64, little */

/* Adds n to the u64 counter a map lookup returned; a failed lookup (NULL) counts nothing. */
static __always_inline void netd_count(__u64 *counter, __u64 n)
{
    if (counter)
        *counter += n;
}
#endif /* BCC_SEC */

#endif /* NETD_BPF_H */

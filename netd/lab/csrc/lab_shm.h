// SPDX-License-Identifier: Apache-2.0
/* netd lab: the memory shared by a host agent (netd-lab-host, C) and the lab's Python side.
 *
 * One file per lab host (<lab state dir>/host<i>.shm), mapped by both. Single writer per field:
 * fields marked [ctl] are written by Python (the DCQCN controller / scenario runner), [agent] by the
 * agent. 64-bit fields are naturally aligned, so plain loads and stores are atomic on x86-64; the
 * agent reads [ctl] fields with relaxed atomic loads, and a flow is published by writing its
 * fields, then bumping `generation`, then setting `active`.
 *
 * Mirrored in netd/lab/shm.py (ctypes); tests/lab/test_shm_layout.py compiles a probe and compares
 * every offset and size. Bump LAB_SHM_VERSION on any change.
 */
#ifndef NETD_LAB_SHM_H
#define NETD_LAB_SHM_H

#include <stdint.h>

#define LAB_SHM_MAGIC 0x424c444eu /* "NDLB" */
#define LAB_SHM_VERSION 3u
#define LAB_MAX_FLOWS 64
#define LAB_MAX_RQPS 256

struct lab_control {           /* [ctl] */
    uint32_t np_interval_us;   /* notification point: at most one CNP per QP per interval */
    uint32_t ack_every;        /* a coalesced ACK per this many in-order packets (or 10 ms) */
    uint32_t stuck;            /* 1: stop draining the receive queue and send PFC XOFF (storm) */
    uint32_t storm_refresh_us; /* XOFF period while stuck */
    uint32_t storm_warn_ms;    /* pausing longer than this counts a tx_pause_storm_warning_event */
    uint32_t ack_timeout_us;   /* requester: no ACK progress for this long -> go back to the last ACK */
    uint64_t link_bps;         /* port speed: pause quanta (512 bit times) to time */
};

struct lab_counters { /* [agent] cumulative since the agent started: the "NIC" counters */
    uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes; /* every RoCE frame (data, CNP, ACK) */
    uint64_t tx_data_pkts, tx_data_bytes, rx_data_pkts, rx_data_bytes;
    uint64_t ecn_marked_rx; /* data frames that arrived CE-marked */
    uint64_t cnp_sent, cnp_handled, cnp_ignored;
    uint64_t out_of_sequence, duplicate_request, packet_seq_err, out_of_buffer, local_ack_timeout_err;
    uint64_t rx_pause, rx_pause_duration_us, rx_pause_transition;
    uint64_t tx_pause, tx_pause_duration_us, pause_storm_warning;
    uint64_t pacer_late_ns, tx_errors; /* diagnostics: time the agent woke more than 1 ms after a due
                                          departure (the CPU was busy), failed sends */
};

struct lab_flow {                                 /* one requester QP */
    uint32_t active;                              /* [ctl] */
    uint32_t qpn;                                 /* [ctl] this QP; the responder's QP has the same number */
    uint32_t dst_ip;                              /* [ctl] network byte order */
    uint32_t payload;                             /* [ctl] bytes per packet (the RoCE MTU) */
    uint64_t rate_bps;                            /* [ctl] DCQCN current rate, wire bits per second */
    uint64_t generation;                          /* [ctl] bumped for each new flow in this slot */
    uint64_t seen_generation;                     /* [agent] */
    uint64_t tx_pkts, tx_bytes, tx_payload_bytes; /* [agent] */
    uint64_t psn, acked_psn, cnp_rx, nak_rx, retransmitted; /* [agent] */
    uint64_t last_progress_ns, timeouts;                    /* [agent] */
};

struct lab_rqp { /* [agent] one responder QP, slot = qpn % LAB_MAX_RQPS */
    uint32_t qpn, src_ip;
    uint64_t expected_psn;
    uint64_t rx_pkts, rx_payload_bytes, ce_pkts, cnp_sent, oos, dup, nak_sent, ack_sent;
    uint64_t last_cnp_ns, last_ack_ns;
    uint32_t nak_armed, since_ack;
};

struct lab_shm {
    uint32_t magic, version;
    uint32_t agent_pid, ready; /* [agent] ready = 1 once sockets are open */
    uint64_t heartbeat_ns;     /* [agent] CLOCK_MONOTONIC of the last loop iteration */
    uint64_t paused_until_ns;  /* [agent] PFC pause in force until then (0: not paused) */
    struct lab_control ctl;
    struct lab_counters c;
    struct lab_flow flows[LAB_MAX_FLOWS];
    struct lab_rqp rqps[LAB_MAX_RQPS];
};

#endif

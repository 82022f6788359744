// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * pfc_counter.c: IEEE 802.3x PAUSE and 802.1Qbb PFC frames on tc clsact ingress.
 *
 * MAC control frames (ethertype 0x8808) reach the kernel on soft-RoCE hosts, veth labs and collector
 * ports; a NIC that terminates PFC in hardware never passes them up (its ethtool counters do). Counts
 * per receiving ifindex in a per-CPU hash:
 *   PAUSE (opcode 0x0001): frames, summed pause_time quanta, resumes (pause_time 0);
 *   PFC (opcode 0x0101): frames, and per priority whose class-enable bit is set: frames, summed
 *   quanta, resumes; other opcodes; frames too short for their opcode.
 * One quantum is 512 bit times at the link speed (user space converts with the link rate).
 * Per-interface counters live in a per-CPU array slot (ifindex modulo NETD_PFC_SLOTS): no hash
 * lookup, which would cost more than the rest of the program.
 *
 * Configuration (-D): NETD_PFC_SLOTS (256, a power of two).
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/pkt_cls.h>

#include "netd_bpf.h"

#ifndef NETD_PFC_SLOTS
#define NETD_PFC_SLOTS 256
#endif

#define OP_PAUSE 0x0001
#define OP_PFC 0x0101

BPF_PERCPU_ARRAY(netd_pfc_stats, struct netd_pfc_val, NETD_PFC_SLOTS);

struct mac_control {
    __be16 opcode;
    __be16 param;     /* PAUSE: pause_time; PFC: class-enable vector */
    __be16 quanta[8]; /* PFC only: per-priority pause time */
};

static __always_inline void pfc_class(struct netd_pfc_val *v, u16 cev, __be16 *quanta, int prio)
{
    if (!(cev & (1u << prio)))
        return;
    u16 q = BE16(quanta[prio]);
    v->prio_frames[prio] += 1;
    v->prio_quanta[prio] += q;
    if (q == 0)
        v->prio_xon[prio] += 1;
}

int netd_pfc_ingress(struct __sk_buff *skb)
{
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end || eth->h_proto != BE16(ETH_P_PAUSE))
        return TC_ACT_UNSPEC;

    u32 ifindex = skb->ifindex;
    u32 slot = ifindex & (NETD_PFC_SLOTS - 1);
    struct netd_pfc_val *v = netd_pfc_stats.lookup(&slot);
    if (!v)
        return TC_ACT_UNSPEC;
    v->ifindex = ifindex;

    struct mac_control *mc = (void *)(eth + 1);
    if ((void *)&mc->param + sizeof(mc->param) > end) {
        v->malformed += 1;
        return TC_ACT_UNSPEC;
    }
    u16 opcode = BE16(mc->opcode);
    if (opcode == OP_PAUSE) {
        u16 q = BE16(mc->param);
        v->pause_frames += 1;
        v->pause_quanta += q;
        if (q == 0)
            v->pause_xon += 1;
    } else if (opcode == OP_PFC) {
        if ((void *)(mc + 1) > end) {
            v->malformed += 1;
            return TC_ACT_UNSPEC;
        }
        u16 cev = BE16(mc->param);
        v->pfc_frames += 1;
#pragma unroll
        for (int prio = 0; prio < NETD_PRIORITIES; prio++)
            pfc_class(v, cev, mc->quanta, prio);
    } else {
        v->other_opcode += 1;
    }
    return TC_ACT_UNSPEC;
}

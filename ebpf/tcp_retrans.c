// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * tcp_retrans.c: TCP retransmissions per remote endpoint (NCCL's bootstrap and socket transport).
 *
 * Counts retransmissions that left the host (the kernel's RetransSegs for one-segment packets) in an
 * LRU hash keyed by remote address and port, plus a total. Three attach points, chosen by user space
 * at run time with -DNETD_TCP_ATTACH (the first the kernel offers and accepts):
 *   1 tracepoint tcp:tcp_retransmit_skb: needs tracefs; the layout comes from the event's format.
 *   2 fexit on __tcp_retransmit_skb (where the tracepoint fires): needs BTF and BPF trampolines.
 *   3 raw tracepoint tcp_retransmit_skb: needs neither tracefs nor trampolines; gets the raw
 *     arguments (sk, skb[, err]).
 * -DNETD_TCP_TP_HAS_ERR=1 where the event carries `err` (it then also fires for failed attempts,
 * which are not counted). Modes 2 and 3 read struct sock_common at offsets user space takes from the
 * running kernel's BTF (-DNETD_SKC_FAMILY, _STATE, _DPORT, _DADDR, _V6_DADDR; -1 for a field the
 * kernel lacks), never from the compile-time headers.
 * Other configuration: NETD_TCP_TABLE_SIZE (4096).
 */
#include <uapi/linux/bpf.h>

#include "netd_bpf.h"

#ifndef NETD_TCP_TABLE_SIZE
#define NETD_TCP_TABLE_SIZE 4096
#endif
#ifndef NETD_TCP_ATTACH
#define NETD_TCP_ATTACH 1
#endif

#define NETD_AF_INET 2
#define NETD_AF_INET6 10

BPF_TABLE("lru_hash", struct netd_tcp_key, struct netd_tcp_val, netd_tcp_retrans, NETD_TCP_TABLE_SIZE);
BPF_PERCPU_ARRAY(netd_tcp_events, u64, NETD_TCP_EV_COUNT);

static __always_inline void tcp_event(u32 event)
{
    netd_count(netd_tcp_events.lookup(&event), 1);
}

static __always_inline void record(struct netd_tcp_key *key, u32 state)
{
    u64 now = bpf_jiffies64();
    tcp_event(NETD_TCP_RETRANSMITS);
    struct netd_tcp_val *v = netd_tcp_retrans.lookup(key);
    if (!v) {
        struct netd_tcp_val init = {};
        init.first_jiffies = now;
        if (netd_tcp_retrans.insert(key, &init) == 0)
            tcp_event(NETD_TCP_ENDPOINT_NEW);
        v = netd_tcp_retrans.lookup(key);
        if (!v) {
            tcp_event(NETD_TCP_ENDPOINT_LOST);
            return;
        }
    }
    __sync_fetch_and_add(&v->retransmits, 1);
    v->last_jiffies = now;
    v->state = state;
}

#if NETD_TCP_ATTACH == 1
TRACEPOINT_PROBE(tcp, tcp_retransmit_skb)
{
#if NETD_TCP_TP_HAS_ERR
    if (args->err)
        return 0;
#endif
    struct netd_tcp_key key = {};
    /* daddr_v6 holds the IPv4-mapped address for AF_INET sockets (TP_STORE_ADDRS). */
    __builtin_memcpy(key.daddr, args->daddr_v6, 16);
    key.dport = args->dport;
    key.family = args->family;
    record(&key, args->state);
    return 0;
}
#else
static __always_inline void record_sock(void *sk)
{
    struct netd_tcp_key key = {};
    u16 family = 0, dport = 0;
    u8 state = 0;
    bpf_probe_read_kernel(&family, sizeof(family), sk + NETD_SKC_FAMILY);
    bpf_probe_read_kernel(&dport, sizeof(dport), sk + NETD_SKC_DPORT);
    bpf_probe_read_kernel(&state, sizeof(state), sk + NETD_SKC_STATE);
    key.family = family;
    key.dport = __builtin_bswap16(dport);
    if (family == NETD_AF_INET) {
        u32 *a = (u32 *)key.daddr;
        a[2] = 0xffff0000u; /* ::ffff:a.b.c.d, as the tracepoint stores it */
        bpf_probe_read_kernel(&a[3], 4, sk + NETD_SKC_DADDR);
    }
#if NETD_SKC_V6_DADDR >= 0
    else if (family == NETD_AF_INET6) {
        bpf_probe_read_kernel(key.daddr, 16, sk + NETD_SKC_V6_DADDR);
    }
#endif
    record(&key, state);
}

#if NETD_TCP_ATTACH == 2
KRETFUNC_PROBE(__tcp_retransmit_skb, void *sk, void *skb, int segs, int ret)
{
    if (ret == 0)
        record_sock(sk);
    return 0;
}
#elif NETD_TCP_ATTACH == 3
RAW_TRACEPOINT_PROBE(tcp_retransmit_skb)
{
#if NETD_TCP_TP_HAS_ERR
    if ((int)ctx->args[2])
        return 0;
#endif
    record_sock((void *)ctx->args[0]);
    return 0;
}
#else
#error "NETD_TCP_ATTACH must be 1 (tracepoint), 2 (fexit) or 3 (raw tracepoint)"
#endif
#endif

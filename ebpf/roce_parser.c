// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * roce_parser.c: RoCEv2 telemetry on tc clsact ingress and egress.
 *
 * Parses Ethernet (at most one 802.1Q/802.1ad tag), IPv4 or IPv6, UDP to NETD_ROCE_PORT and the BTH,
 * and aggregates in the kernel (nothing per packet reaches user space):
 *   netd_roce_class   per (direction, DSCP, ECN) packets and bytes        per-CPU array
 *   netd_roce_events  CNPs, ACK/NAK syndromes, PSN gaps, rejects, flows  per-CPU array
 *   netd_flow_cache   per (source GID, destination GID, DestQP, direction) per-CPU direct-mapped
 *   netd_roce_flows   ... and the LRU hash that slots are written back to  (see netd_bpf.h)
 *   netd_psn_state    each flow's next expected PSN, shared by all CPUs    array, atomic exchange
 * A UDP/4791 packet is counted as RoCE only when every header is inside the frame and consistent
 * (IPv4 checksum, IP/UDP lengths, not a fragment, BTH version 0, an opcode some transport defines,
 * long enough for that opcode's extension headers); otherwise it is counted as rejected, by reason.
 * The ICRC is not verified (a CRC-32 over the packet costs more than the whole parser).
 *
 * Configuration (-D): NETD_ROCE_PORT (4791), NETD_FLOW_TABLE_SIZE (16384), NETD_FLOW_CACHE_SLOTS
 * (1024 per CPU), NETD_PSN_SLOTS (16384, a power of two), NETD_FLOWS (1: keep flows; 0: aggregates
 * only).
 * The programs return TC_ACT_UNSPEC: they observe, and the next filter (or the default) decides.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/ipv6.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/udp.h>

#include "netd_bpf.h"

#ifndef NETD_ROCE_PORT
#define NETD_ROCE_PORT 4791
#endif
#ifndef NETD_FLOW_TABLE_SIZE
#define NETD_FLOW_TABLE_SIZE 16384
#endif
#ifndef NETD_FLOW_CACHE_SLOTS
#define NETD_FLOW_CACHE_SLOTS 1024 /* per CPU; a power of two */
#endif
#ifndef NETD_PSN_SLOTS
#define NETD_PSN_SLOTS 16384 /* a power of two */
#endif
#ifndef NETD_FLOWS
#define NETD_FLOWS 1
#endif

#define BE32_FFFF 0xffff0000u /* bytes 00 00 ff ff read as a little-endian u32 */
#define BTH_LEN 12
#define ICRC_LEN 4
#define OP_CNP 0x81

BPF_PERCPU_ARRAY(netd_roce_class, struct netd_class_val, NETD_CLASS_SLOTS);
BPF_PERCPU_ARRAY(netd_roce_events, u64, NETD_ROCE_EVENT_SLOTS);
#if NETD_FLOWS
BPF_PERCPU_ARRAY(netd_flow_cache, struct netd_flow_slot, NETD_FLOW_CACHE_SLOTS);
BPF_TABLE("lru_hash", struct netd_flow_key, struct netd_flow_val, netd_roce_flows, NETD_FLOW_TABLE_SIZE);
/* One u64 per slot, shared by every CPU: (flow tag << 32) | next expected PSN (see flow_update). */
BPF_TABLE("array", u32, u64, netd_psn_state, NETD_PSN_SLOTS);
#endif

struct vlan_tag {
    __be16 tci;
    __be16 proto;
};

/* What the IP layer told us about one candidate packet. */
struct roce_pkt {
    struct netd_flow_key key; /* source and destination GIDs filled in by ip_layer() */
    u32 l4;                   /* offset of the UDP header */
    u32 ip_len;               /* IP payload length (UDP header + BTH + ... + ICRC) claimed by the IP header */
    u8 dscp;
    u8 ecn;
};

static __always_inline void count_event_n(u32 dir, u32 event, u64 n)
{
    u32 idx = dir * NETD_EV_COUNT + event;
    netd_count(netd_roce_events.lookup(&idx), n);
}

static __always_inline void count_event(u32 dir, u32 event)
{
    count_event_n(dir, event, 1);
}

/* Make the first `len` bytes directly readable. A frame built in pieces (rare for headers) is
 * linearised; a frame shorter than `len` fails. Packet pointers must be reloaded afterwards. */
static __always_inline int linear(struct __sk_buff *skb, u32 len)
{
    /* fresh loads: clang must not reuse a widened copy of skb->data, which the verifier refuses */
    void *data = (void *)(long)(*(volatile __u32 *)&skb->data);
    void *end = (void *)(long)(*(volatile __u32 *)&skb->data_end);
    if (data + len <= end)
        return 1;
    if (len > skb->len)
        return 0;
    return bpf_skb_pull_data(skb, len) == 0;
}

/* Minimum length of the extension headers after the BTH, or -1 when no transport defines the opcode.
 * Bit n of each mask stands for the opcode's low five bits == n (IBA vol. 1, table 38; 0x18 FLUSH and
 * 0x19 ATOMIC WRITE from IBA 1.5). */
#define M_AETH_IMM_IETH_FETH 0x01C7AA28u /* 4 bytes: ImmDt, AETH, IETH or FETH */
#define M_RETH 0x03001C40u               /* 16: RETH */
#define M_ATOMIC_ETH 0x00180000u         /* 28: AtomicETH */
#define M_ATOMIC_ACK_WR 0x02040000u      /* 8: AtomicAckETH, or the ATOMIC WRITE payload */
#define M_VALID_RC 0x03DFFFFFu           /* RC and XRC: 0x00..0x14, 0x16..0x19 */
#define M_VALID_UC 0x00000FFFu           /* 0x00..0x0b */
#define M_VALID_RD 0x003FFFFFu           /* 0x00..0x15 */
#define M_VALID_UD 0x00000030u           /* SEND ONLY (with immediate) */
#define RESPONSE_OPS 0x0007E000u         /* 0x0d..0x12: read responses and acknowledgements */

static __always_inline int ext_len(u8 opcode)
{
    u32 bit = 1u << (opcode & 0x1f);
    u32 valid, extra = 0;
    if (opcode == OP_CNP)
        return 16;
    // clang-format off
    switch (opcode & 0xe0) {
    case 0x00: valid = M_VALID_RC; break;
    case 0x20: valid = M_VALID_UC; break;
    case 0x40: valid = M_VALID_RD; extra = (bit & RESPONSE_OPS) ? 4 : 12; break; /* RDETH (+DETH) */
    case 0x60: valid = M_VALID_UD; extra = 8; break;                              /* DETH */
    case 0xa0: valid = M_VALID_RC; extra = (bit & RESPONSE_OPS) ? 0 : 4; break;   /* XRCETH */
    default: return -1;
    }
    // clang-format on
    if (!(bit & valid))
        return -1;
    return extra + ((bit & M_AETH_IMM_IETH_FETH) ? 4 : 0) + ((bit & M_RETH) ? 16 : 0) +
           ((bit & M_ATOMIC_ETH) ? 28 : 0) + ((bit & M_ATOMIC_ACK_WR) ? 8 : 0);
}

/* The one's-complement sum of the header, options included, must be 0xffff. The caller has
 * checked that the fixed 20 bytes are in the frame; each option word is checked here. */
static __always_inline u32 ipv4_checksum_ok(struct iphdr *ip, void *end, u32 ihl)
{
    /* 32-bit words summed in 64 bits, then folded: the same one's-complement sum, half the loads */
    u32 *w = (u32 *)ip;
    u64 sum = (u64)w[0] + w[1] + w[2] + w[3] + w[4];
    u32 *opt = (u32 *)(ip + 1);
    for (int i = 0; i < 10; i++) { /* at most 40 bytes of options (a bounded loop) */
        if (i + 5 >= ihl)
            break;
        u32 *word = opt + i;
        /* keep clang from rewriting the check as arithmetic on `end`, which the verifier refuses */
        asm volatile("" : "+r"(word));
        if ((void *)(word + 1) > end)
            return 0;
        sum += *word;
    }
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return sum == 0xffff;
}

/* Locates UDP/NETD_ROCE_PORT behind IPv4 or IPv6. Returns 1 for a candidate (filled in), 0 for
 * traffic that is not RoCE-shaped, -(1 + event) for a candidate rejected for that reason. */
static __always_inline int ip_layer(struct __sk_buff *skb, u32 l3, __be16 proto, struct roce_pkt *p)
{
    void *data, *end;
    if (proto == BE16(ETH_P_IP)) {
        if (!linear(skb, l3 + sizeof(struct iphdr)))
            return 0;
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        struct iphdr *ip = data + l3;
        if ((void *)(ip + 1) > end)
            return 0;
        if (ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
            return 0;
        u32 hlen = ip->ihl * 4;
        u16 frag = BE16(ip->frag_off);
        u32 tot = BE16(ip->tot_len);
        if (frag & 0x1fff) /* a later fragment has no UDP header to look at */
            return 0;
        if (!linear(skb, l3 + hlen + sizeof(struct udphdr)))
            return 0;
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        ip = data + l3;
        struct udphdr *udp = data + l3 + hlen;
        if ((void *)(ip + 1) > end || (void *)(udp + 1) > end)
            return 0;
        if (udp->dest != BE16(NETD_ROCE_PORT))
            return 0;
        if (frag & 0x2000)
            return -(1 + NETD_EV_REJ_FRAGMENT);
        if (tot < hlen + sizeof(struct udphdr) || l3 + tot > skb->len)
            return -(1 + NETD_EV_REJ_TRUNCATED);
        if (!ipv4_checksum_ok(ip, end, ip->ihl))
            return -(1 + NETD_EV_REJ_IP);
        /* IPv4-mapped: ::ffff:a.b.c.d (the key starts zeroed) */
        u32 *src = (u32 *)p->key.src, *dst = (u32 *)p->key.dst;
        src[2] = dst[2] = BE32_FFFF;
        src[3] = ip->saddr;
        dst[3] = ip->daddr;
        p->dscp = ip->tos >> 2;
        p->ecn = ip->tos & 3;
        p->l4 = l3 + hlen;
        p->ip_len = tot - hlen;
        return 1;
    }
    if (proto == BE16(ETH_P_IPV6)) {
        if (!linear(skb, l3 + sizeof(struct ipv6hdr) + sizeof(struct udphdr)))
            return 0;
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        struct ipv6hdr *ip6 = data + l3;
        struct udphdr *udp = data + l3 + sizeof(struct ipv6hdr);
        if ((void *)(udp + 1) > end)
            return 0;
        /* RoCEv2 carries no extension headers: UDP must be the next header. */
        if (ip6->version != 6 || ip6->nexthdr != IPPROTO_UDP || udp->dest != BE16(NETD_ROCE_PORT))
            return 0;
        u32 plen = BE16(ip6->payload_len);
        if (l3 + sizeof(struct ipv6hdr) + plen > skb->len)
            return -(1 + NETD_EV_REJ_TRUNCATED);
        if (plen < sizeof(struct udphdr))
            return -(1 + NETD_EV_REJ_IP);
        __builtin_memcpy(p->key.src, &ip6->saddr, 16);
        __builtin_memcpy(p->key.dst, &ip6->daddr, 16);
        u8 tclass = (ip6->priority << 4) | (ip6->flow_lbl[0] >> 4);
        p->dscp = tclass >> 2;
        p->ecn = tclass & 3;
        p->l4 = l3 + sizeof(struct ipv6hdr);
        p->ip_len = plen;
        return 1;
    }
    return 0;
}

#if NETD_FLOWS
static __always_inline void add(u64 *dst, u64 v)
{
    if (v)
        __sync_fetch_and_add(dst, v);
}

/* A slot's flow leaves the cache: add its counts to its record in the LRU hash (slow path). */
static __always_inline void flow_writeback(u32 dir, struct netd_flow_slot *e)
{
    struct netd_flow_val *f = netd_roce_flows.lookup(&e->key);
    count_event(dir, NETD_EV_FLOW_WRITEBACK);
    if (!f) {
        if (netd_roce_flows.insert(&e->key, &e->val) == 0) {
            count_event(dir, NETD_EV_FLOW_NEW);
            return;
        }
        f = netd_roce_flows.lookup(&e->key); /* another CPU inserted it first */
        if (!f) {
            count_event(dir, NETD_EV_FLOW_LOST);
            return;
        }
    }
    struct netd_flow_val *v = &e->val;
    add(&f->packets, v->packets);
    add(&f->bytes, v->bytes);
    add(&f->ce, v->ce);
    add(&f->ect, v->ect);
    add(&f->cnp, v->cnp);
    add(&f->acks, v->acks);
    add(&f->naks, v->naks);
    add(&f->nak_seq, v->nak_seq);
    add(&f->psn_gaps, v->psn_gaps);
    add(&f->psn_missing, v->psn_missing);
    add(&f->psn_rewinds, v->psn_rewinds);
    if (v->first_jiffies < f->first_jiffies)
        f->first_jiffies = v->first_jiffies;
    if (v->last_jiffies > f->last_jiffies) {
        f->last_jiffies = v->last_jiffies;
        f->dscp = v->dscp;
        f->opcode = v->opcode;
    }
}

static __always_inline u64 flow_hash(struct netd_flow_key *k)
{
    u64 *w = (u64 *)k; /* 5 words: src, dst, then QP, direction, used */
    u64 h = (w[0] ^ w[1]) * 0x9e3779b97f4a7c15ull ^ (w[2] ^ w[3]) * 0xc2b2ae3d27d4eb4full ^
            w[4] * 0x165667b19e3779f9ull;
    return h ^ (h >> 29);
}

static __always_inline int key_equal(struct netd_flow_key *a, struct netd_flow_key *b)
{
    u64 *x = (u64 *)a, *y = (u64 *)b;
    return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

/* Per packet: one per-CPU array access and plain adds; the verifier inlines both that lookup and
 * bpf_jiffies64(), so no real call is made (a hash lookup alone costs more than the whole parser,
 * see docs/benchmarks.md). The LRU hash is touched only when the slot changes hands. */
static __always_inline void flow_update(u32 dir, struct roce_pkt *p, u32 qp, u8 opcode, u32 psn, u32 len,
                                        u8 syndrome)
{
    struct netd_flow_key *key = &p->key;
    key->dest_qp = qp;
    key->dir = dir;
    key->used = 1;
    u64 h = flow_hash(key);
    u32 idx = (u32)h & (NETD_FLOW_CACHE_SLOTS - 1);
    struct netd_flow_slot *e = netd_flow_cache.lookup(&idx);
    if (!e)
        return;
    u64 now = bpf_jiffies64();
    struct netd_flow_val *f = &e->val;
    if (!key_equal(&e->key, key)) {
        if (e->key.used)
            flow_writeback(dir, e);
        __builtin_memcpy(&e->key, key, sizeof(*key));
        __builtin_memset(f, 0, sizeof(*f));
        f->first_jiffies = now;
    }
    f->packets += 1;
    f->bytes += len;
    f->last_jiffies = now;
    f->dscp = p->dscp;
    f->opcode = opcode;
    if (p->ecn == 3)
        f->ce += 1;
    else if (p->ecn)
        f->ect += 1;
    if (opcode == OP_CNP) {
        f->cnp += 1;
        return;
    }
    if (syndrome != 0xff) { /* an acknowledgement */
        if ((syndrome & 0x60) == 0)
            f->acks += 1;
        else
            f->naks += 1;
        if (syndrome == 0x60)
            f->nak_seq += 1;
        return;
    }
    u32 low = opcode & 0x1f;
    u32 transport = opcode & 0xe0;
    /* PSN continuity of requests on connected transports (UD interleaves destinations). */
    if ((transport != 0x00 && transport != 0x20 && transport != 0xa0) || ((1u << low) & RESPONSE_OPS))
        return;
    u32 pidx = (u32)(h >> 32) & (NETD_PSN_SLOTS - 1);
    u64 *state = netd_psn_state.lookup(&pidx);
    if (!state)
        return;
    /* An RDMA READ request consumes one PSN per response packet, a number only the MTU decides. */
    u32 next = low == 0x0c ? NETD_PSN_UNKNOWN : ((psn + 1) & 0xffffff);
    u64 tag = ((u64)((u32)h | 1u)) << 32; /* low hash bits (the cache slot's) tell flows apart here */
    /* One atomic exchange: every CPU's packets of a flow are ordered by it, so the PSN each packet is
     * compared with is exactly the one after the previous packet the hook saw, whichever CPU saw it
     * (docs/ebpf.md, "PSN tracking on many CPUs"). A slot held by another flow (tag differs)
     * resynchronises. */
    u64 old = __sync_lock_test_and_set(state, tag | next);
    u32 expected = (u32)old;
    if ((old & 0xffffffff00000000ull) != tag || expected == NETD_PSN_UNKNOWN)
        return;
    u32 delta = (psn - expected) & 0xffffff;
    if (delta && delta < 0x800000) {
        f->psn_gaps += 1;
        f->psn_missing += delta;
        count_event(dir, NETD_EV_PSN_GAP);
        count_event_n(dir, NETD_EV_PSN_MISSING, delta);
    } else if (delta) {
        f->psn_rewinds += 1;
        count_event(dir, NETD_EV_PSN_REWIND);
    }
}
#endif

static __always_inline int roce_observe(struct __sk_buff *skb, u32 dir)
{
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    if ((void *)(eth + 1) > end)
        return TC_ACT_UNSPEC;
    __be16 proto = eth->h_proto;
    u32 l3 = sizeof(struct ethhdr);
    if (proto == BE16(ETH_P_8021Q) || proto == BE16(ETH_P_8021AD)) {
        struct vlan_tag *tag = data + l3;
        if ((void *)(tag + 1) > end)
            return TC_ACT_UNSPEC;
        proto = tag->proto;
        l3 += sizeof(struct vlan_tag);
    }
    if (proto != BE16(ETH_P_IP) && proto != BE16(ETH_P_IPV6))
        return TC_ACT_UNSPEC;

    struct roce_pkt p = {};
    int r = ip_layer(skb, l3, proto, &p);
    if (r == 0)
        return TC_ACT_UNSPEC;
    if (r < 0) {
        count_event(dir, (u32)(-r - 1));
        return TC_ACT_UNSPEC;
    }
    u32 l4 = p.l4 & 0xff; /* at most 18 + 60: keeps the verifier's range small */
    if (!linear(skb, l4 + sizeof(struct udphdr) + BTH_LEN + 4)) {
        /* Too short for UDP + BTH + 4: fits no RoCE packet (the smallest has an ICRC). */
        count_event(dir, l4 + sizeof(struct udphdr) + BTH_LEN + 4 > skb->len ? NETD_EV_REJ_TRUNCATED
                                                                             : NETD_EV_REJ_UDP_LENGTH);
        return TC_ACT_UNSPEC;
    }
    data = (void *)(long)skb->data;
    end = (void *)(long)skb->data_end;
    struct udphdr *udp = data + l4;
    u8 *bth = data + l4 + sizeof(struct udphdr);
    if (bth + BTH_LEN + 4 > (u8 *)end)
        return TC_ACT_UNSPEC;
    u32 ulen = BE16(udp->len);
    if (ulen != p.ip_len) {
        count_event(dir, NETD_EV_REJ_UDP_LENGTH);
        return TC_ACT_UNSPEC;
    }
    u8 opcode = bth[0];
    int ext = ext_len(opcode);
    if (ext < 0 || (bth[1] & 0x0f) != 0) { /* unknown opcode, or TVer != 0 */
        count_event(dir, NETD_EV_REJ_BTH);
        return TC_ACT_UNSPEC;
    }
    if (ulen < sizeof(struct udphdr) + BTH_LEN + ext + ICRC_LEN) {
        count_event(dir, NETD_EV_REJ_UDP_LENGTH);
        return TC_ACT_UNSPEC;
    }

    /* A RoCEv2 packet. */
    u32 len = skb->len;
    u32 slot = (dir << 8) | ((u32)(p.dscp & 0x3f) << 2) | (p.ecn & 3);
    struct netd_class_val *c = netd_roce_class.lookup(&slot);
    if (c) {
        c->packets += 1;
        c->bytes += len;
    }
    u8 syndrome = 0xff; /* not an acknowledgement */
    if (opcode == OP_CNP) {
        count_event(dir, NETD_EV_CNP);
    } else if ((opcode & 0x5f) == 0x11) { /* RC (0x11) or XRC (0xb1) Acknowledge: AETH follows */
        syndrome = bth[BTH_LEN];
        if ((syndrome & 0x60) == 0)
            count_event(dir, NETD_EV_ACK);
        else if ((syndrome & 0x60) == 0x20)
            count_event(dir, NETD_EV_NAK_RNR);
        else if (syndrome == 0x60)
            count_event(dir, NETD_EV_NAK_SEQ);
        else
            count_event(dir, NETD_EV_NAK_OTHER);
    }
#if NETD_FLOWS
    u32 qp = ((u32)bth[5] << 16) | ((u32)bth[6] << 8) | bth[7];
    u32 psn = ((u32)bth[9] << 16) | ((u32)bth[10] << 8) | bth[11];
    flow_update(dir, &p, qp, opcode, psn, len, syndrome);
#endif
    return TC_ACT_UNSPEC;
}

int netd_roce_ingress(struct __sk_buff *skb)
{
    return roce_observe(skb, NETD_DIR_INGRESS);
}

int netd_roce_egress(struct __sk_buff *skb)
{
    return roce_observe(skb, NETD_DIR_EGRESS);
}

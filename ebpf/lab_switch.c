// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
// netd lab: the switch data plane of the namespace fabric (loaded by netd/lab/dataplane.py with bcc).
//
// * lab_egress   (tc clsact egress, every switch port): the congestion point. RED/ECN marking of
//                ECN-capable RoCEv2 data on the *real* backlog of the port's bottleneck qdisc, read
//                live from the root Qdisc (pointer captured by the tracepoints; offsets from the
//                running kernel's BTF, passed as -D). Also the per-packet queue histogram and which
//                ingress ports feed this queue (for PFC).
// * lab_ingress  (tc clsact ingress, every lab port, hosts included): the wire tap, i.e. ground truth
//                of what arrived over the link: RoCE data, CE, CNPs, ACK/NAK, PFC frames.
// * qdisc tracepoints: mirror of each lab root qdisc's backlog on every enqueue/dequeue, and the
//                PFC XOFF/XON crossings as ring-buffer events (the user-space PFC agent reacts).
//
// Configuration (-D): IFINDEX_BASE, MAX_PORTS, QDISC_MAJOR, QDISC_BACKLOG_OFF, QDISC_QLEN_OFF,
// QBUCKETS, QBUCKET_SHIFT. Per-port thresholds live in the port_cfg map (the lab can change them).
// Every program returns TC_ACT_UNSPEC so other filters on the same hook (netd's probes) still run.

#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/pkt_cls.h>
#include <uapi/linux/udp.h>

#ifndef MAX_PORTS
#define MAX_PORTS 128
#endif
#ifndef QBUCKETS
#define QBUCKETS 256
#endif
#ifndef QBUCKET_SHIFT
#define QBUCKET_SHIFT 11  // 2 KiB per histogram bucket
#endif

#define ROCE_PORT 4791
#define OP_ACK 0x11
#define OP_CNP 0x81
#define ETH_P_MACCTRL 0x8808
#define PFC_OPCODE 0x0101
#define PFC_PRIORITY 3

struct port_cfg {
    u64 kmin;      // bytes
    u64 kmax;      // bytes
    u64 pmax_u32;  // Pmax scaled to 2^32
    u64 xoff;      // bytes; 0 = no PFC on this port
    u64 xon;       // bytes
    u64 flags;     // bit 0: congestion point (mark) on
};

struct port_stats {
    // wire tap: arrived at this port (ingress)
    u64 in_pkts, in_bytes, in_data, in_data_bytes, in_ce, in_ect, in_cnp, in_ack, in_nak, in_pfc, in_pfc_xon;
    // congestion point: offered to this port's egress queue
    u64 cp_pkts, cp_bytes, cp_data, cp_data_bytes, cp_marked, cp_ect, cp_ce_in, cp_live_reads;
    // queue mirror, written by the tracepoints
    u64 q_backlog, q_qlen, q_max_backlog, q_ptr, q_events, xoff_state, xoff_events;
    u64 qhist[QBUCKETS];        // data packets by backlog at arrival
    u64 contrib_ns[MAX_PORTS];  // last time a packet from ingress port j was offered here
};

struct pfc_event {
    u32 port;
    u32 xoff;  // 1: crossed XOFF upwards, 0: fell below XON
    u64 backlog;
    u64 ts_ns;
};

BPF_ARRAY(port_cfg, struct port_cfg, MAX_PORTS);
BPF_ARRAY(port_stats, struct port_stats, MAX_PORTS);
BPF_RINGBUF_OUTPUT(pfc_events, 4);

struct bth {
    u8 opcode;
    u8 flags;
    u16 pkey;
    u32 dqpn;  // reserved(8) | dest QP(24)
    u32 apsn;  // ack-req(1) | reserved(7) | PSN(24)
};

// What a frame is, for both programs. 0: not ours; 1: RoCE data; 2: CNP; 3: ACK (4: NAK); 5: PFC.
struct frame {
    u32 kind;
    u32 ecn;
    u32 pfc_xon;
};

static __always_inline int port_index(u32 ifindex)
{
    u32 idx = ifindex - IFINDEX_BASE;  // unsigned: indexes below the base wrap to huge values
    return idx < MAX_PORTS ? (int)idx : -1;
}

static __always_inline void classify(struct __sk_buff *skb, struct frame *f)
{
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ethhdr *eth = data;
    f->kind = 0;
    f->ecn = 0;
    f->pfc_xon = 0;
    if ((void *)(eth + 1) > end)
        return;
    if (eth->h_proto == bpf_htons(ETH_P_MACCTRL)) {
        u16 *op = (void *)(eth + 1);
        if ((void *)(op + 10) > end || *op != bpf_htons(PFC_OPCODE))
            return;
        u16 enable = bpf_ntohs(op[1]);
        if (!(enable & (1 << PFC_PRIORITY)))
            return;
        f->kind = 5;
        f->pfc_xon = op[2 + PFC_PRIORITY] == 0;
        return;
    }
    if (eth->h_proto != bpf_htons(ETH_P_IP))
        return;
    struct iphdr *ip = (void *)(eth + 1);
    if ((void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
        return;
    struct udphdr *udp = (void *)(ip + 1);
    struct bth *b = (void *)(udp + 1);
    if ((void *)(b + 1) > end || udp->dest != bpf_htons(ROCE_PORT))
        return;
    f->ecn = ip->tos & 3;
    if (b->opcode == OP_CNP) {
        f->kind = 2;
    } else if (b->opcode == OP_ACK) {
        u8 *aeth = (void *)(b + 1);
        if ((void *)(aeth + 1) > end)
            return;
        f->kind = (aeth[0] & 0x60) == 0x60 ? 4 : 3;  // syndrome 011xxxxx: NAK
    } else {
        f->kind = 1;
    }
}

int lab_ingress(struct __sk_buff *skb)
{
    int idx = port_index(skb->ifindex);
    if (idx < 0)
        return TC_ACT_UNSPEC;
    struct port_stats *s = port_stats.lookup(&idx);
    if (!s)
        return TC_ACT_UNSPEC;
    struct frame f;
    classify(skb, &f);
    __sync_fetch_and_add(&s->in_pkts, 1);
    __sync_fetch_and_add(&s->in_bytes, skb->len);
    if (f.kind == 1) {
        __sync_fetch_and_add(&s->in_data, 1);
        __sync_fetch_and_add(&s->in_data_bytes, skb->len);
        if (f.ecn == 3)
            __sync_fetch_and_add(&s->in_ce, 1);
        else if (f.ecn)
            __sync_fetch_and_add(&s->in_ect, 1);
    } else if (f.kind == 2) {
        __sync_fetch_and_add(&s->in_cnp, 1);
    } else if (f.kind == 3) {
        __sync_fetch_and_add(&s->in_ack, 1);
    } else if (f.kind == 4) {
        __sync_fetch_and_add(&s->in_nak, 1);
    } else if (f.kind == 5) {
        __sync_fetch_and_add(&s->in_pfc, 1);
        if (f.pfc_xon)
            __sync_fetch_and_add(&s->in_pfc_xon, 1);
    }
    return TC_ACT_UNSPEC;
}

static __always_inline u64 live_backlog(struct port_stats *s)
{
    u64 ptr = s->q_ptr;
    u32 backlog = 0;
    if (ptr && bpf_probe_read_kernel(&backlog, sizeof(backlog), (void *)(ptr + QDISC_BACKLOG_OFF)) == 0) {
        __sync_fetch_and_add(&s->cp_live_reads, 1);
        return backlog;
    }
    return s->q_backlog;  // before the first enqueue the tracepoint has not seen the qdisc yet
}

static __always_inline int red_mark(struct port_cfg *c, u64 q)
{
    if (q <= c->kmin)
        return 0;
    if (q > c->kmax)
        return 1;
    u64 span = c->kmax - c->kmin;
    u64 threshold = span ? c->pmax_u32 * (q - c->kmin) / span : c->pmax_u32;
    return (u64)bpf_get_prandom_u32() < threshold;
}

int lab_egress(struct __sk_buff *skb)
{
    int idx = port_index(skb->ifindex);
    if (idx < 0)
        return TC_ACT_UNSPEC;
    struct port_stats *s = port_stats.lookup(&idx);
    struct port_cfg *c = port_cfg.lookup(&idx);
    if (!s || !c)
        return TC_ACT_UNSPEC;
    struct frame f;
    classify(skb, &f);
    __sync_fetch_and_add(&s->cp_pkts, 1);
    __sync_fetch_and_add(&s->cp_bytes, skb->len);
    int from = port_index(skb->ingress_ifindex);
    if (from >= 0 && from < MAX_PORTS)
        s->contrib_ns[from] = bpf_ktime_get_ns();
    if (f.kind != 1)
        return TC_ACT_UNSPEC;
    u64 q = live_backlog(s);
    u64 bucket = q >> QBUCKET_SHIFT;
    if (bucket >= QBUCKETS)
        bucket = QBUCKETS - 1;
    __sync_fetch_and_add(&s->qhist[bucket], 1);
    __sync_fetch_and_add(&s->cp_data, 1);
    __sync_fetch_and_add(&s->cp_data_bytes, skb->len);
    if (f.ecn == 3) {
        __sync_fetch_and_add(&s->cp_ce_in, 1);  // marked upstream already
    } else if (f.ecn) {
        __sync_fetch_and_add(&s->cp_ect, 1);
        if ((c->flags & 1) && red_mark(c, q) && bpf_skb_ecn_set_ce(skb))
            __sync_fetch_and_add(&s->cp_marked, 1);
    }
    return TC_ACT_UNSPEC;
}

static __always_inline void mirror(void *qdisc, int ifindex, u32 handle, int enqueue)
{
    if ((handle >> 16) != QDISC_MAJOR)
        return;
    int idx = port_index((u32)ifindex);
    if (idx < 0)
        return;
    struct port_stats *s = port_stats.lookup(&idx);
    struct port_cfg *c = port_cfg.lookup(&idx);
    if (!s || !c)
        return;
    u32 backlog = 0, qlen = 0;
    bpf_probe_read_kernel(&backlog, sizeof(backlog), qdisc + QDISC_BACKLOG_OFF);
    bpf_probe_read_kernel(&qlen, sizeof(qlen), qdisc + QDISC_QLEN_OFF);
    s->q_ptr = (u64)qdisc;
    s->q_backlog = backlog;
    s->q_qlen = qlen;
    if (backlog > s->q_max_backlog)
        s->q_max_backlog = backlog;
    __sync_fetch_and_add(&s->q_events, 1);
    if (!c->xoff)
        return;
    u32 crossed = 2;
    if (enqueue && backlog >= c->xoff && !s->xoff_state)
        crossed = 1;
    else if (!enqueue && backlog <= c->xon && s->xoff_state)
        crossed = 0;
    if (crossed == 2)
        return;
    s->xoff_state = crossed;
    if (crossed)
        __sync_fetch_and_add(&s->xoff_events, 1);
    struct pfc_event ev = {
        .port = (u32)idx, .xoff = crossed, .backlog = backlog, .ts_ns = bpf_ktime_get_ns()};
    pfc_events.ringbuf_output(&ev, sizeof(ev), 0);
}

TRACEPOINT_PROBE(qdisc, qdisc_enqueue)
{
    mirror((void *)args->qdisc, args->ifindex, args->handle, 1);
    return 0;
}

TRACEPOINT_PROBE(qdisc, qdisc_dequeue)
{
    if (args->packets > 0)
        mirror((void *)args->qdisc, args->ifindex, args->handle, 0);
    return 0;
}

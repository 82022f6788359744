// SPDX-License-Identifier: Apache-2.0
/* netd-lab-host: the "RoCE NIC" of one lab host, run inside the host's network namespace.
 *
 *   netd-lab-host SHM_FILE IFNAME IPV4
 *
 * Requester: sends RoCEv2-framed UDP/4791 (BTH with QP and PSN, RDMA WRITE first/middle/last,
 * ECT(0), DSCP 26) for every active flow in the shared memory, each paced at its rate_bps (the
 * DCQCN rate the lab's Python reaction point computes) and all together at most at the link rate
 * (ctl.link_bps, the NIC's line rate: a token bucket of LINK_BUCKET_BYTES, so no burst beyond that
 * at flow start or after idle); counts CNPs per QP; on a NAK (PSN sequence error) goes back to the
 * NAK's PSN (go-back-N, as RC does).
 * Responder: counts, checks PSNs, detects CE, returns CNPs (BTH opcode 0x81 with BECN set, DSCP 48,
 * to the requester's QP) never closer than np_interval_us per QP on the wire (the notification point),
 * coalesced ACKs, one NAK per sequence error.
 * Every packet carries the real RoCEv2 ICRC (roce_icrc.h) over the IPv4 and UDP headers the kernel
 * will write: the sockets are bound (known source port), set DF (so Linux writes IP ID 0 for an
 * unconnected socket) and send a zero UDP checksum, as RoCE NICs do.
 * PFC: honours 802.1Qbb frames for priority 3 from its switch (data stops for the pause quanta);
 * when told it is stuck, stops draining its receive queue and sends XOFF frames (a PFC storm).
 * Everything it does is counted in the shared memory (lab_shm.h), which the lab renders as the
 * host's RDMA sysfs counters. Pacing: ppoll to the next departure with 1 us timer slack. A NIC's
 * pacer does not wait for a shared CPU, and on a busy machine a normal thread wakes up milliseconds
 * late, so the agent runs SCHED_FIFO (priority RT_PRIORITY; nice NICE where that is not allowed). It
 * always sleeps between departures, and after MAX_BUSY_LOOPS iterations without sleeping it naps,
 * so it cannot monopolise a CPU. A flow that fell behind catches up by at most MAX_CREDIT_PKTS
 * packets or MAX_CREDIT_NS of sending; wake-ups more than LATE_NS after a due departure are counted
 * (pacer_late_ns: the machine was too busy for the lab's timing).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lab_shm.h"
#include "roce_icrc.h"

#define ROCE_PORT 4791
#define OP_WRITE_FIRST 0x06
#define OP_WRITE_MIDDLE 0x07
#define OP_WRITE_LAST 0x08
#define OP_ACK 0x11
#define OP_CNP 0x81
#define BTH_BECN 0x40 /* BTH byte 4: FECN 0x80, BECN 0x40 */
#define MSG_PKTS 64   /* an RDMA WRITE message spans this many packets */
#define PSN_MASK 0xffffffu
#define TOS_DATA 0x6a                    /* DSCP 26 (priority 3), ECT(0) */
#define TOS_ACK 0x68                     /* DSCP 26, not ECN-capable */
#define TOS_CNP 0xc0                     /* DSCP 48, not ECN-capable: CNPs ride a class PFC does not pause */
#define HDR_BYTES (14 + 20 + 8 + 12 + 4) /* Ethernet, IPv4, UDP, BTH, ICRC */
#define RETH_BYTES 16
#define MAX_CREDIT_PKTS 4
#define MAX_CREDIT_NS 5000000ull /* or 5 ms of sending, whichever is more */
#define LINK_BUCKET_BYTES 2500   /* the line-rate shaper's bucket: about two frames of a 1 KiB MTU */
#define RT_PRIORITY 10           /* below the lab daemon and the DCQCN controller (20) */
#define NICE -10
#define ACK_INTERVAL_NS 10000000ull /* ACK at least every 10 ms while data arrives */
#define MAX_BUSY_LOOPS 256          /* iterations without sleeping before a forced 50 us nap */
#define LATE_NS 1000000ull          /* a wake-up this late after a due departure counts in pacer_late_ns */
#define RX_BATCH 32
#define MAX_PAYLOAD 4096 /* the largest RoCE MTU */
#define ETH_P_MACCTRL 0x8808
#define PFC_PRIO 3

static volatile sig_atomic_t stop;
static struct lab_shm *shm;
struct tx_sock {
    int fd;
    uint8_t port[2]; /* the bound UDP source port, network byte order */
};
static int rx_fd, pfc_fd, ifindex;
static struct tx_sock tx_data, tx_ack, tx_cnp;
static uint8_t own_mac[6];
static uint32_t own_ip;
static uint64_t next_tx[LAB_MAX_FLOWS], link_next;
/* PFC time accounting, continuous like the NIC's *_pause_duration counters: 0 = not pausing */
static uint64_t rx_pause_mark, rx_pause_ns, storm_began, storm_mark, storm_next, tx_pause_ns;
static int storm_warned;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ld64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static uint32_t ld32(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "netd-lab-host: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void put_bth(uint8_t *b, uint8_t opcode, uint32_t qpn, uint32_t psn, int ack_req)
{
    b[0] = opcode;
    b[1] = 0;    /* SE, M, pad count, transport version 0 */
    b[2] = 0xff; /* partition key 0xffff */
    b[3] = 0xff;
    uint32_t dq = htonl(qpn & PSN_MASK);
    uint32_t ap = htonl((psn & PSN_MASK) | (ack_req ? 0x80000000u : 0));
    memcpy(b + 4, &dq, 4);
    memcpy(b + 8, &ap, 4);
}

/* Fill in the last 4 bytes of the transport packet `buf` with its ICRC, computed over the IPv4 and UDP
 * headers the kernel will put in front of it (IP ID 0 and DF: see open_sockets). */
static void put_icrc(const struct tx_sock *s, uint32_t dst_ip, uint8_t *buf, size_t len)
{
    uint16_t ip_len = htons((uint16_t)(20 + 8 + len)), udp_len = htons((uint16_t)(8 + len));
    uint16_t dport = htons(ROCE_PORT), df = htons(0x4000);
    uint8_t ip[20] = {0x45, 0, 0, 0, 0, 0, 0, 0, 0, IPPROTO_UDP, 0, 0};
    memcpy(ip + 2, &ip_len, 2);
    memcpy(ip + 6, &df, 2);
    memcpy(ip + 12, &own_ip, 4);
    memcpy(ip + 16, &dst_ip, 4);
    uint8_t udp[8] = {s->port[0], s->port[1], 0, 0, 0, 0, 0, 0};
    memcpy(udp + 2, &dport, 2);
    memcpy(udp + 4, &udp_len, 2);
    roce_icrc_v4(ip, udp, buf, len - 4, buf + len - 4);
}

static void send_to(const struct tx_sock *s, uint32_t ip, uint8_t *buf, size_t len)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(ROCE_PORT), .sin_addr.s_addr = ip};
    put_icrc(s, ip, buf, len);
    if (sendto(s->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) < 0) {
        shm->c.tx_errors++; /* a full socket buffer behaves like a busy NIC: not sent */
        return;
    }
    shm->c.tx_pkts++;
    shm->c.tx_bytes += len + 14 + 20 + 8;
}

static void send_ack(uint32_t ip, uint32_t qpn, uint32_t psn, uint8_t syndrome)
{
    uint8_t buf[12 + 4 + 4] = {0};
    put_bth(buf, OP_ACK, qpn, psn, 0);
    buf[12] = syndrome; /* AETH: syndrome, MSN (unused) */
    send_to(&tx_ack, ip, buf, sizeof(buf));
}

/* A CNP to the requester's QP `qpn` (in the lab a responder QP has its requester's number), BECN set
 * as ConnectX sets it (the ICRC masks byte 4, so it does not change the CRC). */
static void send_cnp(uint32_t ip, uint32_t qpn)
{
    uint8_t buf[12 + 16 + 4] = {0};
    put_bth(buf, OP_CNP, qpn, 0, 0);
    buf[4] |= BTH_BECN;
    send_to(&tx_cnp, ip, buf, sizeof(buf));
    shm->c.cnp_sent++;
}

/* ---- requester ------------------------------------------------------------------------------ */

static size_t data_frame(struct lab_flow *f, uint8_t *buf)
{
    uint32_t psn = (uint32_t)f->psn;
    uint32_t pos = psn % MSG_PKTS;
    uint8_t op = pos == 0 ? OP_WRITE_FIRST : pos == MSG_PKTS - 1 ? OP_WRITE_LAST : OP_WRITE_MIDDLE;
    size_t len = 12;
    put_bth(buf, op, f->qpn, psn, op == OP_WRITE_LAST);
    if (op == OP_WRITE_FIRST) {
        memset(buf + len, 0, RETH_BYTES);
        uint32_t dmalen = htonl(MSG_PKTS * f->payload);
        memcpy(buf + len + 12, &dmalen, 4);
        len += RETH_BYTES;
    }
    memset(buf + len, (uint8_t)psn, f->payload); /* payload; send_to fills in the ICRC after it */
    return len + f->payload + 4;
}

static uint64_t bits_ns(uint64_t bytes, uint64_t rate_bps)
{
    return bytes * 8ull * 1000000000ull / (rate_bps < 1000 ? 1000 : rate_bps);
}

/* RC requester timer: no ACK progress for ack_timeout_us while packets are outstanding -> resend
 * from the first unacknowledged PSN (a lost NAK or a lost last packet would otherwise stall). */
static void check_timeout(struct lab_flow *f, uint64_t now)
{
    uint32_t first_unacked = ((uint32_t)f->acked_psn + 1) & PSN_MASK;
    uint64_t timeout = (uint64_t)ld32(&shm->ctl.ack_timeout_us) * 1000ull;
    if (!timeout || (uint32_t)f->psn == first_unacked) {
        f->last_progress_ns = now;
        return;
    }
    if (now - f->last_progress_ns < timeout)
        return;
    f->timeouts++;
    shm->c.local_ack_timeout_err++;
    f->retransmitted += ((uint32_t)f->psn - first_unacked) & PSN_MASK;
    f->psn = first_unacked;
    f->last_progress_ns = now;
}

/* Due flows get a fresh schedule entry and a bounded catch-up; returns whether any may send. */
static int prepare_flows(uint64_t now, uint64_t *wake)
{
    int any = 0;
    for (int i = 0; i < LAB_MAX_FLOWS; i++) {
        struct lab_flow *f = &shm->flows[i];
        if (!ld32(&f->active) || f->payload == 0 || f->payload > MAX_PAYLOAD)
            continue;
        uint64_t gen = ld64(&f->generation);
        if (gen != f->seen_generation) {
            f->seen_generation = gen;
            f->psn = 0;
            f->acked_psn = PSN_MASK; /* "the PSN before 0": nothing acknowledged yet */
            f->last_progress_ns = now;
            next_tx[i] = now;
        }
        check_timeout(f, now);
        uint64_t gap = bits_ns(HDR_BYTES + f->payload, ld64(&f->rate_bps));
        uint64_t credit = MAX_CREDIT_PKTS * gap > MAX_CREDIT_NS ? MAX_CREDIT_PKTS * gap : MAX_CREDIT_NS;
        if (next_tx[i] + credit < now)
            next_tx[i] = now - credit; /* bounded catch-up: a late wake-up, or a link-limited host */
        if (next_tx[i] < *wake)
            *wake = next_tx[i];
        any = 1;
    }
    return any;
}

/* Send every due packet, earliest departure first, never faster than the host's link (the NIC's
 * line rate is shared by all its QPs). Returns the next time something is due. */
static uint64_t run_flows(uint64_t now, uint64_t wake)
{
    static uint8_t buf[12 + RETH_BYTES + MAX_PAYLOAD + 4];
    if (shm->paused_until_ns > now) { /* PFC: a paused NIC sends nothing and banks no credit */
        for (int i = 0; i < LAB_MAX_FLOWS; i++)
            if (next_tx[i] < now)
                next_tx[i] = now;
        if (link_next < now)
            link_next = now;
        return wake;
    }
    if (!prepare_flows(now, &wake))
        return wake;
    uint64_t link = ld64(&shm->ctl.link_bps);
    /* The line rate is a token bucket of LINK_BUCKET_BYTES from the first byte: the shaper banks no
     * more than that while idle or waiting (flows' own credit above is capped by it too). */
    uint64_t bucket = bits_ns(LINK_BUCKET_BYTES, link);
    if (link_next + bucket < now)
        link_next = now - bucket;
    for (;;) {
        int best = -1;
        for (int i = 0; i < LAB_MAX_FLOWS; i++)
            if (ld32(&shm->flows[i].active) && shm->flows[i].payload &&
                shm->flows[i].payload <= MAX_PAYLOAD && next_tx[i] <= now &&
                (best < 0 || next_tx[i] < next_tx[best]))
                best = i;
        if (best < 0)
            break;
        if (link_next > now) {
            if (link_next < wake)
                wake = link_next;
            break;
        }
        struct lab_flow *f = &shm->flows[best];
        size_t len = data_frame(f, buf);
        uint64_t before = shm->c.tx_pkts;
        send_to(&tx_data, f->dst_ip, buf, len);
        uint64_t gap = bits_ns(HDR_BYTES + f->payload, ld64(&f->rate_bps));
        next_tx[best] += gap;
        if (shm->c.tx_pkts == before)
            continue; /* socket buffer full: this departure is lost (counted in tx_errors) */
        link_next += bits_ns(len + 42, link);
        f->tx_pkts++;
        f->tx_bytes += len + 42;
        f->tx_payload_bytes += f->payload;
        shm->c.tx_data_pkts++;
        shm->c.tx_data_bytes += len + 42;
        f->psn = (f->psn + 1) & PSN_MASK;
    }
    for (int i = 0; i < LAB_MAX_FLOWS; i++)
        if (ld32(&shm->flows[i].active) && next_tx[i] < wake && next_tx[i] > now)
            wake = next_tx[i];
    return wake;
}

static struct lab_flow *flow_of(uint32_t qpn)
{
    for (int i = 0; i < LAB_MAX_FLOWS; i++)
        if (ld32(&shm->flows[i].active) && shm->flows[i].qpn == qpn)
            return &shm->flows[i];
    return NULL;
}

static void on_ack(uint32_t qpn, uint32_t psn, uint8_t syndrome, uint64_t now)
{
    struct lab_flow *f = flow_of(qpn);
    if (!f)
        return;
    f->last_progress_ns = now;
    if ((syndrome & 0x60) == 0x60) { /* NAK; code 0 = PSN sequence error */
        f->nak_rx++;
        shm->c.packet_seq_err++;
        uint32_t behind = ((uint32_t)f->psn - psn) & PSN_MASK;
        if (behind && behind < PSN_MASK / 2) {
            f->retransmitted += behind;
            f->psn = psn; /* go back N */
        }
    } else {
        f->acked_psn = psn;
    }
}

/* ---- responder ------------------------------------------------------------------------------ */

static void on_data(uint32_t src_ip, const uint8_t *p, size_t len, int ce, uint64_t now)
{
    uint32_t qpn = ntohl(*(const uint32_t *)(p + 4)) & PSN_MASK;
    uint32_t psn = ntohl(*(const uint32_t *)(p + 8)) & PSN_MASK;
    struct lab_rqp *q = &shm->rqps[qpn % LAB_MAX_RQPS];
    if (q->qpn != qpn || q->src_ip != src_ip) {
        memset(q, 0, sizeof(*q));
        q->qpn = qpn;
        q->src_ip = src_ip;
        q->nak_armed = 1;
    }
    size_t hdr = 12 + (p[0] == OP_WRITE_FIRST ? RETH_BYTES : 0) + 4;
    shm->c.rx_data_pkts++;
    shm->c.rx_data_bytes += len + 42;
    q->rx_pkts++;
    if (ce) {
        shm->c.ecn_marked_rx++;
        q->ce_pkts++;
        /* Fresh clock reads on both sides of the send: `now` is the loop's, possibly a preemption
         * old, and a CNP stamped before it really left would let the next one leave too soon.
         * sendto runs the egress path synchronously, so the stamp is after the CNP left. */
        uint64_t interval = (uint64_t)ld32(&shm->ctl.np_interval_us) * 1000ull;
        if (!q->last_cnp_ns || now_ns() - q->last_cnp_ns >= interval) {
            q->cnp_sent++;
            send_cnp(src_ip, qpn);
            q->last_cnp_ns = now_ns();
        }
    }
    uint32_t ahead = (psn - (uint32_t)q->expected_psn) & PSN_MASK;
    if (ahead == 0) {
        q->expected_psn = (q->expected_psn + 1) & PSN_MASK;
        q->rx_payload_bytes += len > hdr ? len - hdr : 0;
        q->nak_armed = 1;
        uint32_t every = ld32(&shm->ctl.ack_every);
        if (++q->since_ack >= (every ? every : 1) || now - q->last_ack_ns >= ACK_INTERVAL_NS) {
            q->since_ack = 0;
            q->last_ack_ns = now;
            q->ack_sent++;
            send_ack(src_ip, qpn, psn, 0x1f); /* ACK, credit field "invalid" */
        }
    } else if (ahead < PSN_MASK / 2) {
        shm->c.out_of_sequence++;
        q->oos++;
        if (q->nak_armed) {
            q->nak_armed = 0;
            q->nak_sent++;
            send_ack(src_ip, qpn, (uint32_t)q->expected_psn, 0x60); /* NAK: PSN sequence error */
        }
    } else {
        shm->c.duplicate_request++;
        q->dup++;
    }
}

static void drain_rx(uint64_t now)
{
    static uint8_t bufs[RX_BATCH][MAX_PAYLOAD + 256];
    static char ctrl[RX_BATCH][64];
    struct mmsghdr msgs[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct sockaddr_in from[RX_BATCH];
    for (;;) {
        for (int i = 0; i < RX_BATCH; i++) {
            iov[i] = (struct iovec){bufs[i], sizeof(bufs[i])};
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
                                              .msg_namelen = sizeof(from[i]),
                                              .msg_iov = &iov[i],
                                              .msg_iovlen = 1,
                                              .msg_control = ctrl[i],
                                              .msg_controllen = sizeof(ctrl[i])};
        }
        int n = recvmmsg(rx_fd, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0)
            return;
        for (int i = 0; i < n; i++) {
            size_t len = msgs[i].msg_len;
            const uint8_t *p = bufs[i];
            int tos = 0;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c;
                 c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
                    tos = *(uint8_t *)CMSG_DATA(c);
                else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL)
                    shm->c.out_of_buffer = *(uint32_t *)CMSG_DATA(c); /* kernel's running total */
            }
            if (len < 12)
                continue;
            shm->c.rx_pkts++;
            shm->c.rx_bytes += len + 42;
            uint32_t src = from[i].sin_addr.s_addr;
            uint32_t qpn = ntohl(*(const uint32_t *)(p + 4)) & PSN_MASK;
            uint32_t psn = ntohl(*(const uint32_t *)(p + 8)) & PSN_MASK;
            if (p[0] == OP_CNP) {
                struct lab_flow *f = flow_of(qpn);
                if (f) {
                    f->cnp_rx++;
                    shm->c.cnp_handled++;
                } else {
                    shm->c.cnp_ignored++;
                }
            } else if (p[0] == OP_ACK) {
                if (len >= 16)
                    on_ack(qpn, psn, p[12], now);
            } else {
                on_data(src, p, len, (tos & 3) == 3, now);
            }
        }
        if (n < RX_BATCH)
            return;
    }
}

/* ---- PFC ------------------------------------------------------------------------------------ */

static void account_rx_pause(uint64_t now)
{
    if (rx_pause_mark && now > rx_pause_mark) {
        rx_pause_ns += now - rx_pause_mark;
        rx_pause_mark = now;
        shm->c.rx_pause_duration_us = rx_pause_ns / 1000;
    }
}

static void pause_end(uint64_t at)
{
    account_rx_pause(at);
    rx_pause_mark = 0;
}

static void drain_pfc(uint64_t now)
{
    uint8_t frame[128];
    struct sockaddr_ll from;
    socklen_t flen = sizeof(from);
    for (;;) {
        ssize_t n = recvfrom(pfc_fd, frame, sizeof(frame), MSG_DONTWAIT, (struct sockaddr *)&from, &flen);
        if (n < 0)
            return;
        if (from.sll_pkttype == PACKET_OUTGOING || n < 14 + 20)
            continue;
        const uint8_t *m = frame + 14;
        if (((m[0] << 8) | m[1]) != 0x0101 || !(((m[2] << 8) | m[3]) & (1 << PFC_PRIO)))
            continue;
        uint32_t quanta = (m[4 + 2 * PFC_PRIO] << 8) | m[5 + 2 * PFC_PRIO];
        shm->c.rx_pause++;
        uint64_t link = ld64(&shm->ctl.link_bps);
        if (quanta == 0) {
            pause_end(now);
            shm->paused_until_ns = 0;
            continue;
        }
        if (!rx_pause_mark) {
            rx_pause_mark = now;
            shm->c.rx_pause_transition++;
        }
        shm->paused_until_ns = now + (uint64_t)quanta * 512ull * 1000000000ull / (link ? link : 1);
    }
}

static void send_pfc(uint16_t quanta)
{
    uint8_t f[60] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
    memcpy(f + 6, own_mac, 6);
    /* MAC control, PFC opcode */
    f[12] = 0x88;
    f[13] = 0x08;
    f[14] = 0x01;
    f[15] = 0x01;
    /* class-enable vector */
    f[16] = 0;
    f[17] = 1 << PFC_PRIO;
    f[18 + 2 * PFC_PRIO] = quanta >> 8;
    f[19 + 2 * PFC_PRIO] = quanta & 0xff;
    struct sockaddr_ll to = {.sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6};
    memcpy(to.sll_addr, f, 6);
    if (sendto(pfc_fd, f, sizeof(f), 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)sizeof(f))
        shm->c.tx_pause++;
}

static void account_tx_pause(uint64_t now)
{
    tx_pause_ns += now - storm_mark;
    storm_mark = now;
    shm->c.tx_pause_duration_us = tx_pause_ns / 1000;
}

static uint64_t storm(uint64_t now, uint64_t wake)
{
    if (!ld32(&shm->ctl.stuck)) {
        if (storm_began) {
            account_tx_pause(now);
            storm_began = 0;
            send_pfc(0); /* XON: the receiver drains again */
        }
        return wake;
    }
    if (!storm_began) {
        storm_began = storm_mark = storm_next = now;
        storm_warned = 0;
    }
    account_tx_pause(now);
    uint64_t warn = (uint64_t)ld32(&shm->ctl.storm_warn_ms) * 1000000ull;
    if (!storm_warned && warn && now - storm_began >= warn) {
        storm_warned = 1;
        shm->c.pause_storm_warning++;
    }
    if (now >= storm_next) {
        send_pfc(0xffff);
        storm_next = now + (uint64_t)ld32(&shm->ctl.storm_refresh_us) * 1000ull;
    }
    if (!storm_warned && warn && storm_began + warn < storm_next)
        storm_next = storm_began + warn; /* wake up in time to count the warning */
    return storm_next < wake ? storm_next : wake;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static int udp_socket(int tos)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) < 0)
        die("udp socket");
    int sndbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf));
    return fd;
}

/* A sending socket whose IPv4 and UDP headers are known in advance (the ICRC covers them): bound to
 * our address and a fixed port, DF set (RoCEv2 never fragments, and Linux then writes IP ID 0 for an
 * unconnected socket), UDP checksum 0 (as RoCE NICs send it; the ICRC protects the packet). */
static struct tx_sock tx_socket(int tos)
{
    struct tx_sock s = {.fd = udp_socket(tos)};
    int pmtu = IP_PMTUDISC_DO, one = 1;
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = own_ip};
    socklen_t len = sizeof(me);
    if (setsockopt(s.fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) < 0 ||
        setsockopt(s.fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one)) < 0 ||
        bind(s.fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
        getsockname(s.fd, (struct sockaddr *)&me, &len) < 0)
        die("udp sending socket");
    memcpy(s.port, &me.sin_port, 2);
    return s;
}

static void open_sockets(const char *ifname, const char *addr)
{
    if (inet_pton(AF_INET, addr, &own_ip) != 1) {
        fprintf(stderr, "netd-lab-host: bad IPv4 address %s\n", addr);
        exit(2);
    }
    rx_fd = udp_socket(TOS_DATA);
    int one = 1, rcvbuf = 8 << 20;
    setsockopt(rx_fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
    setsockopt(rx_fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
    setsockopt(rx_fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_port = htons(ROCE_PORT), .sin_addr.s_addr = own_ip};
    if (bind(rx_fd, (struct sockaddr *)&me, sizeof(me)) < 0)
        die("bind udp/4791");
    tx_data = tx_socket(TOS_DATA);
    tx_ack = tx_socket(TOS_ACK);
    tx_cnp = tx_socket(TOS_CNP);
    ifindex = (int)if_nametoindex(ifname);
    if (!ifindex)
        die(ifname);
    pfc_fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_MACCTRL));
    if (pfc_fd < 0)
        die("AF_PACKET socket");
    struct sockaddr_ll ll = {
        .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_MACCTRL), .sll_ifindex = ifindex};
    if (bind(pfc_fd, (struct sockaddr *)&ll, sizeof(ll)) < 0)
        die("bind AF_PACKET");
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
    if (ioctl(pfc_fd, SIOCGIFHWADDR, &ifr) < 0)
        die("SIOCGIFHWADDR");
    memcpy(own_mac, ifr.ifr_hwaddr.sa_data, 6);
}

static void map_shm(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ftruncate(fd, sizeof(struct lab_shm)) < 0)
        die(path);
    shm = mmap(NULL, sizeof(struct lab_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shm == MAP_FAILED)
        die("mmap");
    close(fd);
    struct lab_control ctl = shm->ctl; /* Python may have configured it before we started */
    memset(shm, 0, sizeof(*shm));
    shm->ctl = ctl;
    shm->magic = LAB_SHM_MAGIC;
    shm->version = LAB_SHM_VERSION;
    shm->agent_pid = (uint32_t)getpid();
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: netd-lab-host SHM_FILE IFNAME IPV4 (run inside the host's netns)\n");
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    prctl(PR_SET_TIMERSLACK, 1000UL); /* 1 us: pacing wake-ups */
    struct sched_param sp = {.sched_priority = RT_PRIORITY};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0 && setpriority(PRIO_PROCESS, 0, NICE) < 0)
        fprintf(stderr, "netd-lab-host: no real-time or nice priority (%s); pacing shares the CPU\n",
                strerror(errno));
    icrc_init();
    map_shm(argv[1]);
    open_sockets(argv[2], argv[3]);
    __atomic_store_n(&shm->ready, 1, __ATOMIC_RELEASE);
    struct pollfd fds[2] = {{.fd = rx_fd, .events = POLLIN}, {.fd = pfc_fd, .events = POLLIN}};
    unsigned busy = 0;
    uint64_t due = 0; /* the departure the last sleep was for (0: none) */
    while (!stop) {
        uint64_t now = now_ns();
        if (due && now > due + LATE_NS)
            shm->c.pacer_late_ns += now - due; /* the CPU was not ours when a packet was due */
        shm->heartbeat_ns = now;
        drain_pfc(now);
        account_rx_pause(now < shm->paused_until_ns ? now : shm->paused_until_ns);
        if (shm->paused_until_ns && shm->paused_until_ns <= now) {
            pause_end(shm->paused_until_ns);
            shm->paused_until_ns = 0;
        }
        int stuck = ld32(&shm->ctl.stuck);
        if (!stuck)
            drain_rx(now);
        uint64_t wake = now + 2000000ull; /* idle: look at the shared memory every 2 ms */
        wake = storm(now, wake);
        wake = run_flows(now, wake);
        if (shm->paused_until_ns && shm->paused_until_ns < wake)
            wake = shm->paused_until_ns;
        now = now_ns();
        if (wake <= now && ++busy < MAX_BUSY_LOOPS)
            continue;
        busy = 0;
        uint64_t dt = wake > now ? wake - now : 50000ull; /* (the forced nap) */
        due = wake < now + 2000000ull ? now + dt : 0;     /* not the idle 2 ms look at the memory */
        struct timespec ts = {.tv_sec = (time_t)(dt / 1000000000ull), .tv_nsec = (long)(dt % 1000000000ull)};
        fds[0].events = stuck ? 0 : POLLIN;
        if (ppoll(fds, 2, &ts, NULL) < 0 && errno != EINTR)
            die("ppoll");
    }
    pause_end(now_ns());
    return 0;
}

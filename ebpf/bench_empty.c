// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * bench_empty.c: the do-nothing tc program `netd bench bpf` measures beside each probe, so the figure
 * it reports is the probe's own cost over BPF_PROG_TEST_RUN's per-packet overhead.
 */
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>

int netd_bench_empty(struct __sk_buff *skb)
{
    return TC_ACT_UNSPEC;
}

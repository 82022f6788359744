// SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0)
/*
 * rdma_events.c: RDMA connection-manager and QP lifecycle events from the rdma_cma tracepoints
 * (drivers/infiniband/core/cma_trace.h, kernels >= 5.10 with the rdma_cm module loaded).
 *
 * Each probe is compiled only where its tracepoint exists (user space checks tracefs and passes
 * -DNETD_RDMA_CM_EVENT_HANDLER=1, -DNETD_RDMA_CM_QP_CREATE=1, -DNETD_RDMA_CM_QP_DESTROY=1); the event
 * layouts come from the running kernel's tracepoint formats, not from headers.
 *   netd_rdma_cm      CM events delivered to consumers, by enum rdma_cm_event_type
 *   netd_rdma_events  CM events with a non-zero status, QPs created, failed creations, QPs destroyed
 * No addresses or QP numbers are kept: the counts are per host, like the NIC's own counters.
 */
#include <uapi/linux/bpf.h>

#include "netd_bpf.h"

BPF_PERCPU_ARRAY(netd_rdma_cm, u64, NETD_RDMA_CM_EVENTS);
BPF_PERCPU_ARRAY(netd_rdma_events, u64, NETD_RDMA_EV_COUNT);

static __always_inline void rdma_event(u32 event)
{
    netd_count(netd_rdma_events.lookup(&event), 1);
}

#if NETD_RDMA_CM_EVENT_HANDLER
TRACEPOINT_PROBE(rdma_cma, cm_event_handler)
{
    u32 event = args->event;
    if (event >= NETD_RDMA_CM_EVENTS)
        event = NETD_RDMA_CM_EVENTS - 1; /* an event type newer than this program: the last slot */
    netd_count(netd_rdma_cm.lookup(&event), 1);
    if (args->status)
        rdma_event(NETD_RDMA_CM_ERRORS);
    return 0;
}
#endif

#if NETD_RDMA_CM_QP_CREATE
TRACEPOINT_PROBE(rdma_cma, cm_qp_create)
{
    rdma_event(args->rc ? NETD_RDMA_QP_CREATE_FAIL : NETD_RDMA_QP_CREATE);
    return 0;
}
#endif

#if NETD_RDMA_CM_QP_DESTROY
TRACEPOINT_PROBE(rdma_cma, cm_qp_destroy)
{
    rdma_event(NETD_RDMA_QP_DESTROY);
    return 0;
}
#endif

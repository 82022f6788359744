// SPDX-License-Identifier: Apache-2.0
/*
 * hints.h — the plugin's internal view of a hint table: validation, selection of one
 * communicator's slice, and the cost-table transformation done on NCCL's launch path.
 */
#ifndef NETD_HINTS_INTERNAL_H_
#define NETD_HINTS_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "netd_hints.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "netd hint tables are little-endian; this plugin supports little-endian hosts only"
#endif

_Static_assert(sizeof(struct netd_hint_entry) == 8, "hint entry layout");
_Static_assert(sizeof(struct netd_hints_header) == 64, "hint header layout");
_Static_assert(sizeof(struct netd_pin_request) == 72, "pin request layout");
_Static_assert(sizeof(struct netd_pin_ack) == 8 && sizeof(struct netd_pin_prefix) == 8, "pin ack layout");
_Static_assert(sizeof(struct netd_pin_response) == 128, "pin response layout");

/* NCCL's "unavailable" cost (NCCL_ALGO_PROTO_IGNORE). */
#define NETD_HINTS_IGNORE_COST (-1.0)

/* One communicator's hints: the node-count slice of a table, latched at init. */
struct netd_slice {
    struct netd_hint_entry e[NETD_HINTS_NUM_COLLS][NETD_HINTS_NUM_SIZE_BUCKETS];
};

static inline unsigned netd_size_bucket(size_t n_bytes)
{
    /* floor(log2(n)) - 9, clamped to [0, 31]; n | 1 keeps clz defined for 0 */
    int l = 63 - __builtin_clzll((unsigned long long)n_bytes | 1ULL);
    int b = l - (NETD_HINTS_SIZE_LOG2_MIN - 1);
    b = b < 0 ? 0 : b;
    return (unsigned)(b > NETD_HINTS_NUM_SIZE_BUCKETS - 1 ? NETD_HINTS_NUM_SIZE_BUCKETS - 1 : b);
}

static inline unsigned netd_node_bucket(size_t n_nodes)
{
    if (n_nodes <= 1)
        return 0;
    unsigned b = 64U - (unsigned)__builtin_clzll((unsigned long long)(n_nodes - 1));
    return b > NETD_HINTS_NUM_NODE_BUCKETS - 1 ? NETD_HINTS_NUM_NODE_BUCKETS - 1 : b;
}

/* zlib-compatible CRC-32 (reflected 0xEDB88320), continued from `crc`. */
uint32_t netd_crc32(uint32_t crc, const void *data, size_t len);

/* Checks structure, dimensions, CRC and every entry. 0 when valid; otherwise -1 and a reason. */
int netd_table_validate(const void *buf, size_t len, char *why, size_t why_len);

/* Staleness rule, identical on every rank because both times come from the pinned bytes. */
int netd_table_fresh(const struct netd_hints_header *h, int64_t pinned_at_ns);

/* Copies the slice for n_nodes out of a validated table; returns the number of non-default entries. */
int netd_table_select(const void *buf, size_t n_nodes, struct netd_slice *out);

/* The launch-path transformation: bias NCCL's contiguous float[numAlgo][numProto] table.
 * The reference implementation, for any numAlgo x numProto. */
void netd_apply(const struct netd_hint_entry *e, float *table, int num_algo, int num_proto, int *n_channels);

/* An entry compiled at init for the shape every NCCL since 2.22 uses (numProto 3, numAlgo 6
 * or 7): the same semantics as netd_apply, as bit masks over the 21 pairs (bit a * 3 + p). */
struct netd_fast_entry {
    uint32_t cond;   /* pairs of which one must be available for the entry to apply; 0: no hint */
    uint32_t forbid; /* pairs set to -1.0 when it applies (only those that are >= 0) */
    int8_t pin_algo; /* -1: no pin; else pin (pin_algo, pin_proto) or its cheapest protocol */
    int8_t pin_proto;
    uint8_t n_channels;
    uint8_t unconditional; /* algo == -1: applies only if it forbids a present pair */
};

void netd_compile(const struct netd_hint_entry *e, struct netd_fast_entry *out);

/* netd_apply for num_proto == 3 and 1 <= num_algo <= 7 (checked by the caller).
 *
 * Reads only the pairs the entry names, one scalar load each: NCCL writes the table with scalar
 * stores just before the call, and wide loads spanning several of them would stall on store
 * forwarding. Loop trip counts depend only on the entry (3 pairs per algorithm, typically). */
static inline void netd_apply_fast(const struct netd_fast_entry *entry, float *t, int num_algo,
                                   int *n_channels)
{
    const struct netd_fast_entry e = *entry, *c = &e; /* a local copy: stores to t cannot alias it */
    const uint32_t present = (1U << (3 * num_algo)) - 1U;
    uint32_t kill = c->forbid & present;
    int usable = 0;
    for (uint32_t m = c->cond & present; m != 0; m &= m - 1U)
        usable |= t[__builtin_ctz(m)] >= 0.0f;
    if (!usable || (c->unconditional && kill == 0))
        return;
    for (; kill != 0; kill &= kill - 1U) {
        float *cell = t + __builtin_ctz(kill);
        if (*cell >= 0.0f)
            *cell = (float)NETD_HINTS_IGNORE_COST; /* never touches a negative entry */
    }
    if (c->pin_algo >= 0) {
        float *row = t + 3 * c->pin_algo;
        int best = c->pin_proto;
        if (best < 0) { /* the cheapest protocol of the algorithm that is still available */
            for (int p = 0; p < 3; p++)
                if (row[p] >= 0.0f && (best < 0 || row[p] < row[best]))
                    best = p;
        }
        row[best] = 0.0f; /* available: cond guaranteed a pair of this algorithm survived */
    }
    if (c->n_channels != 0 && n_channels != NULL)
        *n_channels = c->n_channels;
}

#endif /* NETD_HINTS_INTERNAL_H_ */

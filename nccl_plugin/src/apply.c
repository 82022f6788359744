// SPDX-License-Identifier: Apache-2.0
/*
 * apply.c — the only code on NCCL's launch path: bias one cost table with one hint entry.
 *
 * NCCL's rules (docs/nccl.md, "What the plugin changes"): the table is one contiguous
 * float[numAlgo][numProto] (NCCL passes its address as float**); lowest cost >= 0 wins, ties
 * to the lowest index; a negative entry is unavailable; an entry of -1.0 is never raised; the
 * table never ends with no entry >= 0; *nChannels stays 0 unless a hint sets it. No I/O, no
 * locks, no allocation: a few loads, compares and stores on a table of at most 21 floats.
 */
#include "hints.h"

/* Bits (a * 3 + p) of the pairs that exist in this NCCL's table. */
static inline uint32_t present_mask(int na, int np)
{
    if (np >= NETD_HINTS_NUM_PROTOS)
        return na >= NETD_HINTS_NUM_ALGOS ? (1U << NETD_HINTS_FORBID_BITS) - 1U : (1U << (3 * na)) - 1U;
    uint32_t row = (1U << np) - 1U, m = 0;
    for (int a = 0; a < na; a++)
        m |= row << (3 * a);
    return m;
}

static inline int forbidden(uint32_t forbid, int a, int p)
{
    return (int)((forbid >> (3 * a + p)) & 1U);
}

/* Is any entry still >= 0 once `forbid` is applied? (Scans the whole runtime table, stops early.) */
static int any_left(const float *t, int num_algo, int num_proto, int na, int np, uint32_t forbid)
{
    for (int a = 0; a < num_algo; a++) {
        const float *row = t + a * num_proto;
        for (int p = 0; p < num_proto; p++) {
            if (row[p] >= 0.0f && !(a < na && p < np && forbidden(forbid, a, p)))
                return 1;
        }
    }
    return 0;
}

void netd_apply(const struct netd_hint_entry *e, float *t, int num_algo, int num_proto, int *n_channels)
{
    if (num_algo <= 0 || num_proto <= 0)
        return;
    const int na = num_algo < NETD_HINTS_NUM_ALGOS ? num_algo : NETD_HINTS_NUM_ALGOS;
    const int np = num_proto < NETD_HINTS_NUM_PROTOS ? num_proto : NETD_HINTS_NUM_PROTOS;
    const uint32_t forbid = e->forbid & present_mask(na, np);
    int best = -1; /* the preferred algorithm's chosen protocol */
    float *row = NULL;

    if (e->algo >= 0) {
        if (e->algo >= na)
            return; /* e.g. PAT on a 2.22 (6-algorithm) NCCL: keep NCCL's choice */
        row = t + e->algo * num_proto;
        if (e->proto >= 0) {
            if (e->proto < np && row[e->proto] >= 0.0f && !forbidden(forbid, e->algo, e->proto))
                best = e->proto;
        } else {
            for (int p = 0; p < np; p++) {
                if (row[p] >= 0.0f && !forbidden(forbid, e->algo, p) && (best < 0 || row[p] < row[best]))
                    best = p;
            }
        }
        if (best < 0)
            return; /* the preferred algorithm is unavailable here: change nothing */
    }

    int applied = best >= 0;
    /* With an available preferred pair something always survives; otherwise check first. */
    if (forbid != 0 && (best >= 0 || any_left(t, num_algo, num_proto, na, np, forbid))) {
        uint32_t f = forbid;
        while (f != 0) {
            int bit = __builtin_ctz(f);
            f &= f - 1U;
            float *cell = t + (bit / 3) * num_proto + bit % 3;
            if (*cell >= 0.0f)
                *cell = (float)NETD_HINTS_IGNORE_COST; /* never touches a negative entry */
        }
        applied = 1;
    }
    if (best >= 0 && (e->flags & NETD_HINT_F_PIN))
        row[best] = 0.0f;
    if (applied && e->n_channels != 0 && n_channels != NULL)
        *n_channels = e->n_channels;
}

void netd_compile(const struct netd_hint_entry *e, struct netd_fast_entry *out)
{
    *out = (struct netd_fast_entry){.pin_algo = -1, .pin_proto = -1, .n_channels = e->n_channels};
    out->forbid = e->forbid & ((1U << NETD_HINTS_FORBID_BITS) - 1U);
    if (e->algo >= 0) {
        uint32_t mine = (e->proto >= 0 ? 1U << e->proto : 7U) << (3 * e->algo);
        out->cond = mine & ~out->forbid; /* a pair of the algorithm that this entry leaves usable */
        if (e->flags & NETD_HINT_F_PIN) {
            out->pin_algo = e->algo;
            out->pin_proto = e->proto;
        }
    } else if (out->forbid != 0) {
        out->cond = ((1U << NETD_HINTS_FORBID_BITS) - 1U) & ~out->forbid; /* something must survive */
        out->unconditional = 1;
    }
}

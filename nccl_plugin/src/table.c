// SPDX-License-Identifier: Apache-2.0
/*
 * table.c — validating a hint table and latching one communicator's slice of it (init only).
 *
 * Validation is a pure function of the bytes, so every rank that holds the same pinned bytes
 * reaches the same verdict: a corrupt, truncated or stale table is rejected identically
 * everywhere and NCCL's own tuning is kept on every rank.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hints.h"

uint32_t netd_crc32(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    crc = ~crc;
    while (len--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320U & (0U - (crc & 1U)));
    }
    return ~crc;
}

static int fail(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t why_len, const char *fmt, ...)
{
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int entry_valid(const struct netd_hint_entry *e)
{
    if (e->algo < -1 || e->algo >= NETD_HINTS_NUM_ALGOS)
        return 0;
    if (e->proto < -1 || e->proto >= NETD_HINTS_NUM_PROTOS)
        return 0;
    if (e->n_channels > NETD_HINTS_MAX_CHANNELS)
        return 0;
    if (e->flags & ~NETD_HINT_F_ALL)
        return 0;
    if (e->forbid >> NETD_HINTS_FORBID_BITS)
        return 0;
    if ((e->flags & NETD_HINT_F_PIN) && e->algo < 0)
        return 0; /* nothing to pin */
    if (e->proto >= 0 && e->algo < 0)
        return 0; /* a protocol needs its algorithm */
    if (e->n_channels && e->algo < 0 && e->forbid == 0)
        return 0; /* channels without a hint */
    return 1;
}

int netd_table_validate(const void *buf, size_t len, char *why, size_t why_len)
{
    struct netd_hints_header h;
    if (buf == NULL || len < sizeof h)
        return fail(why, why_len, "truncated: %zu bytes, a header alone is %zu", len, sizeof h);
    memcpy(&h, buf, sizeof h);
    if (h.magic != NETD_HINTS_MAGIC)
        return fail(why, why_len, "bad magic 0x%08x (expected 0x%08x)", (unsigned)h.magic, NETD_HINTS_MAGIC);
    if (h.layout_version != NETD_HINTS_LAYOUT_VERSION)
        return fail(why, why_len, "layout version %u, this plugin reads %d", (unsigned)h.layout_version,
                    NETD_HINTS_LAYOUT_VERSION);
    if (h.header_size != sizeof h || h.entry_size != sizeof(struct netd_hint_entry))
        return fail(why, why_len, "header/entry size %u/%u do not match this plugin's %zu/%zu",
                    (unsigned)h.header_size, (unsigned)h.entry_size, sizeof h,
                    sizeof(struct netd_hint_entry));
    if (h.n_colls != NETD_HINTS_NUM_COLLS || h.n_size_buckets != NETD_HINTS_NUM_SIZE_BUCKETS ||
        h.n_node_buckets != NETD_HINTS_NUM_NODE_BUCKETS || h.size_log2_min != NETD_HINTS_SIZE_LOG2_MIN)
        return fail(why, why_len, "dimensions %ux%ux%u (log2 min %u) differ from this plugin's",
                    (unsigned)h.n_node_buckets, (unsigned)h.n_colls, (unsigned)h.n_size_buckets,
                    (unsigned)h.size_log2_min);
    if (h.flags != 0 || h.reserved0 != 0 || h.reserved1 != 0)
        return fail(why, why_len, "reserved fields are set (flags 0x%x)", (unsigned)h.flags);
    if (h.total_size != NETD_HINTS_TABLE_BYTES || len != NETD_HINTS_TABLE_BYTES)
        return fail(why, why_len, "%zu bytes (header says %u), expected %d", len, (unsigned)h.total_size,
                    NETD_HINTS_TABLE_BYTES);
    const uint8_t *bytes = buf;
    uint32_t crc = netd_crc32(0, bytes, offsetof(struct netd_hints_header, crc32));
    crc = netd_crc32(crc, bytes + sizeof h, len - sizeof h);
    if (crc != h.crc32)
        return fail(why, why_len, "CRC-32 0x%08x does not match the header's 0x%08x", (unsigned)crc,
                    (unsigned)h.crc32);
    const uint8_t *entries = bytes + sizeof h;
    for (int i = 0; i < NETD_HINTS_ENTRIES; i++) {
        struct netd_hint_entry x;
        memcpy(&x, entries + (size_t)i * sizeof x, sizeof x);
        if (!entry_valid(&x))
            return fail(why, why_len,
                        "entry %d is invalid (algo %d proto %d channels %u flags 0x%x forbid 0x%x)", i,
                        x.algo, x.proto, (unsigned)x.n_channels, (unsigned)x.flags, (unsigned)x.forbid);
    }
    return 0;
}

int netd_table_fresh(const struct netd_hints_header *h, int64_t pinned_at_ns)
{
    if (h->valid_for_ms == 0)
        return 1;
    int64_t age = pinned_at_ns - h->generated_at_ns;
    int64_t limit = (int64_t)h->valid_for_ms * 1000000;
    /* a table "from the future" by more than its validity is as suspect as an old one */
    return age <= limit && age >= -limit;
}

int netd_table_select(const void *buf, size_t n_nodes, struct netd_slice *out)
{
    const uint8_t *entries = (const uint8_t *)buf + sizeof(struct netd_hints_header);
    size_t slice = sizeof out->e;
    memcpy(out->e, entries + netd_node_bucket(n_nodes) * slice, slice);
    int active = 0;
    for (int c = 0; c < NETD_HINTS_NUM_COLLS; c++)
        for (int b = 0; b < NETD_HINTS_NUM_SIZE_BUCKETS; b++)
            active += out->e[c][b].algo >= 0 || out->e[c][b].forbid != 0;
    return active;
}

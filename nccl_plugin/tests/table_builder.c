// SPDX-License-Identifier: Apache-2.0
#include "table_builder.h"

#include <stdio.h>
#include <string.h>

#include "../src/hints.h"
#include "../src/sha256.h"

void tb_init(uint8_t *buf, int64_t generated_at_ns, uint32_t valid_for_ms)
{
    memset(buf, 0, NETD_HINTS_TABLE_BYTES);
    struct netd_hints_header h = {
        .magic = NETD_HINTS_MAGIC,
        .layout_version = NETD_HINTS_LAYOUT_VERSION,
        .header_size = sizeof h,
        .total_size = NETD_HINTS_TABLE_BYTES,
        .n_colls = NETD_HINTS_NUM_COLLS,
        .n_size_buckets = NETD_HINTS_NUM_SIZE_BUCKETS,
        .n_node_buckets = NETD_HINTS_NUM_NODE_BUCKETS,
        .entry_size = sizeof(struct netd_hint_entry),
        .size_log2_min = NETD_HINTS_SIZE_LOG2_MIN,
        .generated_at_ns = generated_at_ns,
        .valid_for_ms = valid_for_ms,
        .producer = 0x6e65746474657374ULL,
    };
    memcpy(buf, &h, sizeof h);
    struct netd_hint_entry none = {.algo = -1, .proto = -1};
    for (int i = 0; i < NETD_HINTS_ENTRIES; i++)
        memcpy(buf + sizeof h + 8 * (size_t)i, &none, sizeof none);
}

struct netd_hint_entry *tb_entry(uint8_t *buf, unsigned node_bucket, unsigned coll, unsigned size_bucket)
{
    size_t index =
        ((size_t)node_bucket * NETD_HINTS_NUM_COLLS + coll) * NETD_HINTS_NUM_SIZE_BUCKETS + size_bucket;
    return (struct netd_hint_entry *)(void *)(buf + sizeof(struct netd_hints_header) + 8 * index);
}

void tb_seal(uint8_t *buf)
{
    struct netd_hints_header h;
    memcpy(&h, buf, sizeof h);
    uint8_t digest[32];
    netd_sha256(buf + sizeof h, NETD_HINTS_TABLE_BYTES - sizeof h, digest);
    memcpy(&h.table_version, digest, sizeof h.table_version);
    memcpy(buf, &h, sizeof h);
    uint32_t crc = netd_crc32(0, buf, offsetof(struct netd_hints_header, crc32));
    h.crc32 = netd_crc32(crc, buf + sizeof h, NETD_HINTS_TABLE_BYTES - sizeof h);
    memcpy(buf, &h, sizeof h);
}

struct netd_hint_entry tb_soft(int algo, const int *losers, int n_losers)
{
    struct netd_hint_entry e = {.algo = (int8_t)algo, .proto = -1};
    for (int i = 0; i < n_losers; i++)
        e.forbid |= 7U << (3 * losers[i]);
    return e;
}

void tb_sha256_hex(const void *buf, size_t len, char out[65])
{
    uint8_t digest[32];
    netd_sha256(buf, len, digest);
    netd_sha256_hex(digest, out);
}

int tb_write(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t n = fwrite(buf, 1, len, f);
    return fclose(f) == 0 && n == len ? 0 : -1;
}

// SPDX-License-Identifier: Apache-2.0
/* table_builder.h — build hint tables in tests and the benchmark (the daemon builds them in Python). */
#ifndef NETD_TEST_TABLE_BUILDER_H_
#define NETD_TEST_TABLE_BUILDER_H_

#include <stddef.h>
#include <stdint.h>

#include "netd_hints.h"

/* A table with every entry at the default (no hint). buf must hold NETD_HINTS_TABLE_BYTES. */
void tb_init(uint8_t *buf, int64_t generated_at_ns, uint32_t valid_for_ms);
/* The entry for (node bucket, collective, size bucket); modify, then tb_seal(). */
struct netd_hint_entry *tb_entry(uint8_t *buf, unsigned node_bucket, unsigned coll, unsigned size_bucket);
/* Computes table_version and the CRC-32. */
void tb_seal(uint8_t *buf);
/* Soft hint: prefer algorithm `algo` by forbidding every protocol of each algorithm in `losers`. */
struct netd_hint_entry tb_soft(int algo, const int *losers, int n_losers);
/* SHA-256 of a buffer as 64 hex digits. */
void tb_sha256_hex(const void *buf, size_t len, char out[65]);
/* Writes a table file; returns 0 on success. */
int tb_write(const char *path, const void *buf, size_t len);

#endif

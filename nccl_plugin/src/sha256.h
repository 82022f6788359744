// SPDX-License-Identifier: Apache-2.0
#ifndef NETD_SHA256_H_
#define NETD_SHA256_H_

#include <stddef.h>
#include <stdint.h>

void netd_sha256(const void *data, size_t len, uint8_t out[32]);
/* Lower-case hex of a digest, NUL-terminated. */
void netd_sha256_hex(const uint8_t digest[32], char out[65]);

#endif

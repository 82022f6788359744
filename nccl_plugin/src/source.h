// SPDX-License-Identifier: Apache-2.0
/*
 * source.h — where a communicator's hint table comes from: nowhere (NETD_TUNER=off), an
 * operator-pinned static file (NETD_TUNER_TABLE + NETD_TUNER_TABLE_SHA256), or the local netd.
 */
#ifndef NETD_SOURCE_H_
#define NETD_SOURCE_H_

#include <stddef.h>
#include <stdint.h>

#include "hints.h"

#define NETD_DEFAULT_SOCKET "/run/netd/nccl.sock"
#define NETD_DEFAULT_TIMEOUT_MS 1000U
/* Below ~200 ms a loaded host cannot even schedule the daemon reliably; above a minute an init
 * waits longer than any job tolerates. Values outside are clamped (and said so), not refused. */
#define NETD_MIN_TIMEOUT_MS 200U
#define NETD_MAX_TIMEOUT_MS 60000U
#define NETD_PATH_MAX 4096

struct netd_settings {
    int enabled;               /* NETD_TUNER (default on) */
    char socket[108];          /* NETD_TUNER_SOCKET */
    unsigned timeout_ms;       /* NETD_TUNER_TIMEOUT_MS, clamped */
    char table[NETD_PATH_MAX]; /* NETD_TUNER_TABLE, empty when unset */
    char table_sha256[65];     /* NETD_TUNER_TABLE_SHA256, lower-case hex */
    char note[160];            /* an adjusted value worth one log line (a clamped timeout) */
    char error[256];           /* set when a variable is invalid */
};

/* Reads the NETD_TUNER* environment. NETD_TUNER=off stops before any other variable is read.
 * 0, or -1 with settings->error naming the variable (the caller leaves NCCL alone). */
int netd_settings_load(struct netd_settings *s);

enum netd_verdict {
    NETD_UNTOUCHED = 0, /* leave NCCL's choices alone; every rank of the communicator does too */
    NETD_APPLY = 1,     /* `slice` holds this communicator's hints */
    NETD_FAIL = 2,      /* init must fail: the static table every rank was given is unusable */
};

struct netd_obtained {
    enum netd_verdict verdict;
    int active_entries; /* APPLY: non-default entries in the slice */
    uint64_t table_version;
    int level; /* NCCL log level for `message` */
    char message[512];
};

/* Static table mode without a communicator id (tuner API v2/v3/v4): the file alone decides. */
void netd_obtain_static(const struct netd_settings *s, size_t n_nodes, struct netd_slice *slice,
                        struct netd_obtained *out);

/* With a communicator id: the pin protocol for (comm_id, n_ranks, n_nodes). A static table is
 * registered by its digest, so ranks mixing static and daemon tables end NEUTRAL together. */
void netd_obtain_pinned(const struct netd_settings *s, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                        struct netd_slice *slice, struct netd_obtained *out);

/* First 8 bytes (little-endian) of a SHA-256 hex digest: the static_digest of the pin request. */
uint64_t netd_digest64(const char *sha256_hex);

#endif

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
#define NETD_DEFAULT_TIMEOUT_MS 10000U
#define NETD_PATH_MAX 4096

struct netd_settings {
    int enabled;               /* NETD_TUNER (default on) */
    char socket[108];          /* NETD_TUNER_SOCKET */
    unsigned timeout_ms;       /* NETD_TUNER_TIMEOUT_MS */
    char table[NETD_PATH_MAX]; /* NETD_TUNER_TABLE, empty when unset */
    char table_sha256[65];     /* NETD_TUNER_TABLE_SHA256, lower-case hex */
    char error[256];           /* set when a variable is invalid */
};

/* Reads the NETD_TUNER* environment. 0, or -1 with settings->error naming the variable. */
int netd_settings_load(struct netd_settings *s);

enum netd_verdict {
    NETD_UNTOUCHED = 0, /* leave NCCL's choices alone; every rank of the communicator does too */
    NETD_APPLY = 1,     /* `slice` holds this communicator's hints */
    NETD_FAIL = 2,      /* init must fail: this rank cannot know what its peers use */
};

struct netd_obtained {
    enum netd_verdict verdict;
    int active_entries; /* APPLY: non-default entries in the slice */
    uint64_t table_version;
    int level; /* NCCL log level for `message` */
    char message[512];
};

/* Static table mode (no communicator id needed: also serves tuner API v3/v4). */
void netd_obtain_static(const struct netd_settings *s, size_t n_nodes, struct netd_slice *slice,
                        struct netd_obtained *out);

/* Daemon mode: the pin protocol for (comm_id, n_ranks, n_nodes). */
void netd_obtain_pinned(const struct netd_settings *s, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                        struct netd_slice *slice, struct netd_obtained *out);

#endif

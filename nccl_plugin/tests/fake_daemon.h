// SPDX-License-Identifier: Apache-2.0
/* fake_daemon.h — a scripted stand-in for netd's pin socket, for the C tests. */
#ifndef NETD_TEST_FAKE_DAEMON_H_
#define NETD_TEST_FAKE_DAEMON_H_

#include <pthread.h>
#include <stdint.h>

#include "netd_hints.h"

enum fake_mode {
    FAKE_APPLY,      /* APPLY with the configured table bytes */
    FAKE_NEUTRAL,    /* NEUTRAL with a reason */
    FAKE_FAIL,       /* FAIL with a reason */
    FAKE_GARBAGE,    /* 128 bytes that are not a response */
    FAKE_CLOSE,      /* read the request, close without answering */
    FAKE_SILENT,     /* read the request, never answer (the client times out) */
    FAKE_CUT_TABLE,  /* APPLY header announcing the table, then only half of it */
    FAKE_WRONG_COMM, /* a well-formed APPLY for another communicator */
    FAKE_OVERSIZE,   /* APPLY announcing a 2 MiB table (more than the plugin reads) */
    FAKE_NO_ACK,     /* read the request, never ACK, never answer (a daemon stuck before registering) */
    FAKE_OLD,        /* a protocol-1 daemon: a 128-byte version-1 NEUTRAL answer, no ACK */
    FAKE_NEWER,      /* a protocol-3 daemon: ACK and answer of version 3 */
    FAKE_REFUSE,     /* a NEUTRAL answer without ACK (refused before registering) */
    FAKE_STATIC_OK,  /* APPLY of a static pin: table_digest echoes the request's static_digest */
    FAKE_WEDGED,     /* listening, never accepting */
};

struct fake_daemon {
    char dir[64];
    char path[108];
    int listen_fd;
    pthread_t thread;
    enum fake_mode mode;
    const uint8_t *table;
    uint32_t table_size;
    int64_t pinned_at_ns;
    volatile int stop;
    int requests;
    struct netd_pin_request last;
};

/* Listens on a fresh socket in a private temporary directory. 0 on success. */
int fake_daemon_start(struct fake_daemon *d, enum fake_mode mode, const uint8_t *table, uint32_t table_size,
                      int64_t pinned_at_ns);
void fake_daemon_stop(struct fake_daemon *d);

#endif

// SPDX-License-Identifier: Apache-2.0
#ifndef NETD_PIN_CLIENT_H_
#define NETD_PIN_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "netd_hints.h"

enum netd_pin_outcome {
    /* Provably not registered: no socket, refused, backlog full, another protocol version, or no
     * ACK by register_by_ns (netd checks the shared clock after writing the ACK). */
    NETD_PIN_UNREGISTERED = 0,
    /* The daemon answered; see reply.response.status. */
    NETD_PIN_ANSWERED = 1,
    /* ACKed (so possibly registered) but no valid verdict before deadline_ns. */
    NETD_PIN_LOST = 2,
};

struct netd_pin_reply {
    struct netd_pin_response response; /* reason is NUL-terminated by the client */
    uint8_t *table;                    /* malloc'd, response.table_size bytes; NULL when none */
    int no_daemon;                     /* UNREGISTERED because nothing serves the socket path */
    char error[160];                   /* why, for UNREGISTERED and LOST */
};

/* A random member id for one init call (getrandom, falling back to clock/pid/address mixing). */
uint64_t netd_member_id(const void *salt);

/* CLOCK_MONOTONIC in ns: the clock the plugin and the daemon on one host share. */
int64_t netd_mono_ns(void);

/* Ask the daemon at `socket_path` for the pin of `req` (its register_by_ns and deadline_ns set).
 * Every socket operation is non-blocking and bounded by req->deadline_ns. */
enum netd_pin_outcome netd_pin_ask(const char *socket_path, const struct netd_pin_request *req,
                                   struct netd_pin_reply *reply);

#endif

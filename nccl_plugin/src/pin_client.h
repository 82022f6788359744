// SPDX-License-Identifier: Apache-2.0
#ifndef NETD_PIN_CLIENT_H_
#define NETD_PIN_CLIENT_H_

#include <stddef.h>
#include <stdint.h>

#include "netd_hints.h"

enum netd_pin_outcome {
    /* The request never reached the daemon (no socket, refused, path too long, short write):
   * this rank is not registered, so its communicator's pin cannot complete anywhere. */
    NETD_PIN_UNREGISTERED = 0,
    /* The daemon answered; see reply.status. */
    NETD_PIN_ANSWERED = 1,
    /* The request was sent but no valid answer came back in time: the verdict is unknown. */
    NETD_PIN_LOST = 2,
};

struct netd_pin_reply {
    struct netd_pin_response response; /* reason is NUL-terminated by the client */
    uint8_t *table;                    /* malloc'd, response.table_size bytes; NULL when none */
    char error[160];                   /* why, for UNREGISTERED and LOST */
};

/* A random member id for one init call (getrandom, falling back to clock/pid/address mixing). */
uint64_t netd_member_id(const void *salt);

/* Ask the daemon at `socket_path` for the pin of `req`; waits at most timeout_ms in total. */
enum netd_pin_outcome netd_pin_ask(const char *socket_path, const struct netd_pin_request *req,
                                   unsigned timeout_ms, struct netd_pin_reply *reply);

#endif

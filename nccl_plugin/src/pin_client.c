// SPDX-License-Identifier: Apache-2.0
/*
 * pin_client.c — one request to the local netd over its Unix socket, at communicator init.
 *
 * The distinction that matters for consistency is whether the request *may* have registered
 * this rank: until the whole request is written, the daemon has not registered anything (it
 * registers only a complete request), so failures up to then are UNREGISTERED; any failure
 * after that is LOST, because the pin may have completed for the other ranks.
 */
#define _GNU_SOURCE
#include "pin_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define NETD_PIN_MAX_TABLE (1U << 20) /* larger announcements are not read (and fail validation) */

uint64_t netd_member_id(const void *salt)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof id, GRND_NONBLOCK) == (ssize_t)sizeof id && id != 0)
        return id;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* splitmix64 over time, pid and the caller's address: unique enough without entropy */
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)getpid() << 16) ^
                 (uint64_t)(uintptr_t)salt;
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return (x ^ (x >> 31)) | 1U;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read exactly len bytes before the deadline. 0 on success, else -1 with a reason. */
static int read_full(int fd, void *buf, size_t len, int64_t deadline, char *why, size_t why_len)
{
    uint8_t *p = buf;
    while (len > 0) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            snprintf(why, why_len, "no answer within the timeout");
            return -1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)(left > 0x7fffffff ? 0x7fffffff : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, why_len, "poll: %s", strerror(errno));
            return -1;
        }
        if (r == 0)
            continue; /* re-check the deadline */
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            snprintf(why, why_len, n == 0 ? "connection closed mid-answer" : "recv: %s",
                     n == 0 ? "" : strerror(errno));
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static enum netd_pin_outcome read_answer(int fd, const struct netd_pin_request *req, int64_t deadline,
                                         struct netd_pin_reply *reply)
{
    struct netd_pin_response *r = &reply->response;
    if (read_full(fd, r, sizeof *r, deadline, reply->error, sizeof reply->error) != 0)
        return NETD_PIN_LOST;
    r->reason[NETD_PIN_REASON_LEN - 1] = '\0';
    if (r->magic != NETD_PIN_RESPONSE_MAGIC || r->version != NETD_PIN_PROTO_VERSION || r->size != sizeof *r ||
        r->status > NETD_PIN_FAIL || r->comm_id != req->comm_id) {
        snprintf(reply->error, sizeof reply->error,
                 "malformed answer (magic 0x%08x, version %u, size %u, status %u)", r->magic, r->version,
                 r->size, r->status);
        return NETD_PIN_LOST;
    }
    if (r->status != NETD_PIN_APPLY || r->table_size == 0 || r->table_size > NETD_PIN_MAX_TABLE)
        return NETD_PIN_ANSWERED; /* an oversized table is not read: validation rejects a NULL table */
    reply->table = malloc(r->table_size);
    if (reply->table == NULL) {
        snprintf(reply->error, sizeof reply->error, "out of memory for a %u-byte table", r->table_size);
        return NETD_PIN_LOST;
    }
    if (read_full(fd, reply->table, r->table_size, deadline, reply->error, sizeof reply->error) != 0) {
        free(reply->table);
        reply->table = NULL;
        return NETD_PIN_LOST;
    }
    return NETD_PIN_ANSWERED;
}

enum netd_pin_outcome netd_pin_ask(const char *socket_path, const struct netd_pin_request *req,
                                   unsigned timeout_ms, struct netd_pin_reply *reply)
{
    memset(reply, 0, sizeof *reply);
    int64_t deadline = now_ms() + timeout_ms;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof addr.sun_path) {
        snprintf(reply->error, sizeof reply->error, "socket path longer than %zu bytes",
                 sizeof addr.sun_path - 1);
        return NETD_PIN_UNREGISTERED;
    }
    strcpy(addr.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(reply->error, sizeof reply->error, "socket: %s", strerror(errno));
        return NETD_PIN_UNREGISTERED;
    }
    /* A local connect completes at once or fails (no listener, no file, no permission). */
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        snprintf(reply->error, sizeof reply->error, "connect %s: %s", socket_path, strerror(errno));
        close(fd);
        return NETD_PIN_UNREGISTERED;
    }
    const uint8_t *p = (const uint8_t *)req;
    size_t left = sizeof *req;
    while (left > 0) {
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) { /* the daemon saw at most a partial request: nothing registered */
            snprintf(reply->error, sizeof reply->error, "send: %s", strerror(errno));
            close(fd);
            return NETD_PIN_UNREGISTERED;
        }
        p += n;
        left -= (size_t)n;
    }
    enum netd_pin_outcome out = read_answer(fd, req, deadline, reply);
    close(fd);
    return out;
}

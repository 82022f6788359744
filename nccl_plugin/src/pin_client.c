// SPDX-License-Identifier: Apache-2.0
/*
 * pin_client.c — one request to the local netd over its Unix socket, at communicator init.
 *
 * The distinction that matters for consistency is whether the request *may* have registered
 * this rank. netd writes an ACK before it registers and registers only while the shared
 * CLOCK_MONOTONIC is before the request's register_by_ns (netd_hints.h): so "no ACK by
 * register_by_ns" proves the rank unregistered, whatever the daemon does later. Every socket
 * operation is non-blocking and waits with poll() against a deadline, so a wedged daemon (full
 * accept queue, never accepting, never answering) costs at most the timeout.
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

int64_t netd_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits for `events` on fd until deadline (ns). 1 ready, 0 deadline passed, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - netd_mono_ns();
        /* poll once more with 0 ms once the deadline passed: data written before it is seen */
        int ms = left <= 0 ? 0 : (int)((left + 999999) / 1000000);
        struct pollfd pfd = {.fd = fd, .events = events};
        int r = poll(&pfd, 1, ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != 0)
            return r > 0 ? 1 : -1;
        if (left <= 0)
            return 0;
    }
}

/* Reads exactly len bytes before the deadline. 0 on success, 1 on timeout, -1 on error/EOF. */
static int read_full(int fd, void *buf, size_t len, int64_t deadline, char *why, size_t why_len)
{
    uint8_t *p = buf;
    while (len > 0) {
        int w = wait_fd(fd, POLLIN, deadline);
        if (w <= 0) {
            snprintf(why, why_len, w == 0 ? "no answer within the timeout" : "poll: %s", strerror(errno));
            return w == 0 ? 1 : -1;
        }
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0) {
            snprintf(why, why_len, "%s%s",
                     n == 0 ? "connection closed mid-answer" : "recv: ", n == 0 ? "" : strerror(errno));
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static enum netd_pin_outcome read_verdict(int fd, const struct netd_pin_request *req,
                                          struct netd_pin_reply *reply)
{
    struct netd_pin_response *r = &reply->response;
    if (read_full(fd, r, sizeof *r, req->deadline_ns, reply->error, sizeof reply->error) != 0)
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
    if (read_full(fd, reply->table, r->table_size, req->deadline_ns, reply->error, sizeof reply->error) !=
        0) {
        free(reply->table);
        reply->table = NULL;
        return NETD_PIN_LOST;
    }
    return NETD_PIN_ANSWERED;
}

/* The first message: an ACK (registration may follow), or an answer without one (not registered:
 * a refusal, or a daemon of another protocol version whose answer means NEUTRAL). */
static enum netd_pin_outcome read_ack(int fd, const struct netd_pin_request *req,
                                      struct netd_pin_reply *reply)
{
    struct netd_pin_prefix p;
    int got = read_full(fd, &p, sizeof p, req->register_by_ns, reply->error, sizeof reply->error);
    if (got != 0) {
        if (got == 1)
            snprintf(reply->error, sizeof reply->error, "netd did not take the request in time (no ACK)");
        return NETD_PIN_UNREGISTERED; /* nothing ACKed: netd registers nothing after register_by */
    }
    if (p.magic == NETD_PIN_ACK_MAGIC && p.version == NETD_PIN_PROTO_VERSION && p.size == sizeof p)
        return read_verdict(fd, req, reply);
    if ((p.magic == NETD_PIN_RESPONSE_MAGIC || p.magic == NETD_PIN_ACK_MAGIC) &&
        p.version != NETD_PIN_PROTO_VERSION) {
        snprintf(reply->error, sizeof reply->error, "netd speaks pin protocol %u, this plugin %d",
                 (unsigned)p.version, NETD_PIN_PROTO_VERSION);
        return NETD_PIN_UNREGISTERED; /* every version answers another version unregistered */
    }
    if (p.magic == NETD_PIN_RESPONSE_MAGIC) { /* a refusal before registering: NEUTRAL */
        struct netd_pin_response *r = &reply->response;
        memcpy(r, &p, sizeof p);
        if (read_full(fd, (uint8_t *)r + sizeof p, sizeof *r - sizeof p, req->deadline_ns, reply->error,
                      sizeof reply->error) != 0)
            return NETD_PIN_UNREGISTERED;
        r->reason[NETD_PIN_REASON_LEN - 1] = '\0';
        snprintf(reply->error, sizeof reply->error, "%s", r->reason);
        return NETD_PIN_UNREGISTERED;
    }
    snprintf(reply->error, sizeof reply->error, "not a netd answer (magic 0x%08x)", p.magic);
    return NETD_PIN_UNREGISTERED; /* whatever answered does not speak the pin protocol */
}

static int connect_bounded(int fd, const struct sockaddr_un *addr, int64_t until,
                           struct netd_pin_reply *reply, const char *path)
{
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0)
        return 0;
    int err = errno;
    if (err == EINPROGRESS || err == EINTR) {
        int w = wait_fd(fd, POLLOUT, until);
        socklen_t len = sizeof err;
        if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0)
            return 0;
        if (w == 0)
            err = ETIMEDOUT;
    }
    /* EAGAIN: a Unix listener's accept queue is full (a wedged or overloaded daemon) */
    reply->no_daemon = err == ENOENT || err == ECONNREFUSED || err == ENOTDIR;
    snprintf(reply->error, sizeof reply->error, "connect %s: %s", path, strerror(err));
    return -1;
}

static int send_bounded(int fd, const struct netd_pin_request *req, struct netd_pin_reply *reply)
{
    const uint8_t *p = (const uint8_t *)req;
    size_t left = sizeof *req;
    while (left > 0) {
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            if (wait_fd(fd, POLLOUT, req->register_by_ns) != 1)
                break;
            continue;
        }
        if (n <= 0)
            break;
        p += n;
        left -= (size_t)n;
    }
    if (left > 0)
        snprintf(reply->error, sizeof reply->error, "could not send the request: %s", strerror(errno));
    return left > 0 ? -1 : 0;
}

enum netd_pin_outcome netd_pin_ask(const char *socket_path, const struct netd_pin_request *req,
                                   struct netd_pin_reply *reply)
{
    memset(reply, 0, sizeof *reply);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof addr.sun_path) {
        snprintf(reply->error, sizeof reply->error, "socket path longer than %zu bytes",
                 sizeof addr.sun_path - 1);
        return NETD_PIN_UNREGISTERED;
    }
    strcpy(addr.sun_path, socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(reply->error, sizeof reply->error, "socket: %s", strerror(errno));
        return NETD_PIN_UNREGISTERED;
    }
    enum netd_pin_outcome out = NETD_PIN_UNREGISTERED;
    if (connect_bounded(fd, &addr, req->register_by_ns, reply, socket_path) == 0 &&
        send_bounded(fd, req, reply) == 0)
        out = read_ack(fd, req, reply);
    close(fd);
    return out;
}

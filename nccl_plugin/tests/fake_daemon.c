// SPDX-License-Identifier: Apache-2.0
#define _GNU_SOURCE
#include "fake_daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

static void serve_one(struct fake_daemon *d, int fd)
{
    struct netd_pin_request req;
    if (read_all(fd, &req, sizeof req) != 0)
        return;
    d->last = req;
    d->requests++;
    struct netd_pin_ack ack = {NETD_PIN_ACK_MAGIC, NETD_PIN_PROTO_VERSION, sizeof ack};
    if (d->mode == FAKE_NEWER)
        ack.version = NETD_PIN_PROTO_VERSION + 1;
    int acks =
        d->mode != FAKE_NO_ACK && d->mode != FAKE_OLD && d->mode != FAKE_REFUSE && d->mode != FAKE_GARBAGE;
    if (acks)
        write_all(fd, &ack, sizeof ack);
    struct netd_pin_response r = {
        .magic = NETD_PIN_RESPONSE_MAGIC,
        .version = NETD_PIN_PROTO_VERSION,
        .size = sizeof r,
        .comm_id = req.comm_id,
        .pinned_at_ns = d->pinned_at_ns,
    };
    switch (d->mode) {
    case FAKE_APPLY:
    case FAKE_CUT_TABLE:
    case FAKE_WRONG_COMM:
    case FAKE_OVERSIZE:
        r.status = NETD_PIN_APPLY;
        r.table_size = d->table_size;
        if (d->mode == FAKE_WRONG_COMM)
            r.comm_id = req.comm_id + 1;
        snprintf(r.reason, sizeof r.reason, "pinned by the fake daemon");
        if (d->mode == FAKE_OVERSIZE) {
            r.table_size = 2U << 20;
            write_all(fd, &r, sizeof r);
            break;
        }
        write_all(fd, &r, sizeof r);
        write_all(fd, d->table, d->mode == FAKE_CUT_TABLE ? d->table_size / 2 : d->table_size);
        break;
    case FAKE_STATIC_OK:
        r.status = NETD_PIN_APPLY;
        r.table_digest = req.static_digest;
        write_all(fd, &r, sizeof r);
        break;
    case FAKE_OLD: /* protocol 1's response: same 8-byte prefix, version 1, 128 bytes */
        r.version = 1;
        r.status = NETD_PIN_NEUTRAL;
        write_all(fd, &r, sizeof r);
        break;
    case FAKE_NEWER:
        break; /* the ACK of another version is already the answer */
    case FAKE_REFUSE:
    case FAKE_NEUTRAL:
    case FAKE_FAIL:
        r.status = d->mode != FAKE_FAIL ? NETD_PIN_NEUTRAL : NETD_PIN_FAIL;
        snprintf(r.reason, sizeof r.reason, "%s",
                 d->mode == FAKE_NEUTRAL ? "only 1 of 2 ranks asked" : "comm id collides");
        write_all(fd, &r, sizeof r);
        break;
    case FAKE_GARBAGE: {
        char junk[sizeof r];
        memset(junk, 'x', sizeof junk);
        write_all(fd, junk, sizeof junk);
        break;
    }
    case FAKE_CLOSE:
    case FAKE_WEDGED:
        break;
    case FAKE_NO_ACK:
    case FAKE_SILENT: {
        char c;
        while (read(fd, &c, 1) > 0) { /* until the client gives up and closes */
        }
        break;
    }
    }
}

static void *loop(void *arg)
{
    struct fake_daemon *d = arg;
    if (d->mode == FAKE_WEDGED) { /* never accept: connections pile up in the backlog */
        while (!d->stop)
            usleep(1000);
        return NULL;
    }
    while (!d->stop) {
        int fd = accept(d->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        serve_one(d, fd);
        close(fd);
    }
    return NULL;
}

int fake_daemon_start(struct fake_daemon *d, enum fake_mode mode, const uint8_t *table, uint32_t table_size,
                      int64_t pinned_at_ns)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "/tmp/netd-tuner-test-XXXXXX");
    if (mkdtemp(d->dir) == NULL)
        return -1;
    snprintf(d->path, sizeof d->path, "%s/nccl.sock", d->dir);
    d->mode = mode;
    d->table = table;
    d->table_size = table_size;
    d->pinned_at_ns = pinned_at_ns;
    d->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", d->path);
    if (d->listen_fd < 0 || bind(d->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(d->listen_fd, mode == FAKE_WEDGED ? 1 : 16) != 0) /* wedged: the queue fills after 2 */
        return -1;
    return pthread_create(&d->thread, NULL, loop, d) == 0 ? 0 : -1;
}

void fake_daemon_stop(struct fake_daemon *d)
{
    d->stop = 1;
    shutdown(d->listen_fd, SHUT_RDWR);
    pthread_join(d->thread, NULL);
    close(d->listen_fd);
    unlink(d->path);
    rmdir(d->dir);
}

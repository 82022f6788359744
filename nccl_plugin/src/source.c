// SPDX-License-Identifier: Apache-2.0
/*
 * source.c — obtaining a communicator's table at init, and the consistency rule.
 *
 * The rule (docs/nccl.md, "Consistency"): a rank may fail init only when every rank of its
 * communicator is certain to fail the same way — an operator-pinned static file that does not
 * match its digest, read by every rank from the same path. Otherwise it applies only bytes that
 * every rank provably holds (a table pinned once *all* ranks registered) or leaves NCCL alone:
 * a rank that could not register keeps the pin from completing, so every peer is NEUTRAL too.
 */
#define _GNU_SOURCE
#include "source.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nccl_abi.h"
#include "pin_client.h"
#include "sha256.h"

#define NETD_MAX_TABLE_FILE ((size_t)1 << 20)

static int parse_switch(const char *v, int *out)
{
    static const char *on[] = {"1", "on", "yes", "true", "enable", "enabled"};
    static const char *off[] = {"0", "off", "no", "false", "disable", "disabled", "none"};
    for (size_t i = 0; i < sizeof on / sizeof *on; i++)
        if (strcasecmp(v, on[i]) == 0)
            return *out = 1, 0;
    for (size_t i = 0; i < sizeof off / sizeof *off; i++)
        if (strcasecmp(v, off[i]) == 0)
            return *out = 0, 0;
    return -1;
}

/* Keep the default on a malformed value; say which. */
static int bad(struct netd_settings *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct netd_settings *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error, sizeof s->error, fmt, ap);
    va_end(ap);
    return -1;
}

static int load_timeout(struct netd_settings *s, const char *v)
{
    char *end = NULL;
    errno = 0;
    unsigned long long ms = strtoull(v, &end, 10);
    if (!isdigit((unsigned char)*v) || *end != '\0')
        return bad(s, "NETD_TUNER_TIMEOUT_MS=%.40s: expected milliseconds", v);
    if (errno == ERANGE || ms > NETD_MAX_TIMEOUT_MS || ms < NETD_MIN_TIMEOUT_MS) {
        s->timeout_ms = ms < NETD_MIN_TIMEOUT_MS ? NETD_MIN_TIMEOUT_MS : NETD_MAX_TIMEOUT_MS;
        snprintf(s->note, sizeof s->note, "NETD_TUNER_TIMEOUT_MS=%.40s clamped to %u ms (range %u..%u)", v,
                 s->timeout_ms, NETD_MIN_TIMEOUT_MS, NETD_MAX_TIMEOUT_MS);
        return 0;
    }
    s->timeout_ms = (unsigned)ms;
    return 0;
}

static int load_table(struct netd_settings *s, const char *table, const char *sha)
{
    int has_table = table != NULL && *table != '\0', has_sha = sha != NULL && *sha != '\0';
    if (has_table != has_sha)
        return bad(
            s,
            "%s is set without its pair: a static table needs NETD_TUNER_TABLE and NETD_TUNER_TABLE_SHA256",
            has_table ? "NETD_TUNER_TABLE" : "NETD_TUNER_TABLE_SHA256");
    if (!has_table)
        return 0;
    if (strlen(table) >= sizeof s->table)
        return bad(s, "%s", "NETD_TUNER_TABLE path is too long");
    if (strlen(sha) != 64)
        return bad(s, "%s", "NETD_TUNER_TABLE_SHA256 must be 64 hex digits");
    for (int i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)sha[i]))
            return bad(s, "%s", "NETD_TUNER_TABLE_SHA256 must be 64 hex digits");
        s->table_sha256[i] = (char)tolower((unsigned char)sha[i]);
    }
    snprintf(s->table, sizeof s->table, "%s", table);
    return 0;
}

int netd_settings_load(struct netd_settings *s)
{
    memset(s, 0, sizeof *s);
    s->enabled = 1;
    s->timeout_ms = NETD_DEFAULT_TIMEOUT_MS;
    snprintf(s->socket, sizeof s->socket, "%s", NETD_DEFAULT_SOCKET);
    /* The kill switch comes first: with NETD_TUNER=off nothing else is read, so no other
     * variable, however malformed, can change what the plugin does. */
    const char *v = getenv("NETD_TUNER");
    if (v != NULL && *v != '\0' && parse_switch(v, &s->enabled) != 0) {
        s->enabled = 0;
        return bad(s, "NETD_TUNER=%.40s: expected on or off", v);
    }
    if (!s->enabled)
        return 0;
    if ((v = getenv("NETD_TUNER_SOCKET")) != NULL && *v != '\0') {
        if (strlen(v) >= sizeof s->socket)
            return bad(s, "%s", "NETD_TUNER_SOCKET is longer than 107 bytes");
        snprintf(s->socket, sizeof s->socket, "%s", v);
    }
    if ((v = getenv("NETD_TUNER_TIMEOUT_MS")) != NULL && *v != '\0' && load_timeout(s, v) != 0)
        return -1;
    return load_table(s, getenv("NETD_TUNER_TABLE"), getenv("NETD_TUNER_TABLE_SHA256"));
}

uint64_t netd_digest64(const char *hex)
{
    uint64_t d = 0;
    for (int i = 0; i < 8; i++) {
        unsigned byte = 0;
        sscanf(hex + 2 * i, "%2x", &byte);
        d |= (uint64_t)byte << (8 * i);
    }
    return d;
}

static void say(struct netd_obtained *out, enum netd_verdict v, int level, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(struct netd_obtained *out, enum netd_verdict v, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof out->message, fmt, ap);
    va_end(ap);
    out->verdict = v;
    out->level = level;
}

/* A validated table's slice for n_nodes, or UNTOUCHED when the bytes (identical on every rank)
 * are unusable. `stale_check` is 0 for static tables, whose lifetime the operator decides. */
static void latch(const uint8_t *buf, size_t len, size_t n_nodes, int stale_check, int64_t pinned_at,
                  const char *what, struct netd_slice *slice, struct netd_obtained *out)
{
    char why[160];
    if (buf == NULL) {
        say(out, NETD_UNTOUCHED, NCCL_LOG_WARN, "%s: no usable table bytes; NCCL's own tuning is kept", what);
        return;
    }
    if (netd_table_validate(buf, len, why, sizeof why) != 0) {
        say(out, NETD_UNTOUCHED, NCCL_LOG_WARN, "%s: table rejected (%s); NCCL's own tuning is kept", what,
            why);
        return;
    }
    struct netd_hints_header h;
    memcpy(&h, buf, sizeof h);
    out->table_version = h.table_version;
    if (stale_check && !netd_table_fresh(&h, pinned_at)) {
        say(out, NETD_UNTOUCHED, NCCL_LOG_WARN,
            "%s: table %016llx is stale (generated %.1f s before the pin, valid for %.1f s); "
            "NCCL's own tuning is kept",
            what, (unsigned long long)h.table_version, (double)(pinned_at - h.generated_at_ns) / 1e9,
            h.valid_for_ms / 1e3);
        return;
    }
    out->active_entries = netd_table_select(buf, n_nodes, slice);
    say(out, NETD_APPLY, NCCL_LOG_INFO, "%s: table %016llx latched, %d hints for %zu nodes", what,
        (unsigned long long)h.table_version, out->active_entries, n_nodes);
}

/* Reads the static table file (a regular file, at most 1 MiB, never blocking) and checks its
 * digest. Returns the bytes (caller frees), or NULL with `out` set to FAIL: the same path and the
 * same digest are given to every rank, so every rank fails the same way. */
static uint8_t *read_static(const struct netd_settings *s, size_t *len_out, struct netd_obtained *out)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. fstat through syscall(): the glibc
     * wrapper is versioned (fstat@GLIBC_2.33) and the plugin must load on older glibc. */
    int fd = open(s->table, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        say(out, NETD_FAIL, NCCL_LOG_WARN, "NETD_TUNER_TABLE %s: %s", s->table, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        say(out, NETD_FAIL, NCCL_LOG_WARN, "NETD_TUNER_TABLE %s: not a regular file", s->table);
        close(fd);
        return NULL;
    }
    /* read to EOF, at most 1 MiB (+1 byte to notice a larger file) */
    uint8_t *buf = malloc(NETD_MAX_TABLE_FILE + 1);
    size_t len = 0;
    int err = buf == NULL ? ENOMEM : 0;
    while (err == 0 && len <= NETD_MAX_TABLE_FILE) {
        ssize_t n = read(fd, buf + len, NETD_MAX_TABLE_FILE + 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            err = errno;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (err != 0 || len > NETD_MAX_TABLE_FILE) {
        say(out, NETD_FAIL, NCCL_LOG_WARN, "NETD_TUNER_TABLE %s: %s", s->table,
            err != 0 ? strerror(err) : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    uint8_t digest[32];
    char hex[65];
    netd_sha256(buf, len, digest);
    netd_sha256_hex(digest, hex);
    if (strcmp(hex, s->table_sha256) != 0) {
        say(out, NETD_FAIL, NCCL_LOG_WARN,
            "NETD_TUNER_TABLE %s has SHA-256 %s but NETD_TUNER_TABLE_SHA256 is %s: every rank must "
            "load the same table, so init fails",
            s->table, hex, s->table_sha256);
        free(buf);
        return NULL;
    }
    *len_out = len;
    return buf;
}

void netd_obtain_static(const struct netd_settings *s, size_t n_nodes, struct netd_slice *slice,
                        struct netd_obtained *out)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    uint8_t *buf = read_static(s, &len, out);
    if (buf == NULL)
        return;
    char what[NETD_PATH_MAX + 32];
    snprintf(what, sizeof what, "static table %s", s->table);
    latch(buf, len, n_nodes, 0, 0, what, slice, out);
    free(buf);
}

/* The verdict for a static-table rank: the pin tells whether every rank pinned the same file. */
static void static_verdict(const struct netd_settings *s, enum netd_pin_outcome got,
                           const struct netd_pin_reply *reply, uint64_t digest, const uint8_t *buf,
                           size_t len, size_t n_nodes, const char *what, struct netd_slice *slice,
                           struct netd_obtained *out)
{
    char label[NETD_PATH_MAX + 160];
    if (got == NETD_PIN_UNREGISTERED && reply->no_daemon) {
        /* No netd on this host: the operator's file alone decides, as on NCCLs without a comm id.
         * Mixed static/daemon configurations can only be detected where netd runs. */
        snprintf(label, sizeof label, "%s: static table %s (no netd here to cross-check peers)", what,
                 s->table);
        latch(buf, len, n_nodes, 0, 0, label, slice, out);
        return;
    }
    if (got == NETD_PIN_ANSWERED && reply->response.status == NETD_PIN_APPLY &&
        reply->response.table_digest == digest) {
        snprintf(label, sizeof label, "%s: static table %s, the same on every rank", what, s->table);
        latch(buf, len, n_nodes, 0, 0, label, slice, out);
        return;
    }
    say(out, NETD_UNTOUCHED, got == NETD_PIN_LOST ? NCCL_LOG_WARN : NCCL_LOG_INFO,
        "%s: static table %s not applied (%s); NCCL's own tuning is kept", what, s->table,
        got == NETD_PIN_ANSWERED ? reply->response.reason : reply->error);
}

static void daemon_verdict(const struct netd_settings *s, enum netd_pin_outcome got,
                           const struct netd_pin_reply *reply, size_t n_nodes, const char *what,
                           struct netd_slice *slice, struct netd_obtained *out)
{
    switch (got) {
    case NETD_PIN_UNREGISTERED:
        say(out, NETD_UNTOUCHED, NCCL_LOG_INFO,
            "%s: no netd pin (%s); NCCL's own tuning is kept here and, since this rank never "
            "registered, on every other rank of the communicator",
            what, reply->error);
        return;
    case NETD_PIN_LOST:
        /* The one case no protocol can close (docs/nccl.md): registered, verdict lost. Failing
         * init would be a one-rank failure too; NCCL is left alone and the log says why. */
        say(out, NETD_UNTOUCHED, NCCL_LOG_WARN,
            "%s: netd at %s took the request but %s; NCCL's own tuning is kept (if netd crashed "
            "just after deciding, peers may differ: NETD_TUNER=off runs without netd)",
            what, s->socket, reply->error);
        return;
    case NETD_PIN_ANSWERED:
        break;
    }
    if (reply->response.status == NETD_PIN_APPLY && reply->response.table_digest == 0) {
        latch(reply->table, reply->response.table_size, n_nodes, 1, reply->response.pinned_at_ns, what, slice,
              out);
        return;
    }
    if (reply->response.status == NETD_PIN_FAIL) { /* netd may have registered us but has no verdict */
        say(out, NETD_UNTOUCHED, NCCL_LOG_WARN,
            "%s: netd has no verdict for this rank (%s); NCCL's own tuning is kept (peers may differ "
            "if the pin completed: NETD_TUNER=off runs without netd)",
            what, reply->response.reason);
        return;
    }
    say(out, NETD_UNTOUCHED, NCCL_LOG_INFO, "%s: %s; NCCL's own tuning is kept on every rank", what,
        reply->response.reason);
}

void netd_obtain_pinned(const struct netd_settings *s, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                        struct netd_slice *slice, struct netd_obtained *out)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    uint8_t *buf = NULL;
    uint64_t digest = 0;
    if (s->table[0] != '\0') {
        if ((buf = read_static(s, &len, out)) == NULL)
            return;
        digest = netd_digest64(s->table_sha256) | 1U; /* never 0, which means daemon mode */
    }
    int64_t start = netd_mono_ns(), budget = (int64_t)s->timeout_ms * 1000000;
    struct netd_pin_request req = {
        .magic = NETD_PIN_REQUEST_MAGIC,
        .version = NETD_PIN_PROTO_VERSION,
        .size = sizeof req,
        .comm_id = comm_id,
        .n_ranks = n_ranks,
        .n_nodes = n_nodes,
        .member = netd_member_id(slice),
        .timeout_ms = s->timeout_ms,
        .pid = (uint32_t)getpid(),
        .register_by_ns = start + budget / 2, /* half to be taken, half for the verdict */
        .deadline_ns = start + budget,
        .static_digest = digest,
    };
    struct netd_pin_reply reply;
    char what[96];
    snprintf(what, sizeof what, "comm %016llx (%zu ranks, %zu nodes)", (unsigned long long)comm_id, n_ranks,
             n_nodes);
    enum netd_pin_outcome got = netd_pin_ask(s->socket, &req, &reply);
    if (buf != NULL)
        static_verdict(s, got, &reply, digest, buf, len, n_nodes, what, slice, out);
    else
        daemon_verdict(s, got, &reply, n_nodes, what, slice, out);
    free(buf);
    free(reply.table);
}

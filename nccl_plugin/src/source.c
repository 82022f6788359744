// SPDX-License-Identifier: Apache-2.0
/*
 * source.c — obtaining a communicator's table at init, and the consistency rule.
 *
 * The rule (docs/nccl.md, "Consistency"): a rank applies hints only from bytes that every rank
 * of its communicator provably holds — an operator-pinned file verified by SHA-256, or a table
 * pinned for the communicator by the pin authority once *all* its ranks registered. A rank
 * that could not register leaves NCCL untouched (its absence keeps the pin from completing,
 * so every peer leaves NCCL untouched too); a rank that may have registered but did not get
 * the verdict fails init loudly instead of guessing.
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

int netd_settings_load(struct netd_settings *s)
{
    memset(s, 0, sizeof *s);
    s->enabled = 1;
    s->timeout_ms = NETD_DEFAULT_TIMEOUT_MS;
    snprintf(s->socket, sizeof s->socket, "%s", NETD_DEFAULT_SOCKET);
    const char *v = getenv("NETD_TUNER");
    if (v != NULL && *v != '\0' && parse_switch(v, &s->enabled) != 0) {
        snprintf(s->error, sizeof s->error, "NETD_TUNER=%.40s: expected on or off", v);
        return -1;
    }
    if ((v = getenv("NETD_TUNER_SOCKET")) != NULL && *v != '\0') {
        if (strlen(v) >= sizeof s->socket) {
            snprintf(s->error, sizeof s->error, "NETD_TUNER_SOCKET is longer than %zu bytes",
                     sizeof s->socket - 1);
            return -1;
        }
        snprintf(s->socket, sizeof s->socket, "%s", v);
    }
    if ((v = getenv("NETD_TUNER_TIMEOUT_MS")) != NULL && *v != '\0') {
        char *end = NULL;
        errno = 0;
        unsigned long ms = strtoul(v, &end, 10);
        if (errno != 0 || *end != '\0' || !isdigit((unsigned char)*v) || ms < 100 || ms > 600000) {
            snprintf(s->error, sizeof s->error,
                     "NETD_TUNER_TIMEOUT_MS=%.40s: expected milliseconds in 100..600000", v);
            return -1;
        }
        s->timeout_ms = (unsigned)ms;
    }
    const char *table = getenv("NETD_TUNER_TABLE"), *sha = getenv("NETD_TUNER_TABLE_SHA256");
    int has_table = table != NULL && *table != '\0', has_sha = sha != NULL && *sha != '\0';
    if (has_table != has_sha) {
        snprintf(s->error, sizeof s->error, "%s is set but %s is not: a static table is pinned by both",
                 has_table ? "NETD_TUNER_TABLE" : "NETD_TUNER_TABLE_SHA256",
                 has_table ? "NETD_TUNER_TABLE_SHA256" : "NETD_TUNER_TABLE");
        return -1;
    }
    if (has_table) {
        if (strlen(table) >= sizeof s->table || strlen(sha) != 64) {
            snprintf(s->error, sizeof s->error, "%s",
                     strlen(sha) != 64 ? "NETD_TUNER_TABLE_SHA256 must be 64 hex digits"
                                       : "NETD_TUNER_TABLE path is too long");
            return -1;
        }
        for (int i = 0; i < 64; i++) {
            if (!isxdigit((unsigned char)sha[i])) {
                snprintf(s->error, sizeof s->error, "NETD_TUNER_TABLE_SHA256 must be 64 hex digits");
                return -1;
            }
            s->table_sha256[i] = (char)tolower((unsigned char)sha[i]);
        }
        snprintf(s->table, sizeof s->table, "%s", table);
    }
    return 0;
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

void netd_obtain_static(const struct netd_settings *s, size_t n_nodes, struct netd_slice *slice,
                        struct netd_obtained *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(s->table, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say(out, NETD_FAIL, NCCL_LOG_WARN, "NETD_TUNER_TABLE %s: %s", s->table, strerror(errno));
        return;
    }
    /* read to EOF, at most 1 MiB (+1 byte to notice a larger file); no fstat: runs on older glibc */
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
        return;
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
        return;
    }
    char what[NETD_PATH_MAX + 32];
    snprintf(what, sizeof what, "static table %s", s->table);
    latch(buf, len, n_nodes, 0, 0, what, slice, out);
    free(buf);
}

void netd_obtain_pinned(const struct netd_settings *s, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                        struct netd_slice *slice, struct netd_obtained *out)
{
    memset(out, 0, sizeof *out);
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
    };
    struct netd_pin_reply reply;
    char what[96];
    snprintf(what, sizeof what, "comm %016llx (%zu ranks, %zu nodes)", (unsigned long long)comm_id, n_ranks,
             n_nodes);
    switch (netd_pin_ask(s->socket, &req, s->timeout_ms, &reply)) {
    case NETD_PIN_UNREGISTERED:
        say(out, NETD_UNTOUCHED, NCCL_LOG_INFO,
            "%s: no netd pin (%s); NCCL's own tuning is kept here and, since this rank never "
            "registered, on every other rank of the communicator",
            what, reply.error);
        return;
    case NETD_PIN_LOST:
        say(out, NETD_FAIL, NCCL_LOG_WARN,
            "%s: asked netd at %s for the pin but %s; this rank cannot know which table its peers "
            "use, so init fails (NETD_TUNER=off runs without netd)",
            what, s->socket, reply.error);
        return;
    case NETD_PIN_ANSWERED:
        break;
    }
    switch ((enum netd_pin_status)reply.response.status) {
    case NETD_PIN_FAIL:
        say(out, NETD_FAIL, NCCL_LOG_WARN,
            "%s: netd has no verdict for this rank (%s), so it cannot know which table its peers use "
            "and init fails (NETD_TUNER=off runs without netd)",
            what, reply.response.reason);
        break;
    case NETD_PIN_NEUTRAL:
        say(out, NETD_UNTOUCHED, NCCL_LOG_INFO, "%s: %s; NCCL's own tuning is kept on every rank", what,
            reply.response.reason);
        break;
    case NETD_PIN_APPLY:
        latch(reply.table, reply.response.table_size, n_nodes, 1, reply.response.pinned_at_ns, what, slice,
              out);
        break;
    }
    free(reply.table);
}

// SPDX-License-Identifier: Apache-2.0
/*
 * plugin.c — libnccl-tuner-netd.so: the NCCL tuner entry points (API v6, v5, v4, v3, v2).
 *
 * init (once per communicator, off the hot path) obtains and latches the communicator's hints;
 * getCollInfo is one table lookup plus netd_apply(); finalize frees the context. Everything
 * except the five ncclTunerPlugin_vN objects has hidden visibility.
 *
 * init returns an error only for a static table that every rank fails alike (docs/nccl.md);
 * everything else — malformed variables, no daemon, a daemon of another version, a wedged
 * daemon — leaves NCCL alone within NETD_TUNER_TIMEOUT_MS.
 *
 * Environment (docs/nccl.md): NETD_TUNER=on|off, NETD_TUNER_SOCKET, NETD_TUNER_TIMEOUT_MS,
 * NETD_TUNER_TABLE + NETD_TUNER_TABLE_SHA256.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "hints.h"
#include "nccl_abi.h"
#include "source.h"

/* NCCL's MAXCHANNELS (src/include/device.h): 32 up to 2.24, 64 from 2.25. API v2 (2.21) and v3
 * (2.22-2.23) only run on 32; v4 runs on 2.24 (32) and 2.25-2.27 (64) and cannot tell which, so it
 * gets the smaller; v5/v6 (2.28+) get 64. NCCL neither checks nor rejects *nChannels: it takes the
 * smaller of it and the communicator's channels when it schedules (tests/abi_check.c checks these
 * against NCCL's values). A larger hint is clamped at init, so the launch path never sees one. */
#define NETD_MAX_CHANNELS_V4 32
#define NETD_MAX_CHANNELS_V5 64

/* A context exists only for a communicator with hints: NULL means "leave NCCL alone". */
struct netd_ctx {
    struct netd_fast_entry fast[NETD_HINTS_NUM_COLLS][NETD_HINTS_NUM_SIZE_BUCKETS];
    struct netd_slice slice; /* the entries as received, for unusual table shapes */
    uint64_t comm_id;
};

/* Configuration problems are the same for every communicator of the process: say them once. */
static atomic_int said_settings;

static void log_line(ncclDebugLogger_t log, int level, int line, const char *msg)
{
    if (log != NULL)
        log((ncclDebugLogLevel)level, NCCL_TUNING, __FILE__, line, "netd tuner: %s", msg);
}

static int clamp_channels(struct netd_slice *slice, int max_channels)
{
    int clamped = 0;
    for (int c = 0; c < NETD_HINTS_NUM_COLLS; c++)
        for (int b = 0; b < NETD_HINTS_NUM_SIZE_BUCKETS; b++)
            if (slice->e[c][b].n_channels > max_channels) {
                slice->e[c][b].n_channels = (uint8_t)max_channels;
                clamped++;
            }
    return clamped;
}

static ncclResult_t init_common(void **context, int has_comm_id, uint64_t comm_id, size_t n_ranks,
                                size_t n_nodes, int max_channels, ncclDebugLogger_t log)
{
    if (context == NULL)
        return ncclInvalidArgument;
    *context = NULL;
    struct netd_settings s;
    int settings_ok = netd_settings_load(&s) == 0;
    if (!settings_ok || s.note[0] != '\0') {
        if (atomic_exchange(&said_settings, 1) == 0) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s%s", settings_ok ? s.note : s.error,
                     settings_ok ? "" : "; NCCL's own tuning is used (said once per process)");
            log_line(log, settings_ok ? NCCL_LOG_INFO : NCCL_LOG_WARN, __LINE__, msg);
        }
        if (!settings_ok)
            return ncclSuccess;
    }
    if (!s.enabled) {
        log_line(log, NCCL_LOG_INFO, __LINE__, "disabled by NETD_TUNER; NCCL's own tuning is used");
        return ncclSuccess;
    }
    /* Allocate before asking anyone: failing here leaves this rank unregistered, hence safe. */
    struct netd_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) {
        log_line(log, NCCL_LOG_WARN, __LINE__, "out of memory; NCCL's own tuning is used");
        return ncclSuccess;
    }
    struct netd_obtained got;
    if (has_comm_id) {
        netd_obtain_pinned(&s, comm_id, n_ranks, n_nodes, &ctx->slice, &got);
    } else if (s.table[0] != '\0') {
        netd_obtain_static(&s, n_nodes, &ctx->slice, &got);
    } else {
        got = (struct netd_obtained){.verdict = NETD_UNTOUCHED,
                                     .level = NCCL_LOG_INFO,
                                     .message = "this NCCL (tuner API v2-v4) gives no communicator id, "
                                                "so netd cannot pin a table per communicator; NCCL's "
                                                "own tuning is used (NETD_TUNER_TABLE pins a static "
                                                "table on any NCCL)"};
    }
    log_line(log, got.level, __LINE__, got.message);
    if (got.verdict != NETD_APPLY || got.active_entries == 0) {
        free(ctx);
        return got.verdict == NETD_FAIL ? ncclInvalidUsage : ncclSuccess;
    }
    int clamped = clamp_channels(&ctx->slice, max_channels);
    if (clamped > 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "%d hints asked for more than this NCCL's %d channels: clamped", clamped,
                 max_channels);
        log_line(log, NCCL_LOG_INFO, __LINE__, msg);
    }
    for (int c = 0; c < NETD_HINTS_NUM_COLLS; c++)
        for (int b = 0; b < NETD_HINTS_NUM_SIZE_BUCKETS; b++)
            netd_compile(&ctx->slice.e[c][b], &ctx->fast[c][b]);
    ctx->comm_id = comm_id;
    *context = ctx;
    return ncclSuccess;
}

static ncclResult_t init_v5(void **context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                            ncclDebugLogger_t log, ncclNvlDomainInfo_v5_t *nvl,
                            ncclTunerConstants_v5_t *constants)
{
    (void)nvl;       /* netd's hints are about the network; intra-node NVLink is NCCL's business */
    (void)constants; /* NCCL's model constants are left exactly as they are */
    return init_common(context, 1, comm_id, n_ranks, n_nodes, NETD_MAX_CHANNELS_V5, log);
}

static ncclResult_t init_v3(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t log, void **context)
{
    return init_common(context, 0, 0, n_ranks, n_nodes, NETD_MAX_CHANNELS_V4, log);
}

static ncclResult_t get_coll_info(void *context, ncclFunc_t coll_type, size_t n_bytes, int num_pipe_ops,
                                  float **cost_table, int num_algo, int num_proto, int reg_buff,
                                  int *n_channels)
{
    (void)num_pipe_ops;
    (void)reg_buff;
    const struct netd_ctx *ctx = context;
    unsigned coll = (unsigned)coll_type;
    if (ctx == NULL || coll >= NETD_HINTS_NUM_COLLS || cost_table == NULL)
        return ncclSuccess;
    const unsigned bucket = netd_size_bucket(n_bytes);
    const struct netd_fast_entry *fast = &ctx->fast[coll][bucket];
    /* No early exit for a bucket without a hint: netd_apply_fast finds nothing to do at once. NCCL
   * interleaves collectives and sizes, so "hinted or not" is close to random for the branch
   * predictor; a separate test for it cost ~0.8 ns per call more in `netd bench nccl`. */
    /* NCCL passes the address of a contiguous float[numAlgo][numProto] as float** */
    float *table = (float *)(void *)cost_table;
    if (num_proto == NETD_HINTS_NUM_PROTOS && num_algo >= 1 && num_algo <= NETD_HINTS_NUM_ALGOS)
        netd_apply_fast(fast, table, num_algo, n_channels); /* every NCCL since 2.22: 7x3 or 6x3 */
    else
        netd_apply(&ctx->slice.e[coll][bucket], table, num_algo, num_proto, n_channels);
    return ncclSuccess;
}

static ncclResult_t get_coll_info_v3(void *context, ncclFunc_t coll_type, size_t n_bytes, int num_pipe_ops,
                                     float **cost_table, int num_algo, int num_proto, int *n_channels)
{
    return get_coll_info(context, coll_type, n_bytes, num_pipe_ops, cost_table, num_algo, num_proto, 0,
                         n_channels);
}

/* NCCL 2.21 (v2) has no cost table: only a hard pin (algorithm and protocol both named, flag PIN)
 * can be expressed, and only for an algorithm this communicator supports. Forbid-only hints,
 * which need NCCL's costs to be safe, leave NCCL's own choice. */
static ncclResult_t get_coll_info_v2(void *context, ncclFunc_t coll_type, size_t n_bytes,
                                     int coll_net_support, int nvls_support, int num_pipe_ops, int *algorithm,
                                     int *protocol, int *n_channels)
{
    (void)num_pipe_ops;
    const struct netd_ctx *ctx = context;
    unsigned coll = (unsigned)coll_type;
    if (ctx == NULL || coll >= NETD_HINTS_NUM_COLLS || algorithm == NULL || protocol == NULL)
        return ncclSuccess;
    const struct netd_hint_entry *e = &ctx->slice.e[coll][netd_size_bucket(n_bytes)];
    int a = e->algo, supported = a == NCCL_ALGO_TREE || a == NCCL_ALGO_RING ||
                                 ((a == 2 || a == 3) && coll_net_support) ||
                                 ((a == 4 || a == 5) && nvls_support);
    if (!(e->flags & NETD_HINT_F_PIN) || e->proto < 0 || !supported)
        return ncclSuccess;
    *algorithm = a;
    *protocol = e->proto;
    if (e->n_channels != 0 && n_channels != NULL)
        *n_channels = e->n_channels;
    return ncclSuccess;
}

static ncclResult_t init_v2(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t log, void **context)
{
    /* As aws-ofi-nccl's v2 path: with NCCL_ALGO/NCCL_PROTO set, a v2 pin could name an excluded
     * pair (v2 has no -1.0 entries to respect), so NCCL is left alone. */
    if (context != NULL && (getenv("NCCL_ALGO") != NULL || getenv("NCCL_PROTO") != NULL)) {
        *context = NULL;
        log_line(log, NCCL_LOG_INFO, __LINE__, "NCCL_ALGO/NCCL_PROTO set: tuner API v2 leaves NCCL alone");
        return ncclSuccess;
    }
    return init_common(context, 0, 0, n_ranks, n_nodes, NETD_MAX_CHANNELS_V4, log);
}

static ncclResult_t finalize(void *context)
{
    free(context);
    return ncclSuccess;
}

NETD_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    .name = "netd",
    .init = init_v5,
    .getCollInfo = get_coll_info,
    .finalize = finalize,
    .getChunkSize = NULL, /* NCCL's chunk sizes are kept */
};

NETD_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "netd", .init = init_v5, .getCollInfo = get_coll_info, .finalize = finalize};

NETD_EXPORT const ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "netd", .init = init_v3, .getCollInfo = get_coll_info, .destroy = finalize};

NETD_EXPORT const ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = "netd", .init = init_v3, .getCollInfo = get_coll_info_v3, .destroy = finalize};

NETD_EXPORT const ncclTuner_v2_t ncclTunerPlugin_v2 = {
    .name = "netd", .init = init_v2, .getCollInfo = get_coll_info_v2, .destroy = finalize};

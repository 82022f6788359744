// SPDX-License-Identifier: Apache-2.0
/*
 * plugin.c — libnccl-tuner-netd.so: the NCCL tuner entry points (API v6, v5, v4, v3).
 *
 * init (once per communicator, off the hot path) obtains and latches the communicator's hints;
 * getCollInfo is one table lookup plus netd_apply(); finalize frees the context. Everything
 * except the four ncclTunerPlugin_vN objects has hidden visibility.
 *
 * Environment (docs/nccl.md): NETD_TUNER=on|off, NETD_TUNER_SOCKET, NETD_TUNER_TIMEOUT_MS,
 * NETD_TUNER_TABLE + NETD_TUNER_TABLE_SHA256.
 */
#include <stdlib.h>

#include "hints.h"
#include "nccl_abi.h"
#include "source.h"

/* A context exists only for a communicator with hints: NULL means "leave NCCL alone". */
struct netd_ctx {
    struct netd_fast_entry fast[NETD_HINTS_NUM_COLLS][NETD_HINTS_NUM_SIZE_BUCKETS];
    struct netd_slice slice; /* the entries as received, for unusual table shapes */
    uint64_t comm_id;
};

static void log_line(ncclDebugLogger_t log, int level, int line, const char *msg)
{
    if (log != NULL)
        log((ncclDebugLogLevel)level, NCCL_TUNING, __FILE__, line, "netd tuner: %s", msg);
}

static ncclResult_t init_common(void **context, int has_comm_id, uint64_t comm_id, size_t n_ranks,
                                size_t n_nodes, ncclDebugLogger_t log)
{
    if (context == NULL)
        return ncclInvalidArgument;
    *context = NULL;
    struct netd_settings s;
    if (netd_settings_load(&s) != 0) {
        log_line(log, NCCL_LOG_WARN, __LINE__, s.error);
        return ncclInvalidUsage;
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
    if (s.table[0] != '\0') {
        netd_obtain_static(&s, n_nodes, &ctx->slice, &got);
    } else if (has_comm_id) {
        netd_obtain_pinned(&s, comm_id, n_ranks, n_nodes, &ctx->slice, &got);
    } else {
        got = (struct netd_obtained){.verdict = NETD_UNTOUCHED,
                                     .level = NCCL_LOG_INFO,
                                     .message = "this NCCL (tuner API v3/v4) gives no communicator id, "
                                                "so netd cannot pin a table per communicator; NCCL's "
                                                "own tuning is used (NETD_TUNER_TABLE pins a static "
                                                "table on any NCCL)"};
    }
    log_line(log, got.level, __LINE__, got.message);
    if (got.verdict != NETD_APPLY || got.active_entries == 0) {
        free(ctx);
        if (got.verdict == NETD_FAIL)
            return s.table[0] != '\0' ? ncclInvalidUsage : ncclSystemError;
        return ncclSuccess;
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
    return init_common(context, 1, comm_id, n_ranks, n_nodes, log);
}

static ncclResult_t init_v3(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t log, void **context)
{
    return init_common(context, 0, 0, n_ranks, n_nodes, log);
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

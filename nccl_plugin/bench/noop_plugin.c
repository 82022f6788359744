// SPDX-License-Identifier: Apache-2.0
/*
 * noop_plugin.c — the benchmark's baseline: a v6 tuner whose getCollInfo returns at once.
 * Built as build/libnccl-tuner-noop.so and never installed.
 */
#include <stdlib.h>

#include "../src/nccl_abi.h"

static ncclResult_t noop_init(void **ctx, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                              ncclDebugLogger_t log, ncclNvlDomainInfo_v5_t *nvl,
                              ncclTunerConstants_v5_t *constants)
{
    (void)comm_id, (void)n_ranks, (void)n_nodes, (void)log, (void)nvl, (void)constants;
    *ctx = malloc(1); /* a real context, so the call path matches the netd plugin's */
    return ncclSuccess;
}

static ncclResult_t noop_get_coll_info(void *ctx, ncclFunc_t coll, size_t n_bytes, int pipe_ops,
                                       float **table, int num_algo, int num_proto, int reg_buff,
                                       int *n_channels)
{
    (void)ctx, (void)coll, (void)n_bytes, (void)pipe_ops, (void)table, (void)num_algo;
    (void)num_proto, (void)reg_buff, (void)n_channels;
    return ncclSuccess;
}

static ncclResult_t noop_finalize(void *ctx)
{
    free(ctx);
    return ncclSuccess;
}

NETD_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {.name = "noop",
                                                       .init = noop_init,
                                                       .getCollInfo = noop_get_coll_info,
                                                       .finalize = noop_finalize,
                                                       .getChunkSize = NULL};

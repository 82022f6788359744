// SPDX-License-Identifier: Apache-2.0
/*
 * cost_tables.h — NCCL-shaped cost tables for the tests and the benchmark: contiguous
 * float[numAlgo][numProto] in µs, -1.0 where NCCL marks a pair unavailable. Values follow NCCL's
 * model for 2 nodes x 8 GPUs on 400G RoCE (latency + size / bandwidth) at the sizes named.
 */
#ifndef NETD_TEST_COST_TABLES_H_
#define NETD_TEST_COST_TABLES_H_

/* AllReduce, 16 ranks on 2 nodes, 1 MiB: no CollNet, no NVLS across nodes, no PAT. */
static const float COST_ALLREDUCE_1M_7x3[7][3] = {
    {48.2f, 39.9f, 44.1f}, /* TREE  LL LL128 SIMPLE */
    {61.5f, 36.7f, 40.3f}, /* RING */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_DIRECT */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_CHAIN */
    {-1.0f, -1.0f, 52.0f}, /* NVLS (SIMPLE only) */
    {-1.0f, -1.0f, -1.0f}, /* NVLS_TREE */
    {-1.0f, -1.0f, -1.0f}, /* PAT */
};

/* AllGather, 4 ranks on 4 nodes (one GPU per node), 64 KiB: PAT offered (SIMPLE only). */
static const float COST_ALLGATHER_64K_7x3[7][3] = {
    {-1.0f, -1.0f, -1.0f}, /* TREE */
    {21.4f, 26.0f, 31.9f}, /* RING */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_DIRECT */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_CHAIN */
    {-1.0f, -1.0f, -1.0f}, /* NVLS */
    {-1.0f, -1.0f, -1.0f}, /* NVLS_TREE */
    {-1.0f, -1.0f, 24.8f}, /* PAT (SIMPLE only) */
};

/* NCCL 2.22 (6 algorithms, no PAT): AllReduce, 2 nodes, 256 KiB. */
static const float COST_ALLREDUCE_256K_6x3[6][3] = {
    {22.6f, 27.1f, 33.0f}, /* TREE */
    {30.8f, 28.9f, 35.5f}, /* RING */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_DIRECT */
    {-1.0f, -1.0f, -1.0f}, /* COLLNET_CHAIN */
    {-1.0f, -1.0f, -1.0f}, /* NVLS */
    {-1.0f, -1.0f, -1.0f}, /* NVLS_TREE */
};

/* NCCL's pick: the strict minimum over entries >= 0, ties to the lowest algorithm then protocol.
 * Returns a * numProto + p, or -1 when nothing is available (NCCL fails the collective). */
static inline int nccl_pick(const float *t, int num_algo, int num_proto)
{
    int best = -1;
    float min = 3.6e9f;
    for (int i = 0; i < num_algo * num_proto; i++) {
        if (t[i] == -1.0f)
            continue;
        if (t[i] >= 0.0f && t[i] < min) {
            min = t[i];
            best = i;
        }
    }
    return best;
}

#endif

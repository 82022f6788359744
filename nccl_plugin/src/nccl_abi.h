// SPDX-License-Identifier: Apache-2.0
/*
 * nccl_abi.h — the parts of NCCL's tuner-plugin ABI this plugin uses, declared from the facts of
 * NVIDIA/nccl src/include/plugin/nccl_tuner.h and src/include/plugin/tuner/tuner_v{2,3,4,5,6}.h
 * (see docs/nccl.md). Written for this plugin; no NCCL header is included or linked. `make
 * check-abi` compares it, and compiles plugin.c, against a copy of NCCL's declarations
 * (tests/upstream/nccl_tuner_decls.h, tags v2.21.5-1..v2.30.7-1).
 *
 * Version summary (field order matters; every function returns ncclResult_t, a 4-byte enum):
 *   v2 (2.21)  name, init(nRanks, nNodes, log, &ctx), getCollInfo(ctx, coll, nBytes, collNetSupport,
 *              nvlsSupport, numPipeOps, &algorithm, &protocol, &nChannels), destroy(ctx)
 *   v3 (2.22)  name, init(nRanks, nNodes, log, &ctx), getCollInfo(... numProto, nChannels), destroy
 *   v4 (2.24-2.27)  as v3, getCollInfo gains `int regBuff` before nChannels
 *   v5 (2.28)  name, init(&ctx, commId, nRanks, nNodes, log, nvlDomainInfo, constants),
 *              getCollInfo as v4, finalize
 *   v6 (2.30)  as v5, plus getChunkSize (optional, may be NULL)
 */
#ifndef NETD_NCCL_ABI_H_
#define NETD_NCCL_ABI_H_

#include <stddef.h>
#include <stdint.h>

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
} ncclResult_t;

/* Only the values 0..4 (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce) are tuned by
 * NCCL's cost model; later NCCLs define more and may pass them, so treat the type as an int. */
typedef enum {
    ncclFuncBroadcast = 0,
    ncclFuncReduce = 1,
    ncclFuncAllGather = 2,
    ncclFuncReduceScatter = 3,
    ncclFuncAllReduce = 4,
} ncclFunc_t;

typedef enum {
    NCCL_LOG_NONE = 0,
    NCCL_LOG_VERSION = 1,
    NCCL_LOG_WARN = 2,
    NCCL_LOG_INFO = 3,
    NCCL_LOG_ABORT = 4,
    NCCL_LOG_TRACE = 5,
} ncclDebugLogLevel;

#define NCCL_INIT 0x1UL
#define NCCL_TUNING 0x40UL

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_PAT 6
#define NCCL_PROTO_SIMPLE 2
#define NCCL_ALGO_PROTO_IGNORE (-1.0)

typedef struct {
    int nNvlDomains;
    int minRanksPerNvlDomain;
    int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* Owned by NCCL; the plugin may edit it in init. netd does not: it is declared so that the
 * signature is exact (7 algorithms x 3 protocols, 3 hardware links, 4 compute capabilities,
 * 3 tuning scales; 1152 bytes on x86-64). */
typedef struct {
    double baseLatencies[7][3];
    double hwLatencies[3][7][3];
    double llMaxBws[4][3];
    double perChMaxRingLL128Bws[4][3];
    double perChMaxTreeLL128Bws[4][3];
    double perChMaxTreeBws[4][3];
    double perChMaxNVLSTreeBws[4][3];
} ncclTunerConstants_v5_t;

typedef ncclResult_t (*netd_get_coll_info_v4_fn)(void *context, ncclFunc_t collType, size_t nBytes,
                                                 int numPipeOps, float **collCostTable, int numAlgo,
                                                 int numProto, int regBuff, int *nChannels);

/* v2: the plugin writes the algorithm and protocol itself (both or neither; NCCL_ALGO_UNDEF /
 * NCCL_PROTO_UNDEF = -1 stay NCCL's choice). 2.21 has 6 algorithms: PAT (6) does not exist. */
typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int collNetSupport,
                                int nvlsSupport, int numPipeOps, int *algorithm, int *protocol,
                                int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v2_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    ncclResult_t (*getCollInfo)(void *context, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                                float **collCostTable, int numAlgo, int numProto, int *nChannels);
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v3_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void **context);
    netd_get_coll_info_v4_fn getCollInfo;
    ncclResult_t (*destroy)(void *context);
} ncclTuner_v4_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                         ncclTunerConstants_v5_t *constants);
    netd_get_coll_info_v4_fn getCollInfo;
    ncclResult_t (*finalize)(void *context);
} ncclTuner_v5_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                         ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t *nvlDomainInfo,
                         ncclTunerConstants_v5_t *constants);
    netd_get_coll_info_v4_fn getCollInfo;
    ncclResult_t (*finalize)(void *context);
    ncclResult_t (*getChunkSize)(void *context, ncclFunc_t collType, size_t nBytes, int algo, int proto,
                                 int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

#define NETD_EXPORT __attribute__((visibility("default")))

#endif /* NETD_NCCL_ABI_H_ */

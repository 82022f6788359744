// SPDX-License-Identifier: Apache-2.0
/*
 * abi_check.c — the plugin against NCCL's own declarations (make check-abi, docs/nccl.md).
 *
 * Built two ways; both print the same JSON description of the tuner ABI (sizes, member offsets,
 * the enum and #define values the plugin uses):
 *   default            tests/upstream/nccl_tuner_decls.h (copied from NVIDIA/nccl) stands in for
 *                      src/nccl_abi.h and src/plugin.c is compiled against it: with -Werror every
 *                      `.init = ...` / `.getCollInfo = ...` of the five exported objects must have
 *                      exactly NCCL's function type, and the channel clamps are checked against
 *                      NCCL's MAXCHANNELS per tag;
 *   -DNETD_OWN_ABI     src/nccl_abi.h, which test_dlopen and the benchmark call the plugin through.
 * The two outputs must be identical.
 */
#include <stddef.h>
#include <stdio.h>

#ifdef NETD_OWN_ABI
#include "../src/nccl_abi.h"
#else
#include "upstream/nccl_tuner_decls.h"
/* NCCL's declarations take the place of netd's: the guard makes nccl_abi.h a no-op, and the one
 * name plugin.c needs from it that is not NCCL's is given here. */
#define NETD_NCCL_ABI_H_
#define NETD_EXPORT __attribute__((visibility("default")))
#include "../src/plugin.c"

/* v2 (2.21), v3 (2.22-2.23) and v4 (2.24-2.27) run on NCCLs whose MAXCHANNELS is 32 (2.24) or 64
 * (2.25+), and v4 cannot tell which: the clamp is the smaller. v5 (2.28+) and v6 (2.30+): 64. */
_Static_assert(NETD_MAX_CHANNELS_V4 == MAXCHANNELS_v2_21_5_1, "v2/v3 clamp != NCCL 2.21-2.23 MAXCHANNELS");
_Static_assert(NETD_MAX_CHANNELS_V4 == MAXCHANNELS_v2_24_3_1, "v4 clamp != NCCL 2.24 MAXCHANNELS");
_Static_assert(NETD_MAX_CHANNELS_V5 == MAXCHANNELS_v2_30_7_1, "v5/v6 clamp != NCCL 2.28+ MAXCHANNELS");
_Static_assert(NETD_MAX_CHANNELS_V5 == MAXCHANNELS_v2_25_1_1, "64 channels since 2.25");
_Static_assert(NETD_HINTS_MAX_CHANNELS <= MAXCHANNELS_v2_30_7_1,
               "a table may ask for more than any NCCL has");
#endif

static int first;

#define SEP() (first ? (first = 0, "") : ", ")
#define OPEN(name, type) printf("  \"%s\": {\"size\": %zu", name, sizeof(type)), first = 0
#define MEMBER(type, m) printf(", \"%s\": %zu", #m, offsetof(type, m))
#define CLOSE() printf("},\n")
/* every tuner struct starts name, init, getCollInfo, then destroy (v2-v4) or finalize (v5, v6) */
#define TUNER(type, last) \
    OPEN(#type, type), MEMBER(type, name), MEMBER(type, init), MEMBER(type, getCollInfo), MEMBER(type, last)
#define VALUE(name) printf("%s\"%s\": %lld", SEP(), #name, (long long)(name))

int main(void)
{
    printf("{\n");
    TUNER(ncclTuner_v2_t, destroy);
    CLOSE();
    TUNER(ncclTuner_v3_t, destroy);
    CLOSE();
    TUNER(ncclTuner_v4_t, destroy);
    CLOSE();
    TUNER(ncclTuner_v5_t, finalize);
    CLOSE();
    TUNER(ncclTuner_v6_t, finalize);
    MEMBER(ncclTuner_v6_t, getChunkSize);
    CLOSE();
    OPEN("ncclNvlDomainInfo_v5_t", ncclNvlDomainInfo_v5_t);
    MEMBER(ncclNvlDomainInfo_v5_t, nNvlDomains), MEMBER(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain);
    MEMBER(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain);
    CLOSE();
    OPEN("ncclTunerConstants_v5_t", ncclTunerConstants_v5_t);
    MEMBER(ncclTunerConstants_v5_t, baseLatencies), MEMBER(ncclTunerConstants_v5_t, hwLatencies);
    MEMBER(ncclTunerConstants_v5_t, llMaxBws), MEMBER(ncclTunerConstants_v5_t, perChMaxRingLL128Bws);
    MEMBER(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws), MEMBER(ncclTunerConstants_v5_t, perChMaxTreeBws);
    MEMBER(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws);
    CLOSE();
    printf("  \"values\": {"), first = 1;
    VALUE(sizeof(ncclResult_t)), VALUE(sizeof(ncclFunc_t)), VALUE(sizeof(ncclDebugLogLevel));
    VALUE(ncclSuccess), VALUE(ncclInternalError), VALUE(ncclInvalidUsage);
    VALUE(ncclFuncBroadcast), VALUE(ncclFuncReduce), VALUE(ncclFuncAllGather);
    VALUE(ncclFuncReduceScatter), VALUE(ncclFuncAllReduce);
    VALUE(NCCL_LOG_WARN), VALUE(NCCL_LOG_INFO), VALUE(NCCL_INIT), VALUE(NCCL_TUNING);
    VALUE(NCCL_ALGO_TREE), VALUE(NCCL_ALGO_RING), VALUE(NCCL_ALGO_PAT), VALUE(NCCL_PROTO_SIMPLE);
    printf("}\n}\n");
    return 0;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * bench.c — nanoseconds per getCollInfo call: libnccl-tuner-netd.so against a no-op plugin,
 * both loaded with dlopen(RTLD_NOW | RTLD_LOCAL) and called through ncclTunerPlugin_v6, as NCCL
 * does at every collective launch.
 *
 *   bench NETD_SO NOOP_SO [CALLS [REPEAT]]      prints one JSON object
 *
 * Workload: a 2-node communicator with a realistic table (AllReduce prefers TREE up to 256 KiB
 * and RING from 4 MiB; AllGather/ReduceScatter prefer PAT below 64 KiB; Broadcast/Reduce have
 * no hints), 4096 pre-drawn (collective, size) launches from 64 B to 1 GiB weighted towards
 * AllReduce, and before every call a fresh copy of an NCCL-shaped 7x3 cost table (NCCL rebuilds
 * the table for each launch, with scalar stores). The no-op loop does the same filling, so the
 * difference is the plugin's own work. Each round runs CALLS calls of each plugin in chunks of
 * 50,000 that alternate netd / no-op; the fastest chunk of each is the headline (the cleanest
 * measure on a shared machine), with the medians and every round's average so the spread shows.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/nccl_abi.h"
#include "../tests/cost_tables.h"
#include "../tests/table_builder.h"

#define LAUNCHES 4096
#define MAX_REPEAT 50
#define CHUNK 50000

static uint8_t table_buf[NETD_HINTS_TABLE_BYTES] __attribute__((aligned(8)));
static int launch_coll[LAUNCHES];
static size_t launch_bytes[LAUNCHES];
static volatile float sink;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void build_table(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tb_init(table_buf, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, 0);
    int ring[] = {1}, tree[] = {0};
    for (unsigned b = 0; b <= 9; b++)
        *tb_entry(table_buf, 1, 4, b) = tb_soft(0, ring, 1);
    for (unsigned b = 13; b < NETD_HINTS_NUM_SIZE_BUCKETS; b++)
        *tb_entry(table_buf, 1, 4, b) = tb_soft(1, tree, 1);
    for (unsigned b = 0; b <= 6; b++) {
        *tb_entry(table_buf, 1, 2, b) = tb_soft(6, ring, 1);
        *tb_entry(table_buf, 1, 3, b) = tb_soft(6, ring, 1);
    }
    tb_seal(table_buf);
}

static void draw_launches(void)
{
    uint64_t x = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < LAUNCHES; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned r = (unsigned)(x % 10);
        launch_coll[i] = r < 6   ? ncclFuncAllReduce
                         : r < 8 ? ncclFuncAllGather
                         : r < 9 ? ncclFuncReduceScatter
                                 : ncclFuncBroadcast;
        launch_bytes[i] = (size_t)1 << (6 + (x >> 20) % 25); /* 64 B .. 1 GiB */
        launch_bytes[i] += (x >> 40) % launch_bytes[i];
    }
}

static const ncclTuner_v6_t *load(const char *path)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "bench: dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    const ncclTuner_v6_t *t = dlsym(lib, "ncclTunerPlugin_v6");
    if (t == NULL) {
        fprintf(stderr, "bench: %s exports no ncclTunerPlugin_v6\n", path);
        exit(2);
    }
    return t;
}

/* NCCL builds the table with scalar stores (initCollCostTable, then updateCollCostTable); reset
 * it the same way rather than with a vector memcpy, so that the plugin's loads meet the store
 * pattern they meet in NCCL. */
static inline void fill(float *t)
{
    const float *src = &COST_ALLREDUCE_1M_7x3[0][0];
#pragma GCC unroll 21
    for (int i = 0; i < 21; i++) {
        t[i] = src[i];
        __asm__ volatile("" : : : "memory"); /* one scalar store each: no vectorised copy */
    }
}

static double run(const ncclTuner_v6_t *p, void *ctx, long first, long calls)
{
    float t[21];
    float acc = 0;
    double start = now_ns();
    for (long i = first; i < first + calls; i++) {
        int k = (int)(i & (LAUNCHES - 1));
        fill(t);
        int nch = 0;
        p->getCollInfo(ctx, (ncclFunc_t)launch_coll[k], launch_bytes[k], 1, (float **)(void *)t, 7, 3, 0,
                       &nch);
        __asm__ volatile("" : : "r"(t) : "memory"); /* the table is consumed, as NCCL's pick would */
        acc += t[(i & 7)] + (float)nch;
    }
    double ns = (now_ns() - start) / (double)calls;
    sink = acc;
    return ns;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void print_list(const char *name, const double *v, int n)
{
    printf("  \"%s\": [", name);
    for (int i = 0; i < n; i++)
        printf("%s%.2f", i ? ", " : "", v[i]);
    printf("],\n");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s NETD_SO NOOP_SO [CALLS [REPEAT]]\n", argv[0]);
        return 2;
    }
    long calls = argc > 3 ? atol(argv[3]) : 10000000L;
    int repeat = argc > 4 ? atoi(argv[4]) : 5;
    if (calls < 1 || repeat < 1 || repeat > MAX_REPEAT) {
        fprintf(stderr, "bench: CALLS must be >= 1 and REPEAT in 1..%d\n", MAX_REPEAT);
        return 2;
    }
    build_table();
    draw_launches();
    char dir[] = "/tmp/netd-tuner-bench-XXXXXX", path[128], sha[65];
    if (mkdtemp(dir) == NULL)
        return 2;
    snprintf(path, sizeof path, "%s/bench.ndht", dir);
    if (tb_write(path, table_buf, sizeof table_buf) != 0)
        return 2;
    tb_sha256_hex(table_buf, sizeof table_buf, sha);
    setenv("NETD_TUNER_TABLE", path, 1);
    setenv("NETD_TUNER_TABLE_SHA256", sha, 1);
    /* no netd to cross-check with: the static file alone decides (a daemon on this host would
     * refuse a 2-node static pin without a pin service) */
    char nosock[160];
    snprintf(nosock, sizeof nosock, "%s/no-netd.sock", dir);
    setenv("NETD_TUNER_SOCKET", nosock, 1);
    unsetenv("NETD_TUNER");
    const ncclTuner_v6_t *netd = load(argv[1]), *noop = load(argv[2]);
    void *netd_ctx = NULL, *noop_ctx = NULL;
    if (netd->init(&netd_ctx, 1, 16, 2, NULL, NULL, NULL) != ncclSuccess || netd_ctx == NULL ||
        noop->init(&noop_ctx, 1, 16, 2, NULL, NULL, NULL) != ncclSuccess) {
        fprintf(stderr, "bench: plugin init failed\n");
        return 1;
    }
    unlink(path);
    rmdir(dir);
    long hinted = 0;
    for (int k = 0; k < LAUNCHES; k++) { /* share of launches whose bucket carries a hint */
        float t[21], u[21];
        memcpy(t, COST_ALLREDUCE_1M_7x3, sizeof t);
        memcpy(u, t, sizeof u);
        int nch = 0;
        netd->getCollInfo(netd_ctx, (ncclFunc_t)launch_coll[k], launch_bytes[k], 1, (float **)(void *)t, 7, 3,
                          0, &nch);
        hinted += memcmp(t, u, sizeof t) != 0;
    }
    run(netd, netd_ctx, 0, calls / 10 + 1); /* warm up caches and branch predictors */
    run(noop, noop_ctx, 0, calls / 10 + 1);
    /* Chunks of CHUNK calls alternate netd / no-op, so both see the same machine at (nearly) the same
   * time; on a shared machine the fastest chunk is the cleanest measure of each. */
    long chunks = (calls + CHUNK - 1) / CHUNK, n = chunks * repeat;
    double *cn = malloc(sizeof(double) * (size_t)n), *co = malloc(sizeof(double) * (size_t)n);
    double *cr = malloc(sizeof(double) * (size_t)n);
    double netd_ns[MAX_REPEAT] = {0}, noop_ns[MAX_REPEAT] = {0};
    if (cn == NULL || co == NULL || cr == NULL)
        return 1;
    for (int r = 0; r < repeat; r++) {
        for (long c = 0; c < chunks; c++) {
            long first = c * CHUNK, count = first + CHUNK <= calls ? CHUNK : calls - first,
                 k = r * chunks + c;
            cn[k] = run(netd, netd_ctx, first, count);
            co[k] = run(noop, noop_ctx, first, count);
            cr[k] = cn[k] / co[k];
            netd_ns[r] += cn[k] * (double)count / (double)calls;
            noop_ns[r] += co[k] * (double)count / (double)calls;
        }
    }
    netd->finalize(netd_ctx);
    noop->finalize(noop_ctx);
    qsort(cn, (size_t)n, sizeof *cn, cmp);
    qsort(co, (size_t)n, sizeof *co, cmp);
    qsort(cr, (size_t)n, sizeof *cr, cmp);
    double best = cn[0], best_noop = co[0];
    printf("{\n  \"ns_per_getcollinfo\": %.2f,\n  \"ns_per_getcollinfo_noop\": %.2f,\n", best, best_noop);
    printf("  \"ratio\": %.3f,\n", best / best_noop);
    printf("  \"median_ns\": %.2f,\n  \"median_ns_noop\": %.2f,\n  \"ratio_median_paired\": %.3f,\n",
           cn[n / 2], co[n / 2], cr[n / 2]);
    printf("  \"calls\": %ld,\n  \"repeat\": %d,\n  \"chunk_calls\": %d,\n", calls, repeat, CHUNK);
    printf("  \"hinted_launch_fraction\": %.3f,\n", (double)hinted / LAUNCHES);
    print_list("netd_ns_rounds", netd_ns, repeat);
    print_list("noop_ns_rounds", noop_ns, repeat);
    printf("  \"target\": {\"max_ns\": 50, \"max_ratio\": 2.0},\n");
    printf("  \"meets_target\": %s\n}\n", best <= 50.0 && best / best_noop <= 2.0 ? "true" : "false");
    free(cn);
    free(co);
    free(cr);
    return 0;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * test_dlopen.c — the shared object as NCCL loads it: dlopen(RTLD_NOW | RTLD_LOCAL), the
 * versioned symbols v6 -> v5 -> v4 -> v3 -> v2, init / getCollInfo / finalize with NCCL-shaped cost
 * tables, the logger, the environment, and several communicators on several threads.
 *
 *   test_dlopen path/to/libnccl-tuner-netd.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../src/nccl_abi.h"
#include "check.h"
#include "cost_tables.h"
#include "fake_daemon.h"
#include "table_builder.h"

static const ncclTuner_v6_t *v6;
static const ncclTuner_v5_t *v5;
static const ncclTuner_v4_t *v4;
static const ncclTuner_v3_t *v3;
static const ncclTuner_v2_t *v2;
static uint8_t table_buf[NETD_HINTS_TABLE_BYTES] __attribute__((aligned(8)));

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_log[1024];
static int last_level;
static unsigned long last_flags;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                   ...)
{
    (void)file, (void)line;
    pthread_mutex_lock(&log_lock);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_log, sizeof last_log, fmt, ap);
    va_end(ap);
    last_level = level;
    last_flags = flags;
    pthread_mutex_unlock(&log_lock);
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void clear_env(void)
{
    unsetenv("NETD_TUNER");
    unsetenv("NETD_TUNER_SOCKET");
    unsetenv("NETD_TUNER_TIMEOUT_MS");
    unsetenv("NETD_TUNER_TABLE");
    unsetenv("NETD_TUNER_TABLE_SHA256");
}

/* A table: 2 nodes, AllReduce 1 MiB -> prefer TREE (forbid RING); 4 nodes, AllGather 64 KiB ->
 * prefer PAT (forbid RING) with 4 channels. */
static void build_table(void)
{
    tb_init(table_buf, wall_ns(), 60000);
    int ring[] = {1};
    *tb_entry(table_buf, 1, 4, 11) = tb_soft(0, ring, 1);
    struct netd_hint_entry pat = tb_soft(6, ring, 1);
    pat.n_channels = 4;
    *tb_entry(table_buf, 2, 2, 7) = pat;
    tb_seal(table_buf);
}

static int pick_after(const netd_get_coll_info_v4_fn fn, void *ctx, ncclFunc_t coll, size_t bytes,
                      const float *src, int na, int *nch)
{
    float t[21];
    memcpy(t, src, sizeof(float) * (size_t)na * 3);
    *nch = 0;
    CHECK_INT(fn(ctx, coll, bytes, 1, (float **)(void *)t, na, 3, 0, nch), ncclSuccess);
    return nccl_pick(t, na, 3);
}

static void test_symbols(void *lib)
{
    v6 = dlsym(lib, "ncclTunerPlugin_v6");
    v5 = dlsym(lib, "ncclTunerPlugin_v5");
    v4 = dlsym(lib, "ncclTunerPlugin_v4");
    v3 = dlsym(lib, "ncclTunerPlugin_v3");
    v2 = dlsym(lib, "ncclTunerPlugin_v2");
    CHECK(v6 != NULL && v5 != NULL && v4 != NULL && v3 != NULL && v2 != NULL);
    CHECK(dlsym(lib, "ncclTunerPlugin_v1") == NULL);
    CHECK(strcmp(v2->name, "netd") == 0 && v2->init != NULL && v2->getCollInfo != NULL &&
          v2->destroy != NULL);
    CHECK(dlsym(lib, "netd_apply") == NULL); /* hidden */
    CHECK(dlsym(lib, "netd_sha256") == NULL);
    CHECK(strcmp(v6->name, "netd") == 0 && strcmp(v5->name, "netd") == 0);
    CHECK(v6->getChunkSize == NULL);
    CHECK(v6->init != NULL && v6->getCollInfo != NULL && v6->finalize != NULL);
}

static void test_off(void)
{
    clear_env();
    setenv("NETD_TUNER", "off", 1);
    void *ctx = (void *)1;
    CHECK_INT(v6->init(&ctx, 42, 16, 2, logger, NULL, NULL), ncclSuccess);
    CHECK(ctx == NULL);
    CHECK(strstr(last_log, "disabled by NETD_TUNER") != NULL);
    CHECK_INT(last_level, NCCL_LOG_INFO);
    CHECK_INT(last_flags, NCCL_TUNING);
    int nch;
    CHECK_INT(
        pick_after(v6->getCollInfo, ctx, ncclFuncAllReduce, 1 << 20, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        4);
    CHECK_INT(v6->finalize(ctx), ncclSuccess);
    /* malformed: NCCL is left alone, and the process says so once, not per communicator */
    setenv("NETD_TUNER", "bogus", 1);
    CHECK_INT(v6->init(&ctx, 42, 16, 2, logger, NULL, NULL), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "NETD_TUNER=bogus") != NULL && last_level == NCCL_LOG_WARN);
    last_log[0] = '\0';
    unsetenv("NETD_TUNER");
    setenv("NETD_TUNER_TIMEOUT_MS", "soon", 1);
    CHECK_INT(v6->init(&ctx, 43, 16, 2, logger, NULL, NULL), ncclSuccess);
    CHECK_INT(v3->init(16, 2, logger, &ctx), ncclSuccess);
    CHECK(ctx == NULL && last_log[0] == '\0');
    CHECK_INT(v6->init(&ctx, 42, 16, 2, NULL, NULL, NULL), ncclSuccess); /* NULL logger is fine */
    clear_env();
}

static void use_static_table(const char *path)
{
    char sha[65];
    tb_sha256_hex(table_buf, sizeof table_buf, sha);
    CHECK_INT(tb_write(path, table_buf, sizeof table_buf), 0);
    setenv("NETD_TUNER_TABLE", path, 1);
    setenv("NETD_TUNER_TABLE_SHA256", sha, 1);
    setenv("NETD_TUNER_SOCKET", "/tmp/netd-tuner-dlopen-nonexistent/nccl.sock", 1); /* no netd here */
}

static void test_static_all_versions(const char *path)
{
    clear_env();
    build_table();
    use_static_table(path);
    ncclTunerConstants_v5_t constants;
    memset(&constants, 0, sizeof constants);
    ncclNvlDomainInfo_v5_t nvl = {1, 8, 8};
    void *ctx = NULL;
    int nch;
    /* v6 and v5: same entry points */
    CHECK_INT(v6->init(&ctx, 7, 16, 2, logger, &nvl, &constants), ncclSuccess);
    CHECK(ctx != NULL);
    CHECK(strstr(last_log, "latched") != NULL);
    CHECK_INT(
        pick_after(v6->getCollInfo, ctx, ncclFuncAllReduce, 1 << 20, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        1);
    CHECK_INT(nch, 0);
    /* other sizes and collectives: untouched */
    CHECK_INT(
        pick_after(v6->getCollInfo, ctx, ncclFuncAllReduce, 1 << 25, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        4);
    CHECK_INT(
        pick_after(v6->getCollInfo, ctx, ncclFuncBroadcast, 1 << 20, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        4);
    CHECK_INT(pick_after(v6->getCollInfo, ctx, (ncclFunc_t)11 /* AllGatherV */, 1 << 20,
                         &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
              4);
    CHECK_INT(v6->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, NULL, 7, 3, 0, &nch), ncclSuccess);
    CHECK_INT(v6->finalize(ctx), ncclSuccess);
    CHECK_INT(v5->init(&ctx, 7, 4, 4, logger, &nvl, &constants), ncclSuccess);
    CHECK_INT(
        pick_after(v5->getCollInfo, ctx, ncclFuncAllGather, 1 << 16, &COST_ALLGATHER_64K_7x3[0][0], 7, &nch),
        6 * 3 + 2);
    CHECK_INT(nch, 4);
    CHECK_INT(v5->finalize(ctx), ncclSuccess);
    /* v4: no communicator id, but a static table works */
    CHECK_INT(v4->init(16, 2, logger, &ctx), ncclSuccess);
    CHECK(ctx != NULL);
    CHECK_INT(
        pick_after(v4->getCollInfo, ctx, ncclFuncAllReduce, 1 << 20, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        1);
    CHECK_INT(v4->destroy(ctx), ncclSuccess);
    /* v3 on NCCL 2.22's 6x3 table */
    CHECK_INT(v3->init(16, 2, logger, &ctx), ncclSuccess);
    float t[18];
    memcpy(t, COST_ALLREDUCE_256K_6x3, sizeof t);
    nch = 0;
    CHECK_INT(v3->getCollInfo(ctx, ncclFuncAllReduce, 1 << 20, 1, (float **)(void *)t, 6, 3, &nch),
              ncclSuccess);
    CHECK(t[3] == -1.0f && t[4] == -1.0f && t[5] == -1.0f && t[0] == 22.6f);
    CHECK_INT(v3->destroy(ctx), ncclSuccess);
    /* a digest that does not match fails init on every API version */
    setenv("NETD_TUNER_TABLE_SHA256", "0000000000000000000000000000000000000000000000000000000000000000", 1);
    CHECK_INT(v6->init(&ctx, 7, 16, 2, logger, &nvl, &constants), ncclInvalidUsage);
    CHECK(strstr(last_log, "every rank must load the same table") != NULL && last_level == NCCL_LOG_WARN);
    CHECK_INT(v3->init(16, 2, logger, &ctx), ncclInvalidUsage);
    clear_env();
}

static void test_daemon_modes(void)
{
    clear_env();
    build_table();
    ncclTunerConstants_v5_t constants;
    memset(&constants, 0, sizeof constants);
    void *ctx = NULL;
    int nch;
    struct fake_daemon d;
    /* applied */
    CHECK_INT(fake_daemon_start(&d, FAKE_APPLY, table_buf, sizeof table_buf, wall_ns()), 0);
    setenv("NETD_TUNER_SOCKET", d.path, 1);
    CHECK_INT(v6->init(&ctx, 0xABCDEF, 16, 2, logger, NULL, &constants), ncclSuccess);
    CHECK(ctx != NULL);
    CHECK(strstr(last_log, "comm 0000000000abcdef (16 ranks, 2 nodes)") != NULL);
    CHECK_INT(
        pick_after(v6->getCollInfo, ctx, ncclFuncAllReduce, 1 << 20, &COST_ALLREDUCE_1M_7x3[0][0], 7, &nch),
        1);
    CHECK_INT(v6->finalize(ctx), ncclSuccess);
    /* a single-node communicator gets the same table but uses the 1-node slice: nothing there */
    CHECK_INT(v6->init(&ctx, 0xABCDF0, 8, 1, logger, NULL, &constants), ncclSuccess);
    CHECK(ctx == NULL);
    /* v4 never asks the daemon: it has no communicator id */
    int before = d.requests;
    CHECK_INT(v4->init(16, 2, logger, &ctx), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "no communicator id") != NULL);
    fake_daemon_stop(&d);
    CHECK_INT(d.requests, before);
    /* lost verdict after the ACK: NCCL is left alone, with a warning (never an init failure) */
    CHECK_INT(fake_daemon_start(&d, FAKE_CLOSE, NULL, 0, 0), 0);
    setenv("NETD_TUNER_SOCKET", d.path, 1);
    CHECK_INT(v6->init(&ctx, 0xABCDEF, 16, 2, logger, NULL, &constants), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "took the request but") != NULL && last_level == NCCL_LOG_WARN);
    fake_daemon_stop(&d);
    /* a protocol-1 daemon (before an upgrade): NCCL left alone */
    CHECK_INT(fake_daemon_start(&d, FAKE_OLD, NULL, 0, 0), 0);
    setenv("NETD_TUNER_SOCKET", d.path, 1);
    CHECK_INT(v6->init(&ctx, 0xABCDEF, 16, 2, logger, NULL, &constants), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "pin protocol 1") != NULL);
    fake_daemon_stop(&d);
    /* no daemon: untouched */
    CHECK_INT(v5->init(&ctx, 0xABCDEF, 16, 2, logger, NULL, &constants), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "no netd pin") != NULL);
    clear_env();
}

/* NCCL 2.21 (v2): a static table's hard pins become algorithm/protocol; channel counts are
 * clamped to that NCCL's 32; NCCL_ALGO set leaves NCCL alone. */
static void test_v2(const char *path)
{
    clear_env();
    tb_init(table_buf, wall_ns(), 0);
    *tb_entry(table_buf, 1, 4, 13) =
        (struct netd_hint_entry){.algo = 1, .proto = 2, .n_channels = 40, .flags = NETD_HINT_F_PIN};
    *tb_entry(table_buf, 1, 4, 14) =
        (struct netd_hint_entry){.algo = 4, .proto = 2, .flags = NETD_HINT_F_PIN};
    int ring[] = {1};
    *tb_entry(table_buf, 1, 4, 15) = tb_soft(0, ring, 1); /* forbid-only: not expressible in v2 */
    tb_seal(table_buf);
    use_static_table(path);
    void *ctx = NULL;
    CHECK_INT(v2->init(16, 2, logger, &ctx), ncclSuccess);
    CHECK(ctx != NULL);
    int algo = -1, proto = -1, nch = 0;
    CHECK_INT(v2->getCollInfo(ctx, ncclFuncAllReduce, 4 << 20, 0, 0, 1, &algo, &proto, &nch), ncclSuccess);
    CHECK(algo == 1 && proto == 2 && nch == 32);
    algo = proto = -1, nch = 0;
    v2->getCollInfo(ctx, ncclFuncAllReduce, 8 << 20, 0, 0, 1, &algo, &proto, &nch); /* NVLS, unsupported */
    CHECK(algo == -1 && proto == -1 && nch == 0);
    v2->getCollInfo(ctx, ncclFuncAllReduce, 8 << 20, 0, 1, 1, &algo, &proto, &nch); /* NVLS supported */
    CHECK(algo == 4 && proto == 2);
    algo = proto = -1;
    v2->getCollInfo(ctx, ncclFuncAllReduce, 16 << 20, 0, 0, 1, &algo, &proto, &nch);
    CHECK(algo == -1 && proto == -1);
    CHECK_INT(v2->destroy(ctx), ncclSuccess);
    /* the same 40 channels through v5 (NCCL 2.28+, 64 channels): not clamped */
    float t[21];
    memcpy(t, COST_ALLREDUCE_1M_7x3, sizeof t);
    nch = 0;
    CHECK_INT(v5->init(&ctx, 3, 16, 2, logger, NULL, NULL), ncclSuccess);
    v5->getCollInfo(ctx, ncclFuncAllReduce, 4 << 20, 1, (float **)(void *)t, 7, 3, 0, &nch);
    CHECK_INT(nch, 40);
    CHECK_INT(v5->finalize(ctx), ncclSuccess);
    setenv("NCCL_ALGO", "ring", 1);
    CHECK_INT(v2->init(16, 2, logger, &ctx), ncclSuccess);
    CHECK(ctx == NULL && strstr(last_log, "NCCL_ALGO") != NULL);
    unsetenv("NCCL_ALGO");
    clear_env();
}

struct worker {
    const char *table_path;
    int index;
    int failures;
};

/* Each thread is one communicator: init, many launches, finalize. */
static void *communicator(void *arg)
{
    struct worker *w = arg;
    for (int round = 0; round < 20; round++) {
        void *ctx = NULL;
        uint64_t comm = ((uint64_t)w->index << 32) | (uint64_t)round;
        if (v6->init(&ctx, comm, 16, 2, NULL, NULL, NULL) != ncclSuccess || ctx == NULL) {
            w->failures++;
            continue;
        }
        for (int i = 0; i < 5000; i++) {
            float t[21];
            memcpy(t, COST_ALLREDUCE_1M_7x3, sizeof t);
            int nch = 0;
            size_t bytes = (size_t)1 << (10 + (i % 20));
            v6->getCollInfo(ctx, ncclFuncAllReduce, bytes, 1, (float **)(void *)t, 7, 3, 0, &nch);
            int want = (bytes >> 20) == 1 ? 1 : 4;
            if (nccl_pick(t, 7, 3) != want || nch != 0)
                w->failures++;
        }
        v6->finalize(ctx);
    }
    return NULL;
}

static void test_threads(const char *path)
{
    clear_env();
    build_table();
    use_static_table(path);
    pthread_t threads[8];
    struct worker workers[8];
    for (int i = 0; i < 8; i++) {
        workers[i] = (struct worker){.table_path = path, .index = i};
        CHECK_INT(pthread_create(&threads[i], NULL, communicator, &workers[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(threads[i], NULL);
        failures += workers[i].failures;
    }
    CHECK_INT(failures, 0);
    clear_env();
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s path/to/libnccl-tuner-netd.so\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    char dir[] = "/tmp/netd-tuner-dlopen-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char path[128];
    snprintf(path, sizeof path, "%s/job.ndht", dir);
    test_symbols(lib);
    RUN(test_off);
    test_static_all_versions(path);
    printf("%-44s %s\n", "test_static_all_versions", check_failures ? "FAILED" : "ok");
    RUN(test_daemon_modes);
    test_v2(path);
    printf("%-44s %s\n", "test_v2", check_failures ? "FAILED" : "ok");
    test_threads(path);
    printf("%-44s %s\n", "test_threads", check_failures ? "FAILED" : "ok");
    unlink(path);
    rmdir(dir);
    dlclose(lib);
    return CHECK_SUMMARY("test_dlopen");
}

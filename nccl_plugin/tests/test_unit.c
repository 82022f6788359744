// SPDX-License-Identifier: Apache-2.0
/*
 * test_unit.c — the plugin's parts, linked directly: buckets, CRC-32, SHA-256, the cost-table
 * transformation against NCCL's rules, table validation, the environment, static and pinned
 * sources (the latter against a scripted fake daemon). Run under ASan+UBSan and valgrind.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../src/hints.h"
#include "../src/nccl_abi.h"
#include "../src/pin_client.h"
#include "../src/sha256.h"
#include "../src/source.h"
#include "check.h"
#include "cost_tables.h"
#include "fake_daemon.h"
#include "table_builder.h"

static uint8_t table_buf[NETD_HINTS_TABLE_BYTES] __attribute__((aligned(8)));

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_buckets(void)
{
    CHECK_INT(netd_size_bucket(0), 0);
    CHECK_INT(netd_size_bucket(1), 0);
    CHECK_INT(netd_size_bucket(1023), 0);
    CHECK_INT(netd_size_bucket(1024), 1);
    CHECK_INT(netd_size_bucket(2047), 1);
    CHECK_INT(netd_size_bucket(2048), 2);
    CHECK_INT(netd_size_bucket((size_t)1 << 20), 11);
    CHECK_INT(netd_size_bucket(((size_t)1 << 40) - 1), 30);
    CHECK_INT(netd_size_bucket((size_t)1 << 40), 31);
    CHECK_INT(netd_size_bucket(SIZE_MAX), 31);
    CHECK_INT(netd_node_bucket(0), 0);
    CHECK_INT(netd_node_bucket(1), 0);
    CHECK_INT(netd_node_bucket(2), 1);
    CHECK_INT(netd_node_bucket(3), 2);
    CHECK_INT(netd_node_bucket(4), 2);
    CHECK_INT(netd_node_bucket(5), 3);
    CHECK_INT(netd_node_bucket(1024), 10);
    CHECK_INT(netd_node_bucket(1025), 11);
    CHECK_INT(netd_node_bucket(1000000), 11);
}

static void test_crc32(void)
{
    CHECK_INT(netd_crc32(0, "123456789", 9), 0xCBF43926U);
    CHECK_INT(netd_crc32(netd_crc32(0, "1234", 4), "56789", 5), 0xCBF43926U);
    CHECK_INT(netd_crc32(0, "", 0), 0);
}

static void check_sha(const char *msg, size_t len, const char *want)
{
    char hex[65];
    tb_sha256_hex(msg, len, hex);
    CHECK(strcmp(hex, want) == 0);
}

static void test_sha256(void)
{
    check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    check_sha(two, strlen(two), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    check_sha(million, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
    char block55[56], block64[64]; /* block55 holds 56 bytes */
    memset(block55, 'b', sizeof block55);
    memset(block64, 'c', sizeof block64);
    /* padding edge cases: 55 bytes fits one block, 56 needs two (values from Python's hashlib) */
    check_sha(block55, 55, "eb2c86e932179f4ba13fe8715a26124b77d6bad290b9b4c1cc140cf633300c19");
    check_sha(block55, 56, "a5fc6e203a4c2b657d0d153885932414b2ffc6a93f0f8bf8b3183315e5a7212c");
    check_sha(block64, 64, "52b6419d27bd7f547cee3b92f8c17a908b8a49601ecbec161e5030de1dfe9e0a");
}

static void copy_table(float *dst, const float *src, int n)
{
    memcpy(dst, src, sizeof(float) * (size_t)n);
}

static void test_apply_soft_preference(void)
{
    float t[21];
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    CHECK_INT(nccl_pick(t, 7, 3), 1 * 3 + 1); /* NCCL: RING/LL128 */
    /* prefer TREE by forbidding RING: NCCL now picks among TREE's protocols and NVLS */
    int ring[] = {1};
    struct netd_hint_entry e = tb_soft(0, ring, 1);
    int nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(t[3] == -1.0f && t[4] == -1.0f && t[5] == -1.0f);
    CHECK(t[0] == 48.2f && t[1] == 39.9f && t[2] == 44.1f && t[14] == 52.0f);
    CHECK_INT(nccl_pick(t, 7, 3), 0 * 3 + 1); /* TREE/LL128 */
    CHECK_INT(nch, 0);
}

static void test_apply_unavailable_preference_changes_nothing(void)
{
    float t[21], before[21];
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    copy_table(before, t, 21);
    int losers[] = {0, 1};
    struct netd_hint_entry e = tb_soft(6 /* PAT: -1 everywhere here */, losers, 2);
    e.n_channels = 8;
    int nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(memcmp(t, before, sizeof t) == 0);
    CHECK_INT(nch, 0);
}

static void test_apply_never_empties(void)
{
    float t[21], before[21];
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    copy_table(before, t, 21);
    struct netd_hint_entry e = {.algo = -1, .proto = -1, .forbid = (1U << 21) - 1U};
    int nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(memcmp(t, before, sizeof t) == 0); /* forbidding everything would fail the collective */
    CHECK(nccl_pick(t, 7, 3) >= 0);
    /* unconditional forbid that leaves something: TREE and RING gone, NVLS remains */
    e.forbid = 0x3FU;
    e.n_channels = 4;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK_INT(nccl_pick(t, 7, 3), 4 * 3 + 2);
    CHECK_INT(nch, 4);
}

static void test_apply_pin(void)
{
    float t[21];
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    struct netd_hint_entry e = {.algo = 1, .proto = 2, .flags = NETD_HINT_F_PIN, .n_channels = 16};
    int nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(t[5] == 0.0f);
    CHECK_INT(nccl_pick(t, 7, 3), 1 * 3 + 2);
    CHECK_INT(nch, 16);
    /* proto -1: the cheapest available protocol of the algorithm */
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    e = (struct netd_hint_entry){.algo = 0, .proto = -1, .flags = NETD_HINT_F_PIN};
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(t[1] == 0.0f && t[0] == 48.2f && t[2] == 44.1f);
    /* pinning an unavailable pair never raises it */
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    e = (struct netd_hint_entry){.algo = 4, .proto = 0, .flags = NETD_HINT_F_PIN, .n_channels = 2};
    nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(t[12] == -1.0f);
    CHECK_INT(nch, 0);
    CHECK_INT(nccl_pick(t, 7, 3), 1 * 3 + 1);
}

static void test_apply_old_layouts(void)
{
    /* 2.22: 6 algorithms. A PAT hint is skipped; forbid bits of PAT are ignored; stride stays 3. */
    float t[18], before[18];
    copy_table(t, &COST_ALLREDUCE_256K_6x3[0][0], 18);
    copy_table(before, t, 18);
    int losers[] = {1};
    struct netd_hint_entry pat = tb_soft(6, losers, 1);
    int nch = 0;
    netd_apply(&pat, t, 6, 3, &nch);
    CHECK(memcmp(t, before, sizeof t) == 0);
    struct netd_hint_entry e = tb_soft(0, losers, 1);
    e.forbid |= 7U << 18; /* PAT bits: absent in this table */
    netd_apply(&e, t, 6, 3, &nch);
    CHECK(t[3] == -1.0f && t[4] == -1.0f && t[5] == -1.0f);
    CHECK(t[0] == 22.6f && t[6] == -1.0f);
    CHECK_INT(nccl_pick(t, 6, 3), 0);
    /* a hypothetical 2-protocol table: stride 2, protocol 2 does not exist */
    float u[14];
    for (int i = 0; i < 14; i++)
        u[i] = 10.0f + (float)i;
    struct netd_hint_entry f = tb_soft(0, losers, 1);
    netd_apply(&f, u, 7, 2, &nch);
    CHECK(u[0] == 10.0f && u[1] == 11.0f && u[2] == -1.0f && u[3] == -1.0f && u[4] == 14.0f);
    /* degenerate sizes */
    netd_apply(&f, u, 0, 3, &nch);
    netd_apply(&f, u, 7, 0, &nch);
    CHECK(u[4] == 14.0f);
}

static void test_apply_nan_and_negative(void)
{
    float t[21];
    copy_table(t, &COST_ALLREDUCE_1M_7x3[0][0], 21);
    t[3] = NAN;   /* not >= 0: treated as unavailable, never touched */
    t[4] = -2.0f; /* any negative excludes; it is not raised either */
    int losers[] = {0};
    struct netd_hint_entry e = tb_soft(1, losers, 1);
    e.flags = NETD_HINT_F_PIN;
    int nch = 0;
    netd_apply(&e, t, 7, 3, &nch);
    CHECK(isnan(t[3]) && t[4] == -2.0f);
    CHECK(t[5] == 0.0f); /* RING/SIMPLE was the only available RING pair */
    CHECK(t[0] == -1.0f && t[1] == -1.0f && t[2] == -1.0f);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Property test: for random NCCL tables and random valid entries, NCCL's rules always hold. */
static void test_apply_properties(void)
{
    int violations = 0, mismatches = 0;
    for (int iter = 0; iter < 200000; iter++) {
        int na = 6 + (int)(rnd() % 2), np = 3;
        float t[21], before[21];
        for (int i = 0; i < na * np; i++) {
            uint32_t r = rnd() % 8;
            t[i] = r < 2                     ? -1.0f
                   : r == 2                  ? (iter % 2 ? -2.0f : NAN)
                   : r == 3 && iter % 7 == 0 ? 0.0f
                                             : (float)(rnd() % 10000) / 10.0f;
        }
        copy_table(before, t, na * np);
        struct netd_hint_entry e = {.algo = (int8_t)((int)(rnd() % 8) - 1), .proto = -1};
        if (e.algo >= 0) {
            e.proto = (int8_t)((int)(rnd() % 4) - 1);
            e.flags = rnd() % 2 ? NETD_HINT_F_PIN : 0;
        }
        /* half dense random masks, half whole algorithms (what the policy writes) */
        e.forbid = iter % 2 ? rnd() & ((1U << 21) - 1U)
                            : (7U << (3 * (rnd() % 7))) | (rnd() % 3 ? 0 : 7U << (3 * (rnd() % 7)));
        e.n_channels = (uint8_t)(rnd() % 3 == 0 ? 1 + rnd() % 64 : 0);
        int nch = 0;
        float fast[21];
        copy_table(fast, before, na * np);
        struct netd_fast_entry compiled;
        netd_compile(&e, &compiled);
        int fast_nch = 0;
        netd_apply_fast(&compiled, fast, na, &fast_nch); /* as the plugin calls it: every entry */
        netd_apply(&e, t, na, np, &nch);
        /* the compiled launch path and the reference agree bit for bit */
        if (memcmp(fast, t, sizeof(float) * (size_t)(na * np)) != 0 || fast_nch != nch)
            mismatches++;
        int had = 0, has = 0;
        for (int i = 0; i < na * np; i++) {
            had += before[i] >= 0.0f;
            has += t[i] >= 0.0f;
            int was_available = before[i] >= 0.0f; /* NaN and negatives are unavailable */
            if (!was_available && memcmp(&t[i], &before[i], sizeof t[i]) != 0)
                violations++; /* touched */
            if (was_available && t[i] != before[i] && t[i] != -1.0f && t[i] != 0.0f)
                violations++;
        }
        if (had > 0 && has == 0)
            violations++; /* emptied */
        if (nch < 0 || nch > 64)
            violations++;
    }
    CHECK_INT(violations, 0);
    CHECK_INT(mismatches, 0);
}

static void build_valid_table(int64_t generated_at, uint32_t valid_for_ms)
{
    tb_init(table_buf, generated_at, valid_for_ms);
    int ring[] = {1}, tree[] = {0};
    *tb_entry(table_buf, 1, 4, 11) = tb_soft(0, ring, 1); /* 2 nodes, AllReduce, 1 MiB: TREE */
    *tb_entry(table_buf, 1, 4, 20) = tb_soft(1, tree, 1); /* 2 nodes, AllReduce, 512 MiB: RING */
    struct netd_hint_entry pin = {.algo = 1, .proto = 2, .flags = NETD_HINT_F_PIN, .n_channels = 8};
    *tb_entry(table_buf, 2, 2, 6) = pin;
    tb_seal(table_buf);
}

static int validate(const void *buf, size_t len)
{
    char why[160];
    return netd_table_validate(buf, len, why, sizeof why);
}

static void corrupt_and_check(size_t offset, uint8_t value, int reseal)
{
    static uint8_t copy[NETD_HINTS_TABLE_BYTES];
    memcpy(copy, table_buf, sizeof copy);
    /* Unsealed, the byte must change for the CRC to break: flip bits rather than store a value that
     * a clock-derived byte (the timestamp) can already hold one run in 256. */
    copy[offset] = reseal ? value : (uint8_t)(copy[offset] ^ value);
    if (reseal)
        tb_seal(copy);
    CHECK(validate(copy, sizeof copy) != 0);
}

static void test_table_validation(void)
{
    build_valid_table(wall_ns(), 30000);
    CHECK_INT(validate(table_buf, sizeof table_buf), 0);
    CHECK(validate(NULL, 0) != 0);
    CHECK(validate(table_buf, 10) != 0);                   /* truncated header */
    CHECK(validate(table_buf, sizeof table_buf - 1) != 0); /* truncated entries */
    static uint8_t longer[NETD_HINTS_TABLE_BYTES + 8];
    memcpy(longer, table_buf, sizeof table_buf);
    CHECK(validate(longer, sizeof longer) != 0); /* trailing bytes */
    corrupt_and_check(0, 0x00, 1);               /* magic */
    corrupt_and_check(4, 2, 1);                  /* layout version */
    corrupt_and_check(6, 32, 1);                 /* header size */
    corrupt_and_check(12, 6, 1);                 /* collectives */
    corrupt_and_check(14, 16, 1);                /* size buckets */
    corrupt_and_check(20, 11, 1);                /* size log2 min */
    corrupt_and_check(22, 1, 1);                 /* flags */
    corrupt_and_check(44, 1, 1);                 /* reserved0 */
    corrupt_and_check(64 + 100, 0x55, 0);        /* entry bytes, CRC no longer matches */
    corrupt_and_check(33, 0x55, 0);              /* header bytes, CRC no longer matches */
    size_t e0 = 64 + 8 * 40;
    corrupt_and_check(e0 + 0, 7, 1);               /* algo 7 */
    corrupt_and_check(e0 + 1, 3, 1);               /* proto 3 (with algo -1 too) */
    corrupt_and_check(e0 + 2, 65, 1);              /* 65 channels */
    corrupt_and_check(e0 + 3, 2, 1);               /* unknown flag */
    corrupt_and_check(e0 + 3, NETD_HINT_F_PIN, 1); /* pin without an algorithm */
    corrupt_and_check(e0 + 6, 0x20, 1);            /* forbid bit 21 */
}

static void test_table_freshness_and_select(void)
{
    int64_t t0 = 1700000000LL * 1000000000LL;
    build_valid_table(t0, 30000);
    struct netd_hints_header h;
    memcpy(&h, table_buf, sizeof h);
    CHECK(netd_table_fresh(&h, t0 + 29LL * 1000000000));
    CHECK(!netd_table_fresh(&h, t0 + 31LL * 1000000000));
    CHECK(netd_table_fresh(&h, t0 - 1000000000)); /* small clock skew between producer and pinner */
    CHECK(!netd_table_fresh(&h, t0 - 31LL * 1000000000));
    h.valid_for_ms = 0;
    CHECK(netd_table_fresh(&h, t0 + 86400LL * 1000000000)); /* never stale */
    struct netd_slice s;
    CHECK_INT(netd_table_select(table_buf, 2, &s), 2);
    CHECK_INT(s.e[4][11].algo, 0);
    CHECK_INT(s.e[4][20].algo, 1);
    CHECK_INT(s.e[2][6].algo, -1);
    CHECK_INT(netd_table_select(table_buf, 4, &s), 1);
    CHECK_INT(s.e[2][6].n_channels, 8);
    CHECK_INT(netd_table_select(table_buf, 1, &s), 0);
}

static void test_settings(void)
{
    struct netd_settings s;
    unsetenv("NETD_TUNER");
    unsetenv("NETD_TUNER_SOCKET");
    unsetenv("NETD_TUNER_TIMEOUT_MS");
    unsetenv("NETD_TUNER_TABLE");
    unsetenv("NETD_TUNER_TABLE_SHA256");
    CHECK_INT(netd_settings_load(&s), 0);
    CHECK(s.enabled && s.timeout_ms == NETD_DEFAULT_TIMEOUT_MS && strcmp(s.socket, NETD_DEFAULT_SOCKET) == 0);
    CHECK(s.table[0] == '\0' && s.note[0] == '\0');
    setenv("NETD_TUNER", "OFF", 1);
    CHECK(netd_settings_load(&s) == 0 && !s.enabled);
    setenv("NETD_TUNER", "0", 1);
    CHECK(netd_settings_load(&s) == 0 && !s.enabled);
    /* off is read first: nothing else is parsed, however malformed */
    setenv("NETD_TUNER_TIMEOUT_MS", "garbage", 1);
    setenv("NETD_TUNER_TABLE", "/x", 1);
    CHECK(netd_settings_load(&s) == 0 && !s.enabled && s.error[0] == '\0' && s.table[0] == '\0');
    unsetenv("NETD_TUNER_TABLE");
    unsetenv("NETD_TUNER_TIMEOUT_MS");
    setenv("NETD_TUNER", "on", 1);
    CHECK(netd_settings_load(&s) == 0 && s.enabled);
    setenv("NETD_TUNER", "maybe", 1);
    CHECK(netd_settings_load(&s) != 0 && !s.enabled && strstr(s.error, "NETD_TUNER=maybe") != NULL);
    unsetenv("NETD_TUNER");
    setenv("NETD_TUNER_TIMEOUT_MS", "250", 1);
    CHECK(netd_settings_load(&s) == 0 && s.timeout_ms == 250 && s.note[0] == '\0');
    /* out of range: clamped (and noted), not refused */
    const char *clamp_in[] = {"50", "0", "999999999", "99999999999999999999999"};
    const unsigned clamp_out[] = {NETD_MIN_TIMEOUT_MS, NETD_MIN_TIMEOUT_MS, NETD_MAX_TIMEOUT_MS,
                                  NETD_MAX_TIMEOUT_MS};
    for (size_t i = 0; i < sizeof clamp_in / sizeof *clamp_in; i++) {
        setenv("NETD_TUNER_TIMEOUT_MS", clamp_in[i], 1);
        CHECK(netd_settings_load(&s) == 0 && s.timeout_ms == clamp_out[i] &&
              strstr(s.note, "clamped") != NULL);
    }
    const char *bad_timeouts[] = {"abc", "10s", "-1", " 5"};
    for (size_t i = 0; i < sizeof bad_timeouts / sizeof *bad_timeouts; i++) {
        setenv("NETD_TUNER_TIMEOUT_MS", bad_timeouts[i], 1);
        CHECK(netd_settings_load(&s) != 0 && strstr(s.error, "NETD_TUNER_TIMEOUT_MS") != NULL);
    }
    unsetenv("NETD_TUNER_TIMEOUT_MS");
    setenv("NETD_TUNER_TABLE", "/tmp/x.ndht", 1);
    CHECK(netd_settings_load(&s) != 0 && strstr(s.error, "NETD_TUNER_TABLE is set without") != NULL);
    setenv("NETD_TUNER_TABLE_SHA256", "abc", 1);
    CHECK(netd_settings_load(&s) != 0 && strstr(s.error, "64 hex") != NULL);
    setenv("NETD_TUNER_TABLE_SHA256", "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855", 1);
    CHECK(netd_settings_load(&s) == 0 &&
          strcmp(s.table_sha256, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0);
    /* the pin's static digest: the first 8 digest bytes, little-endian */
    CHECK(netd_digest64(s.table_sha256) == 0x141CFC9842C4B0E3ULL);
    unsetenv("NETD_TUNER_TABLE");
    CHECK(netd_settings_load(&s) != 0 && strstr(s.error, "NETD_TUNER_TABLE_SHA256 is set without") != NULL);
    unsetenv("NETD_TUNER_TABLE_SHA256");
}

static void static_settings(struct netd_settings *s, const char *path, const char *sha)
{
    memset(s, 0, sizeof *s);
    s->enabled = 1;
    snprintf(s->table, sizeof s->table, "%s", path);
    snprintf(s->table_sha256, sizeof s->table_sha256, "%s", sha);
}

static void test_static_source(void)
{
    char dir[] = "/tmp/netd-tuner-static-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], sha[65];
    snprintf(path, sizeof path, "%s/job.ndht", dir);
    build_valid_table(wall_ns() - 86400LL * 1000000000, 1000); /* old, but static tables do not expire */
    CHECK_INT(tb_write(path, table_buf, sizeof table_buf), 0);
    tb_sha256_hex(table_buf, sizeof table_buf, sha);
    struct netd_settings s;
    struct netd_slice slice;
    struct netd_obtained got;
    static_settings(&s, path, sha);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_APPLY);
    CHECK_INT(got.active_entries, 2);
    CHECK_INT(slice.e[4][11].algo, 0);
    /* the same bytes but another digest: every rank must hold the same table */
    char other[65];
    memcpy(other, sha, sizeof other);
    other[0] = other[0] == '0' ? '1' : '0';
    static_settings(&s, path, other);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_FAIL);
    CHECK(strstr(got.message, "SHA-256") != NULL);
    /* truncated file: its digest no longer matches */
    CHECK_INT(tb_write(path, table_buf, sizeof table_buf - 100), 0);
    static_settings(&s, path, sha);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_FAIL);
    /* a corrupt table pinned with its own digest: identical on every rank, so NCCL is untouched */
    static uint8_t bad[NETD_HINTS_TABLE_BYTES];
    memcpy(bad, table_buf, sizeof bad);
    bad[200] ^= 0xFF;
    CHECK_INT(tb_write(path, bad, sizeof bad), 0);
    tb_sha256_hex(bad, sizeof bad, other);
    static_settings(&s, path, other);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_UNTOUCHED);
    CHECK(strstr(got.message, "CRC-32") != NULL);
    /* absent file and a directory */
    unlink(path);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_FAIL);
    CHECK(strstr(got.message, "No such file") != NULL);
    static_settings(&s, dir, sha);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_FAIL);
    /* a FIFO nobody writes to: opening or reading it would block init forever */
    CHECK_INT(mkfifo(path, 0600), 0);
    static_settings(&s, path, sha);
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_FAIL);
    CHECK(strstr(got.message, "not a regular file") != NULL);
    unlink(path);
    static_settings(&s, "/dev/zero", sha); /* a device: endless bytes */
    netd_obtain_static(&s, 2, &slice, &got);
    CHECK(got.verdict == NETD_FAIL && strstr(got.message, "not a regular file") != NULL);
    rmdir(dir);
}

static void pinned_settings(struct netd_settings *s, const char *socket, unsigned timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->enabled = 1;
    s->timeout_ms = timeout_ms;
    snprintf(s->socket, sizeof s->socket, "%s", socket);
}

static int64_t mono_ms(void)
{
    return netd_mono_ns() / 1000000;
}

static enum netd_verdict ask_fake(enum fake_mode mode, const uint8_t *table, uint32_t size, int64_t pinned_at,
                                  struct netd_obtained *got, struct netd_pin_request *seen)
{
    struct fake_daemon d;
    CHECK_INT(fake_daemon_start(&d, mode, table, size, pinned_at), 0);
    struct netd_settings s;
    struct netd_slice slice;
    pinned_settings(&s, d.path, 300);
    netd_obtain_pinned(&s, 0xC0FFEE0123456789ULL, 16, 2, &slice, got);
    fake_daemon_stop(&d);
    CHECK_INT(d.requests, 1);
    if (seen != NULL)
        *seen = d.last;
    return got->verdict;
}

static void test_pinned_source(void)
{
    int64_t now = wall_ns();
    build_valid_table(now, 30000);
    struct netd_obtained got;
    struct netd_pin_request seen;
    int64_t before = netd_mono_ns();
    CHECK_INT(ask_fake(FAKE_APPLY, table_buf, sizeof table_buf, now + 1000000, &got, &seen), NETD_APPLY);
    CHECK_INT(got.active_entries, 2);
    CHECK(seen.magic == NETD_PIN_REQUEST_MAGIC && seen.version == NETD_PIN_PROTO_VERSION && seen.size == 72);
    CHECK(seen.comm_id == 0xC0FFEE0123456789ULL && seen.n_ranks == 16 && seen.n_nodes == 2);
    CHECK(seen.member != 0 && seen.timeout_ms == 300 && seen.pid == (uint32_t)getpid());
    CHECK(seen.static_digest == 0);
    /* both fences on the shared monotonic clock: half the budget to be taken, all of it for the verdict */
    CHECK(seen.register_by_ns >= before + 150000000LL && seen.register_by_ns <= netd_mono_ns() + 150000000LL);
    CHECK_INT(seen.deadline_ns - seen.register_by_ns, 150000000LL);
    /* verdicts every rank shares: NCCL untouched */
    CHECK_INT(ask_fake(FAKE_NEUTRAL, NULL, 0, now, &got, NULL), NETD_UNTOUCHED);
    CHECK(strstr(got.message, "only 1 of 2 ranks asked") != NULL);
    CHECK_INT(ask_fake(FAKE_APPLY, table_buf, sizeof table_buf, now + 31LL * 1000000000, &got, NULL),
              NETD_UNTOUCHED); /* stale when pinned */
    CHECK(strstr(got.message, "stale") != NULL);
    CHECK_INT(ask_fake(FAKE_APPLY, table_buf, 1000, now, &got, NULL), NETD_UNTOUCHED); /* truncated table */
    static uint8_t bad[NETD_HINTS_TABLE_BYTES];
    memcpy(bad, table_buf, sizeof bad);
    bad[300] ^= 1;
    CHECK_INT(ask_fake(FAKE_APPLY, bad, sizeof bad, now, &got, NULL), NETD_UNTOUCHED); /* corrupt */
    CHECK_INT(ask_fake(FAKE_OVERSIZE, table_buf, sizeof table_buf, now, &got, NULL),
              NETD_UNTOUCHED); /* oversized */
    /* nothing the daemon does fails init: a static table every rank fails alike is the only way */
    enum fake_mode never_fail[] = {FAKE_FAIL,       FAKE_GARBAGE, FAKE_CLOSE, FAKE_SILENT, FAKE_CUT_TABLE,
                                   FAKE_WRONG_COMM, FAKE_NO_ACK,  FAKE_OLD,   FAKE_NEWER,  FAKE_REFUSE};
    for (size_t i = 0; i < sizeof never_fail / sizeof *never_fail; i++) {
        CHECK_INT(ask_fake(never_fail[i], table_buf, sizeof table_buf, now, &got, NULL), NETD_UNTOUCHED);
    }
    /* ACKed then silent: possibly registered, verdict lost; said as a warning */
    ask_fake(FAKE_SILENT, NULL, 0, now, &got, NULL);
    CHECK(got.level == NCCL_LOG_WARN && strstr(got.message, "no answer within the timeout") != NULL);
    /* never ACKed: provably unregistered */
    ask_fake(FAKE_NO_ACK, NULL, 0, now, &got, NULL);
    CHECK(strstr(got.message, "never registered") != NULL && strstr(got.message, "no ACK") != NULL);
    /* another protocol version, older or newer: unregistered, never a failure */
    ask_fake(FAKE_OLD, NULL, 0, now, &got, NULL);
    CHECK(strstr(got.message, "pin protocol 1, this plugin 2") != NULL);
    ask_fake(FAKE_NEWER, NULL, 0, now, &got, NULL);
    CHECK(strstr(got.message, "pin protocol 3, this plugin 2") != NULL);
    /* no daemon at all: never registered, so untouched (and the pin cannot complete elsewhere) */
    struct netd_settings s;
    struct netd_slice slice;
    pinned_settings(&s, "/tmp/netd-tuner-test-nonexistent/nccl.sock", 300);
    netd_obtain_pinned(&s, 1, 2, 2, &slice, &got);
    CHECK_INT(got.verdict, NETD_UNTOUCHED);
    CHECK(strstr(got.message, "never registered") != NULL);
}

/* A daemon that listens but never accepts: the first connections sit in its queue (the request
 * is sent, no ACK ever comes), later ones find the queue full. Each costs at most the timeout. */
static void test_wedged_daemon(void)
{
    struct fake_daemon d;
    CHECK_INT(fake_daemon_start(&d, FAKE_WEDGED, NULL, 0, 0), 0);
    struct netd_settings s;
    struct netd_slice slice;
    struct netd_obtained got;
    pinned_settings(&s, d.path, 200);
    int queued = 0, full = 0;
    for (int i = 0; i < 4; i++) {
        int64_t t0 = mono_ms();
        netd_obtain_pinned(&s, 9, 4, 2, &slice, &got);
        int64_t took = mono_ms() - t0;
        CHECK_INT(got.verdict, NETD_UNTOUCHED);
        /* bounded: the pre-fix client blocked in connect() forever; 10x the budget is "bounded" */
        CHECK(took < 2000);
        queued += strstr(got.message, "no ACK") != NULL;
        full += strstr(got.message, "connect") != NULL;
    }
    CHECK(queued >= 1 && full >= 1 && queued + full == 4);
    fake_daemon_stop(&d);
}

/* A static table with a daemon: registered by digest, applied only when the pin says every rank
 * pinned the same file; refused (NEUTRAL) otherwise; applied alone only where no netd runs. */
static void test_static_with_daemon(void)
{
    char dir[] = "/tmp/netd-tuner-mixed-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128], sha[65];
    snprintf(path, sizeof path, "%s/job.ndht", dir);
    build_valid_table(wall_ns(), 0);
    CHECK_INT(tb_write(path, table_buf, sizeof table_buf), 0);
    tb_sha256_hex(table_buf, sizeof table_buf, sha);
    struct netd_settings s;
    struct netd_slice slice;
    struct netd_obtained got;
    struct fake_daemon d;
    enum fake_mode modes[] = {FAKE_STATIC_OK, FAKE_NEUTRAL, FAKE_APPLY};
    enum netd_verdict want[] = {NETD_APPLY, NETD_UNTOUCHED, NETD_UNTOUCHED}; /* a daemon table is not ours */
    for (int i = 0; i < 3; i++) {
        CHECK_INT(fake_daemon_start(&d, modes[i], table_buf, sizeof table_buf, wall_ns()), 0);
        static_settings(&s, path, sha);
        snprintf(s.socket, sizeof s.socket, "%s", d.path);
        s.timeout_ms = 300;
        netd_obtain_pinned(&s, 5, 4, 2, &slice, &got);
        fake_daemon_stop(&d);
        CHECK_INT(got.verdict, want[i]);
        CHECK(d.requests == 1 && d.last.static_digest == (netd_digest64(sha) | 1U));
    }
    static_settings(&s, path, sha);
    snprintf(s.socket, sizeof s.socket, "%s/no-netd.sock", dir);
    s.timeout_ms = 300;
    netd_obtain_pinned(&s, 5, 4, 2, &slice, &got);
    CHECK(got.verdict == NETD_APPLY && strstr(got.message, "no netd here") != NULL);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    RUN(test_buckets);
    RUN(test_crc32);
    RUN(test_sha256);
    RUN(test_apply_soft_preference);
    RUN(test_apply_unavailable_preference_changes_nothing);
    RUN(test_apply_never_empties);
    RUN(test_apply_pin);
    RUN(test_apply_old_layouts);
    RUN(test_apply_nan_and_negative);
    RUN(test_apply_properties);
    RUN(test_table_validation);
    RUN(test_table_freshness_and_select);
    RUN(test_settings);
    RUN(test_static_source);
    RUN(test_pinned_source);
    RUN(test_wedged_daemon);
    RUN(test_static_with_daemon);
    return CHECK_SUMMARY("test_unit");
}

// SPDX-License-Identifier: Apache-2.0
/* check.h — a minimal test harness: CHECK counts failures and goes on; main returns non-zero. */
#ifndef NETD_TEST_CHECK_H_
#define NETD_TEST_CHECK_H_

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        check_count++;                                                               \
        if (!(cond)) {                                                               \
            check_failures++;                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_INT(a, b)                                                                                   \
    do {                                                                                                  \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                                   \
        check_count++;                                                                                    \
        if (check_a_ != check_b_) {                                                                       \
            check_failures++;                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, \
                    check_a_, check_b_);                                                                  \
        }                                                                                                 \
    } while (0)

#define RUN(test)                                                                       \
    do {                                                                                \
        int check_before_ = check_failures;                                             \
        test();                                                                         \
        printf("%-44s %s\n", #test, check_failures == check_before_ ? "ok" : "FAILED"); \
    } while (0)

#define CHECK_SUMMARY(name) \
    (printf("%s: %d checks, %d failed\n", name, check_count, check_failures), check_failures != 0)

#endif

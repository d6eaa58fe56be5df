/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* unit.h - what every cmocka unit test includes */
#ifndef TIER_UNIT_H
#define TIER_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

/* Run a cmocka group with TAP output (for automake's tap-driver). */
#define UNIT_RUN(tests) \
    (cmocka_set_message_output (CM_OUTPUT_TAP), \
     cmocka_run_group_tests (tests, NULL, NULL))

/*
 * One test, or a few: TIER_TEST_FILTER=PATTERN runs only the tests whose
 * name matches (cmocka's * and ? wildcards), TIER_TEST_SKIP=PATTERN skips
 * those that match, e.g.
 *
 *   TIER_TEST_FILTER='test_resolve*' make -C _build/main/tests/unit check \
 *       TESTS=test_policy
 *
 * Set before main () runs, so that it applies however main () runs its
 * group (UNIT_RUN or cmocka_run_group_tests with a setup).
 */
__attribute__ ((constructor)) static void unit_filter_from_env (void)
{
    const char *p;

    if ((p = getenv ("TIER_TEST_FILTER")) && *p)
        cmocka_set_test_filter (p);
    if ((p = getenv ("TIER_TEST_SKIP")) && *p)
        cmocka_set_skip_filter (p);
}

#endif /* !TIER_UNIT_H */

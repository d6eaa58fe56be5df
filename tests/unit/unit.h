/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* unit.h - what every cmocka unit test includes */
#ifndef TIER_UNIT_H
#define TIER_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* Run a cmocka group with TAP output (for automake's tap-driver). */
#define UNIT_RUN(tests) \
    (cmocka_set_message_output (CM_OUTPUT_TAP), \
     cmocka_run_group_tests (tests, NULL, NULL))

#endif /* !TIER_UNIT_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_trim.c - the CEFT benchmark's trimmed mean */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "bench/trim.h"
#include "unit.h"

#include <errno.h>
#include <math.h>

static void test_trimmed (void **state)
{
    double v[20], m;

    /* 1..20 shuffled: dropping 5 each side leaves 6..15, mean 10.5 */
    for (int i = 0; i < 20; i++)
        v[i] = (double) ((i * 7) % 20 + 1);
    assert_int_equal (trimmed_mean (v, 20, 5, &m), 0);
    assert_true (fabs (m - 10.5) < 1e-12);
    /* outliers do not move it */
    for (int i = 0; i < 20; i++)
        v[i] = 100;
    v[0] = 1e9; v[1] = 1e9; v[2] = -1e9; v[3] = 0; v[4] = 1e6;
    assert_int_equal (trimmed_mean (v, 20, 5, &m), 0);
    assert_true (fabs (m - 100) < 1e-12);
    /* no cut: the plain mean */
    double w[3] = { 1, 2, 6 };
    assert_int_equal (trimmed_mean (w, 3, 0, &m), 0);
    assert_true (fabs (m - 3) < 1e-12);
    /* too few values */
    errno = 0;
    assert_int_equal (trimmed_mean (w, 3, 2, &m), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (trimmed_mean (v, 10, 5, &m), -1);
    assert_int_equal (trimmed_mean (v, 11, 5, &m), 0);
    /* NaN is refused */
    double x[3] = { 1, NAN, 3 };
    assert_int_equal (trimmed_mean (x, 3, 0, &m), -1);
}

static void test_median (void **state)
{
    double a[5] = { 5, 1, 4, 2, 3 }, b[4] = { 4, 1, 3, 2 }, m;

    assert_int_equal (median (a, 5, &m), 0);
    assert_true (m == 3);
    assert_int_equal (median (b, 4, &m), 0);
    assert_true (m == 2.5);
    assert_int_equal (median (b, 0, &m), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_trimmed),
        cmocka_unit_test (test_median),
    };
    return UNIT_RUN (tests);
}

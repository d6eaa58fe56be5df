/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_clock.c - lib/clock.h: the monotonic clock and deadlines
 *
 * clock_gettime is caught at link time (-Wl,--wrap=clock_gettime): the
 * test sees which clock is asked and, when it sets one, gives its own
 * time, so the deadline arithmetic is checked exactly.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/clock.h"
#include "unit.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static struct {
    bool set; /* give now instead of the real time */
    struct timespec now;
    int calls;
    clockid_t last;
} fk;

int __real_clock_gettime (clockid_t id, struct timespec *ts);
int __wrap_clock_gettime (clockid_t id, struct timespec *ts);

int __wrap_clock_gettime (clockid_t id, struct timespec *ts)
{
    fk.calls++;
    fk.last = id;
    if (!fk.set)
        return __real_clock_gettime (id, ts);
    *ts = fk.now;
    return 0;
}

static void at (int64_t sec, long nsec)
{
    fk.set = true;
    fk.now.tv_sec = (time_t) sec;
    fk.now.tv_nsec = nsec;
}

static int setup (void **state)
{
    (void) state;
    fk.set = false;
    fk.calls = 0;
    fk.last = (clockid_t) -1;
    return 0;
}

/* CLOCK_MONOTONIC, never the wall clock; it never goes back */
static void test_monotonic (void **state)
{
    int64_t a, b;

    (void) state;
    a = tier_now_ns ();
    assert_int_equal (fk.last, CLOCK_MONOTONIC);
    for (int i = 0; i < 1000; i++) {
        b = tier_now_ns ();
        assert_true (b >= a);
        a = b;
    }
    fk.last = (clockid_t) -1;
    (void) tier_now_ms ();
    assert_int_equal (fk.last, CLOCK_MONOTONIC);
    fk.last = (clockid_t) -1;
    (void) tier_now_us ();
    assert_int_equal (fk.last, CLOCK_MONOTONIC);
    /* a real 20 ms pass as 20 ms or a little more */
    a = tier_now_ms ();
    {
        struct timespec d = { 0, 20 * 1000 * 1000 };
        while (nanosleep (&d, &d) < 0)
            ;
    }
    b = tier_now_ms ();
    assert_true (b - a >= 20 && b - a < 5000);
}

/* the units: ns, us and ms of the same instant, truncated */
static void test_units (void **state)
{
    (void) state;
    at (1234, 567891234);
    assert_int_equal (tier_now_ns (), INT64_C (1234567891234));
    assert_int_equal (tier_now_us (), INT64_C (1234567891));
    assert_int_equal (tier_now_ms (), INT64_C (1234567));
    /* past 2^32 seconds: no 32-bit overflow anywhere */
    at (INT64_C (5000000000), 999999999);
    assert_int_equal (tier_now_ms (), INT64_C (5000000000999));
}

/* deadlines: -1 is none; remaining is poll()'s timeout */
static void test_deadlines (void **state)
{
    int64_t d;

    (void) state;
    at (100, 0);
    assert_int_equal (tier_deadline_ms (-1), -1);
    assert_int_equal (tier_deadline_ms (-5), -1);
    assert_int_equal (tier_remaining_ms (-1), -1);
    d = tier_deadline_ms (1500);
    assert_int_equal (d, INT64_C (101500));
    assert_int_equal (tier_remaining_ms (d), 1500);
    at (101, 0);
    assert_int_equal (tier_remaining_ms (d), 500);
    at (101, 499999999);
    assert_int_equal (tier_remaining_ms (d), 1);
    at (101, 500000000);
    assert_int_equal (tier_remaining_ms (d), 0);
    at (200, 0); /* long past: 0, never negative */
    assert_int_equal (tier_remaining_ms (d), 0);
    /* a deadline of now, and one of 0 ms */
    assert_int_equal (tier_remaining_ms (tier_deadline_ms (0)), 0);
    assert_int_equal (tier_remaining_ms (tier_now_ms ()), 0);
    /* far away: capped so that it fits an int */
    at (1, 0);
    assert_int_equal (tier_remaining_ms (INT64_C (1) << 50), 1000000000);
    d = tier_deadline_ms (2000000000);
    assert_int_equal (d, INT64_C (2000001000));
    assert_int_equal (tier_remaining_ms (d), 1000000000);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup (test_monotonic, setup),
        cmocka_unit_test_setup (test_units, setup),
        cmocka_unit_test_setup (test_deadlines, setup),
    };
    return UNIT_RUN (tests);
}

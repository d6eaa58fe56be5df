/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_throttle.c - the shared bandwidth cap and its accounting, on a
 * simulated clock */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdint.h>
#include <stdlib.h>

#include "unit.h"

#include "throttle.h"

#define MS 1000000ULL
#define SEC 1000000000ULL
#define MIB (1024 * 1024ULL)

static void test_uncapped (void **state)
{
    struct throttle t;
    struct throttle_stats s;

    throttle_init (&t, 0, 0, 0);
    assert_int_equal (throttle_take (&t, 100 * MIB, 0), 0);
    throttle_get (&t, &s);
    assert_int_equal (s.bytes, 0);
    assert_int_equal (s.delayed_ops, 0);
    throttle_fini (&t);
}

static void test_burst_then_wait (void **state)
{
    struct throttle t;
    struct throttle_stats s;

    /* 1 MB/s, 100 kB bucket: 50 kB pass, the next 100 kB owe 50 kB. */
    throttle_init (&t, 1000000, 100000, 0);
    assert_int_equal (throttle_take (&t, 50000, 0), 0);
    assert_int_equal (throttle_take (&t, 100000, 0), 50 * MS);
    throttle_get (&t, &s);
    assert_int_equal (s.bytes, 150000);
    assert_int_equal (s.ops, 2);
    assert_int_equal (s.delayed_bytes, 100000);
    assert_int_equal (s.delayed_ops, 1);
    assert_int_equal (s.wait_ns, 50 * MS);
    assert_int_equal (s.stall_ns, 50 * MS);

    /* After a long idle time the bucket is full again, not fuller. */
    assert_int_equal (throttle_take (&t, 100000, 10 * SEC), 0);
    assert_int_equal (throttle_take (&t, 1000, 10 * SEC), 1 * MS);
    throttle_fini (&t);
}

static void test_concurrent_queue (void **state)
{
    struct throttle t;
    struct throttle_stats s;

    /* Two clients at once, no bucket: the second waits for the first. */
    throttle_init (&t, 1000000, 0, 0);
    assert_int_equal (throttle_take (&t, 100000, 0), 100 * MS);
    assert_int_equal (throttle_take (&t, 100000, 0), 200 * MS);
    /* A third arrives mid-way: it queues behind both. */
    assert_int_equal (throttle_take (&t, 100000, 150 * MS), 150 * MS);
    throttle_get (&t, &s);
    assert_int_equal (s.wait_ns, 450 * MS);     /* sum of the waits */
    assert_int_equal (s.stall_ns, 300 * MS);    /* their union */
    throttle_fini (&t);
}

static void test_separate_stalls (void **state)
{
    struct throttle t;
    struct throttle_stats s;

    throttle_init (&t, 1000000, 0, 0);
    assert_int_equal (throttle_take (&t, 10000, 0), 10 * MS);
    assert_int_equal (throttle_take (&t, 10000, 1 * SEC), 10 * MS);
    throttle_get (&t, &s);
    assert_int_equal (s.stall_ns, 20 * MS);
    throttle_reset (&t);
    throttle_get (&t, &s);
    assert_int_equal (s.bytes + s.ops + s.wait_ns + s.stall_ns, 0);
    /* Reset keeps the bucket: still empty right after the last take. */
    assert_int_equal (throttle_take (&t, 10000, 1 * SEC + 10 * MS), 10 * MS);
    throttle_fini (&t);
}

/* One reader, requests back to back with a little processing time in
 * between: what `cat` through the emulator does.  The stall is the time
 * the cap costs: (X - burst) / rate, give or take the processing time. */
static void test_sequential_stream (void **state)
{
    const uint64_t rate = 20 * MIB, burst = 256 * 1024, x = 10 * MIB;
    const uint64_t req = 128 * 1024, gap = 20000;   /* 20 us */
    struct throttle t;
    struct throttle_stats s;
    uint64_t now = 0, sent;
    double lo, hi;

    throttle_init (&t, rate, burst, 0);
    for (sent = 0; sent < x; sent += req) {
        now += gap;
        now += throttle_take (&t, req, now);
    }
    throttle_get (&t, &s);
    lo = (double)(x - burst) * 1e9 / (double)rate
         - (double)(x / req * gap);
    hi = (double)s.delayed_bytes * 1e9 / (double)rate + (double)s.delayed_ops;
    assert_true ((double)s.stall_ns >= lo);
    assert_true ((double)s.stall_ns <= hi);
    assert_true (s.stall_ns <= s.wait_ns);
    assert_true (s.delayed_bytes > 0 && s.delayed_bytes <= x);
    /* With one client the waits do not overlap. */
    assert_int_equal (s.stall_ns, s.wait_ns);
    throttle_fini (&t);
}

/* Many clients with random sizes and arrivals: the invariants that the
 * integration test relies on hold whatever the interleaving. */
static void test_random_clients (void **state)
{
    enum { NCLIENT = 8, NREQ = 2000 };
    const uint64_t rate = 50 * MIB, burst = 512 * 1024;
    uint64_t ready[NCLIENT] = { 0 };
    uint64_t total = 0, finish = 0;
    struct throttle t;
    struct throttle_stats s;
    int i, c;

    srand (42);
    throttle_init (&t, rate, burst, 0);
    for (i = 0; i < NREQ; i++) {
        uint64_t n = 4096 + (uint64_t)(rand () % (1024 * 1024));
        uint64_t now, w;

        /* The client that is ready first sends next (arrival order). */
        for (c = 0, now = ready[0]; c < NCLIENT; c++)
            if (ready[c] < now)
                now = ready[c];
        for (c = 0; ready[c] != now; c++)
            ;
        w = throttle_take (&t, n, now);
        ready[c] = now + w + (uint64_t)(rand () % 100000);
        if (now + w > finish)
            finish = now + w;
        total += n;
    }
    throttle_get (&t, &s);
    assert_int_equal (s.bytes, total);
    assert_true (s.stall_ns <= s.wait_ns);
    assert_true ((double)s.stall_ns
                 <= (double)s.delayed_bytes * 1e9 / (double)rate
                        + (double)s.delayed_ops);
    /* The cap holds for all clients together. */
    assert_true ((double)finish
                 >= (double)(total - burst) * 1e9 / (double)rate - 1.0);
    assert_true (s.stall_ns <= finish);
    throttle_fini (&t);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_uncapped),
        cmocka_unit_test (test_burst_then_wait),
        cmocka_unit_test (test_concurrent_queue),
        cmocka_unit_test (test_separate_stalls),
        cmocka_unit_test (test_sequential_stream),
        cmocka_unit_test (test_random_clients),
    };

    return UNIT_RUN (tests);
}

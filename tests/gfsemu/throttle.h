/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* throttle.h - a bandwidth cap shared by all clients, and its accounting */
#ifndef GFSEMU_THROTTLE_H
#define GFSEMU_THROTTLE_H

#include <pthread.h>
#include <stdint.h>

/* A token bucket that may go into debt: a transfer of n bytes always
 * takes n tokens, and when the bucket is negative the caller sleeps until
 * it is back at zero.  Concurrent transfers therefore queue behind each
 * other, and the long-run rate of all threads together is the cap.
 *
 * Accounting (all computed from the bucket, never from measured sleeps):
 *   bytes, ops           every transfer that went through the bucket
 *   delayed_bytes, _ops  transfers that had to wait
 *   wait_ns              sum of the waits of all transfers (with several
 *                        clients at once this exceeds elapsed time)
 *   stall_ns             length of the union of the wait intervals: the
 *                        time during which the cap held someone back
 * Invariant: stall_ns <= wait_ns, and
 *   stall_ns <= delayed_bytes * 1e9 / rate + delayed_ops
 * (a stall only lasts while debt drains at the rate, and each transfer
 * adds at most its own size to the debt; +1 ns rounding per transfer).
 */
struct throttle_stats {
    uint64_t bytes;
    uint64_t ops;
    uint64_t delayed_bytes;
    uint64_t delayed_ops;
    uint64_t wait_ns;
    uint64_t stall_ns;
};

struct throttle {
    pthread_mutex_t lock;
    uint64_t rate;          /* bytes per second, 0 = no cap */
    uint64_t burst;         /* bucket capacity in bytes */
    double tokens;          /* bytes; negative = debt */
    uint64_t last_ns;       /* time of the last refill */
    uint64_t busy_end_ns;   /* end of the current stall */
    struct throttle_stats st;
};

/* Set up a bucket, full.  rate 0 disables the cap (take returns 0). */
void throttle_init (struct throttle *t, uint64_t rate, uint64_t burst,
                    uint64_t now_ns);
void throttle_fini (struct throttle *t);

/* Charge n bytes at time now_ns; returns how long the caller must wait
 * (ns, 0 if none) and accounts it.
 */
uint64_t throttle_take (struct throttle *t, uint64_t n, uint64_t now_ns);

/* Copy the accounting out (snapshot) or zero it (the bucket state stays).
 */
void throttle_get (struct throttle *t, struct throttle_stats *out);
void throttle_reset (struct throttle *t);

/* Monotonic clock in ns, and an absolute sleep until it reads until_ns. */
uint64_t throttle_now (void);
void throttle_sleep_until (uint64_t until_ns);

#endif /* !GFSEMU_THROTTLE_H */

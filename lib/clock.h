/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* clock.h - the one monotonic clock of tier (libc only)
 *
 * Deadlines, timeouts, intervals and durations use CLOCK_MONOTONIC: it
 * never jumps when the wall clock is set.  What is shown to people or
 * compared across nodes (timestamps in records and snapshots) uses the
 * wall clock, time (NULL) or CLOCK_REALTIME, at the call site.
 */
#ifndef TIER_CLOCK_H
#define TIER_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds, microseconds and nanoseconds. */
int64_t tier_now_ms (void);
int64_t tier_now_us (void);
int64_t tier_now_ns (void);

#endif /* !TIER_CLOCK_H */

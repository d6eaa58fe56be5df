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

/* Deadlines in tier_now_ms time; -1 is "none".  tier_deadline_ms of a
 * timeout (-1: none); tier_remaining_ms of a deadline, as poll() takes
 * it: -1 for none, 0 once past, else the milliseconds left (capped so
 * that they fit an int). */
int64_t tier_deadline_ms (int timeout_ms);
int tier_remaining_ms (int64_t deadline);

#endif /* !TIER_CLOCK_H */

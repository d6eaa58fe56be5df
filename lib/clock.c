/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* clock.c - the monotonic clock and deadlines */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <time.h>

#include "clock.h"

int64_t tier_now_ns (void)
{
    struct timespec ts;

    (void) clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tier_now_us (void)
{
    return tier_now_ns () / 1000;
}

int64_t tier_now_ms (void)
{
    return tier_now_us () / 1000;
}

int64_t tier_deadline_ms (int timeout_ms)
{
    return timeout_ms < 0 ? -1 : tier_now_ms () + timeout_ms;
}

int tier_remaining_ms (int64_t deadline)
{
    int64_t left;

    if (deadline < 0)
        return -1;
    left = deadline - tier_now_ms ();
    if (left < 0)
        return 0;
    return left > 1000000000 ? 1000000000 : (int) left;
}

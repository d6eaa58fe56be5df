/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* clock.c - tier_now_ms, tier_now_us, tier_now_ns */
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

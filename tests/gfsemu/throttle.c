/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* throttle.c - a shared token bucket with debt, and its own accounting */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "throttle.h"

#define NSEC 1000000000.0

void throttle_init (struct throttle *t, uint64_t rate, uint64_t burst,
                    uint64_t now_ns)
{
    memset (t, 0, sizeof (*t));
    pthread_mutex_init (&t->lock, NULL);
    t->rate = rate;
    t->burst = burst;
    t->tokens = (double)burst;
    t->last_ns = now_ns;
    t->busy_end_ns = now_ns;
}

void throttle_fini (struct throttle *t)
{
    pthread_mutex_destroy (&t->lock);
}

uint64_t throttle_take (struct throttle *t, uint64_t n, uint64_t now_ns)
{
    uint64_t wait = 0;
    uint64_t end;

    if (t->rate == 0)
        return 0;
    pthread_mutex_lock (&t->lock);
    if (now_ns > t->last_ns) {
        t->tokens += (double)(now_ns - t->last_ns) * (double)t->rate / NSEC;
        if (t->tokens > (double)t->burst)
            t->tokens = (double)t->burst;
        t->last_ns = now_ns;
    }
    t->tokens -= (double)n;
    t->st.bytes += n;
    t->st.ops++;
    if (t->tokens < 0) {
        wait = (uint64_t)ceil (-t->tokens * NSEC / (double)t->rate);
        end = now_ns + wait;
        t->st.delayed_bytes += n;
        t->st.delayed_ops++;
        t->st.wait_ns += wait;
        /* Waits end in arrival order (debt only grows while it lasts),
         * so the union of the intervals grows by what sticks out. */
        if (now_ns >= t->busy_end_ns)
            t->st.stall_ns += wait;
        else if (end > t->busy_end_ns)
            t->st.stall_ns += end - t->busy_end_ns;
        if (end > t->busy_end_ns)
            t->busy_end_ns = end;
    }
    pthread_mutex_unlock (&t->lock);
    return wait;
}

void throttle_get (struct throttle *t, struct throttle_stats *out)
{
    pthread_mutex_lock (&t->lock);
    *out = t->st;
    pthread_mutex_unlock (&t->lock);
}

void throttle_reset (struct throttle *t)
{
    pthread_mutex_lock (&t->lock);
    memset (&t->st, 0, sizeof (t->st));
    pthread_mutex_unlock (&t->lock);
}

uint64_t throttle_now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void throttle_sleep_until (uint64_t until_ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(until_ns / 1000000000ULL),
        .tv_nsec = (long)(until_ns % 1000000000ULL),
    };

    while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)
           == EINTR)
        ;
}

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_evict.c - the replica cache's eviction: the budget, the
 * free-space floor, LRU, ttl
 *
 * A node evicts only the replicas it fetched (struct replica's owner):
 * least recently used first, replicas of batches running on this node
 * last, when a new copy needs room within BBCapacity and above BBMinFree
 * free on the BB; and every replica past its policy's ttl.  Copies in
 * flight count as taken.
 *
 * Owns those rules.  Calls replica_index.c (the records), store.c (the
 * running jobs) and mirror.c (mirror_drop: a mirror without one of its
 * replicas goes too).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "replica.h"

#define BATCHES_MAX 256
#define TICK_S 5

void replica_evict_one (struct agent *a, struct replica *x, const char *why)
{
    char file[PATH_MAX];

    replica_index_file (a->replicas, x->id, file, sizeof (file));
    if (unlink (file) < 0 && errno != ENOENT)
        tier_log_error ("evict %s", file);
    tier_log (LOG_INFO, "replica of %s (%llu bytes) evicted: %s",
              x->path ? x->path : x->id, (unsigned long long) x->size, why);
    if (x->id[0] == 'u' && strchr (x->id, '/'))
        mirror_drop (a, x->uid, strchr (x->id, '/') + 1, NULL);
    replica_index_forget (a, x);
}

/* The batches running on this node. */
struct batches {
    uint32_t ids[BATCHES_MAX];
    int n;
};

static int running_cb (const struct store_job *j, void *arg)
{
    struct batches *b = arg;

    if (j->state == STORE_JOB_RUNNING && b->n < BATCHES_MAX)
        b->ids[b->n++] = j->batch_id;
    return 0;
}

static bool in_use (const struct batches *b, uint32_t batch)
{
    for (int i = 0; i < b->n; i++)
        if (b->ids[i] == batch)
            return true;
    return false;
}

/* The least recently used replica this node fetched, those of batches
 * not running on this node first; NULL if none.
 */
static struct replica *lru (struct replicas *r, const struct batches *b)
{
    struct replica *best = NULL;
    bool best_busy = true;

    for (int i = 0; i < REPLICA_BUCKETS; i++)
        for (struct replica *x = r->tab[i]; x; x = x->next) {
            bool busy;
            if (!x->owner)
                continue;
            busy = in_use (b, x->batch);
            if (!best || (best_busy && !busy)
                || (busy == best_busy && x->used < best->used)) {
                best = x;
                best_busy = busy;
            }
        }
    return best;
}

static uint64_t inflight_bytes (const struct replicas *r)
{
    uint64_t sum = 0;

    for (const struct fetch *f = r->fetches; f; f = f->next)
        if (!f->done)
            sum += f->size;
    return sum;
}

uint64_t replica_evict_bb_free (const struct replicas *r)
{
    struct statvfs sv;

    if (statvfs (r->bb, &sv) < 0)
        return UINT64_MAX;
    return (uint64_t) sv.f_bavail * sv.f_frsize;
}

/* The budget (BBCapacity), or without one the BB's size less BBMinFree. */
uint64_t replica_evict_size_bound (struct agent *a, char *what, size_t whatsize)
{
    struct replicas *r = a->replicas;
    uint64_t cap = a->conf->bb_capacity, min = a->conf->bb_min_free, size;
    struct statvfs sv;

    if (cap) {
        (void) snprintf (what, whatsize,
                         "the BB budget of node %s "
                         "(BBCapacity %llu MiB)",
                         a->node, (unsigned long long) (cap >> 20));
        return cap;
    }
    if (!r || !r->enabled || statvfs (r->bb, &sv) < 0)
        return 0;
    size = (uint64_t) sv.f_blocks * sv.f_frsize;
    (void) snprintf (what, whatsize,
                     "the burst buffer (%llu MiB, BBMinFree "
                     "%llu MiB)",
                     (unsigned long long) (size >> 20),
                     (unsigned long long) (min >> 20));
    return size > min ? size - min : 1;
}

static int budget_taken (struct agent *a, char *why, size_t whysize)
{
    (void) snprintf (why, whysize,
                     "the BB budget of node %s "
                     "(BBCapacity %llu MiB) is taken by copies in flight",
                     a->node,
                     (unsigned long long) (a->conf->bb_capacity >> 20));
    return -1;
}

/* Make room for size bytes within the budget and the free-space floor,
 * evicting this node's least recently used replicas -- only when that
 * can make enough room: a request that cannot fit evicts nothing. */
int replica_evict_make_room (struct agent *a, uint64_t size, char *why,
                             size_t whysize)
{
    struct replicas *r = a->replicas;
    uint64_t cap = a->conf->bb_capacity, min = a->conf->bb_min_free;
    uint64_t inflight = inflight_bytes (r), avail;
    struct batches b = { .n = 0 };
    tier_error_t e;

    if (cap && inflight + size > cap)
        return budget_taken (a, why, whysize);
    avail = replica_evict_bb_free (r);
    if (avail != UINT64_MAX && avail + r->owned_bytes < size + min + inflight) {
        (void) snprintf (why, whysize,
                         "the burst buffer is full (%llu MiB "
                         "free, %llu MiB of it this node's replicas, "
                         "BBMinFree %llu MiB)",
                         (unsigned long long) (avail >> 20),
                         (unsigned long long) (r->owned_bytes >> 20),
                         (unsigned long long) (min >> 20));
        return -1;
    }
    (void) store_job_foreach (a->store, running_cb, &b, &e);
    while (cap && r->owned_bytes + inflight_bytes (r) + size > cap) {
        struct replica *x = lru (r, &b);
        if (!x)
            return budget_taken (a, why, whysize);
        replica_evict_one (a, x, "BB budget");
    }
    while (replica_evict_bb_free (r) < size + min + inflight_bytes (r)) {
        struct replica *x = lru (r, &b);
        if (!x) {
            (void) snprintf (why, whysize, "the burst buffer is full");
            return -1;
        }
        replica_evict_one (a, x, "BB free space");
    }
    return 0;
}

void replica_tick (struct agent *a)
{
    struct replicas *r = a->replicas;
    int64_t now = time (NULL);

    if (r && r->retry && now - r->last_tick >= REPLICA_RETRY_S) {
        r->last_tick = now;
        replica_enable (a);
        return;
    }
    if (!r || !r->enabled || now - r->last_tick < TICK_S)
        return;
    r->last_tick = now;
    for (int i = 0; i < REPLICA_BUCKETS; i++) {
        struct replica *x = r->tab[i], *next;
        for (; x; x = next) {
            next = x->next;
            if (!x->expires || now < x->expires)
                continue;
            if (x->owner)
                replica_evict_one (a, x, "ttl");
            else
                replica_index_forget (a, x);
        }
    }
}

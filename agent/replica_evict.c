/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_evict.c - the replica cache's eviction: the budget, the
 * free-space floor, LRU, ttl
 *
 * A node evicts only the replicas it fetched (struct replica's owner),
 * when a new copy needs room within BBCapacity and above BBMinFree free
 * on the BB, and every replica past its policy's ttl.  Copies in flight
 * count as taken.  The BB is shared fairly between users: the victim is
 * the least recently used replica (those of batches running on this node
 * last) of the user who holds the most above an equal share of the
 * budget among the users who hold or fetch replicas here, the one asking
 * counted with what it asks for -- a user who fills the BB evicts their
 * own replicas, not another's; only when nobody is above the share does
 * plain LRU choose.  A user's copies in flight take at most half the
 * budget while another copy of theirs is in flight.  With BBUserMax, a
 * user's replicas this node fetched (and copies in flight) stay within
 * it: their own least recently used go first, and a copy larger than
 * what is left to them beside their copies in flight is not made.
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

/* The least recently used replica this node fetched (of uid only, with
 * of_uid), those of batches not running on this node first; NULL if
 * none.
 */
static struct replica *lru (struct replicas *r, const struct batches *b,
                            bool of_uid, uint32_t uid)
{
    struct replica *best = NULL;
    bool best_busy = true;

    for (int i = 0; i < REPLICA_BUCKETS; i++)
        for (struct replica *x = r->tab[i]; x; x = x->next) {
            bool busy;
            if (!x->owner || (of_uid && x->uid != uid))
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

/* What each user holds on this node's BB: replicas and copies in flight. */
#define USERS_MAX 256
struct uses {
    struct {
        uint32_t uid;
        uint64_t bytes;
        int replicas; /* of them, this node's replicas (evictable) */
    } u[USERS_MAX];
    int n;
};

static void uses_add (struct uses *s, uint32_t uid, uint64_t bytes,
                      int replicas)
{
    for (int i = 0; i < s->n; i++)
        if (s->u[i].uid == uid) {
            s->u[i].bytes += bytes;
            s->u[i].replicas += replicas;
            return;
        }
    if (s->n < USERS_MAX) {
        s->u[s->n].uid = uid;
        s->u[s->n].bytes = bytes;
        s->u[s->n++].replicas = replicas;
    }
}

static void uses_evicted (struct uses *s, const struct replica *x)
{
    for (int i = 0; i < s->n; i++)
        if (s->u[i].uid == x->uid) {
            s->u[i].bytes -= x->size < s->u[i].bytes ? x->size : s->u[i].bytes;
            s->u[i].replicas--;
        }
}

static void uses_of (const struct replicas *r, uint32_t uid, uint64_t size,
                     struct uses *s)
{
    s->n = 0;
    uses_add (s, uid, size, 0);
    for (int i = 0; i < REPLICA_BUCKETS; i++)
        for (const struct replica *x = r->tab[i]; x; x = x->next)
            if (x->owner)
                uses_add (s, x->uid, x->size, 1);
    for (const struct fetch *f = r->fetches; f; f = f->next)
        if (!f->done)
            uses_add (s, f->uid, f->size, 0);
}

/* The user most above an equal share of total who has a replica to
 * give; false if nobody is above it. */
static bool over_share (const struct uses *s, uint64_t total, uint32_t *uid)
{
    uint64_t share = s->n ? total / (uint64_t) s->n : total, most = 0;
    bool found = false;

    for (int i = 0; i < s->n; i++)
        if (s->u[i].replicas > 0 && s->u[i].bytes > share
            && s->u[i].bytes - share > most) {
            most = s->u[i].bytes - share;
            *uid = s->u[i].uid;
            found = true;
        }
    return found;
}

/* The next replica to evict (see above), NULL if none; s loses it. */
static struct replica *victim (struct replicas *r, const struct batches *b,
                               struct uses *s, uint64_t total)
{
    struct replica *x;
    uint32_t uid;

    x = over_share (s, total, &uid) ? lru (r, b, true, uid) : NULL;
    if (!x)
        x = lru (r, b, false, 0);
    if (x)
        uses_evicted (s, x);
    return x;
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

/* BBUserMax: uid's replicas that this node fetched, with its copies in
 * flight (mine) and this one, stay within it -- its own least recently
 * used replicas go first; a copy that cannot fit evicts nothing. */
static int user_room (struct agent *a, const struct batches *b, uint32_t uid,
                      uint64_t size, uint64_t mine, char *why, size_t whysize)
{
    struct replicas *r = a->replicas;
    uint64_t umax = a->conf->bb_user_max, held = 0;

    if (!umax)
        return 0;
    if (size > umax || mine > umax - size) {
        (void) snprintf (why, whysize,
                         "uid %u's copies would pass BBUserMax on node %s "
                         "(%llu MiB: this one is %llu MiB, %llu MiB more "
                         "in flight)",
                         (unsigned) uid, a->node,
                         (unsigned long long) (umax >> 20),
                         (unsigned long long) (size >> 20),
                         (unsigned long long) (mine >> 20));
        return -1;
    }
    for (int i = 0; i < REPLICA_BUCKETS; i++)
        for (const struct replica *x = r->tab[i]; x; x = x->next)
            if (x->owner && x->uid == uid)
                held += x->size;
    while (held > umax - size - mine) {
        struct replica *x = lru (r, b, true, uid);
        if (!x)
            break;
        held -= x->size < held ? x->size : held;
        replica_evict_one (a, x, "BBUserMax");
    }
    return 0;
}

/* Make room for size bytes within the budget and the free-space floor,
 * evicting this node's least recently used replicas -- only when that
 * can make enough room: a request that cannot fit evicts nothing. */
int replica_evict_make_room (struct agent *a, uint32_t uid, uint64_t size,
                             char *why, size_t whysize)
{
    struct replicas *r = a->replicas;
    uint64_t cap = a->conf->bb_capacity, min = a->conf->bb_min_free;
    uint64_t inflight = inflight_bytes (r), avail, mine = 0, total;
    struct batches b = { .n = 0 };
    static struct uses s;
    char what[160];
    tier_error_t e;

    if (cap && inflight + size > cap)
        return budget_taken (a, why, whysize);
    for (const struct fetch *f = r->fetches; f; f = f->next)
        if (!f->done && f->uid == uid)
            mine += f->size;
    total = replica_evict_size_bound (a, what, sizeof (what));
    if (mine > 0 && total && mine + size > total / 2) {
        (void) snprintf (why, whysize,
                         "uid %u's copies in flight take half of %s "
                         "already",
                         (unsigned) uid, what);
        return -1;
    }
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
    if (user_room (a, &b, uid, size, mine, why, whysize) < 0)
        return -1;
    uses_of (r, uid, size, &s);
    while (cap && r->owned_bytes + inflight_bytes (r) + size > cap) {
        struct replica *x = victim (r, &b, &s, total);
        if (!x)
            return budget_taken (a, why, whysize);
        replica_evict_one (a, x, "BB budget");
    }
    while (replica_evict_bb_free (r) < size + min + inflight_bytes (r)) {
        struct replica *x = victim (r, &b, &s, total);
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

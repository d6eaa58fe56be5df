/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bpref.c - the block cache's read-ahead (see bpref.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bpref.h"

/* ------------------------------------------------------------ detector */

void bpref_observe (struct bpref_detect *d, uint64_t off, uint64_t len)
{
    enum bpref_mode mode = BPREF_NONE;

    if (d->seen >= 1 && off == d->off[0] + d->len[0])
        mode = BPREF_SEQ; /* it continues the last read */
    else if (d->seen >= 1) {
        /* the same distance as between the last two, and the same size:
         * a stride (the distance is recorded either way) */
        int64_t now = (int64_t) (off - d->off[0]);
        if (d->seen >= 2 && now == d->stride && len == d->len[0])
            mode = BPREF_STRIDE;
        d->stride = now;
    }
    d->off[1] = d->off[0];
    d->len[1] = d->len[0];
    d->off[0] = off;
    d->len[0] = len;
    if (d->seen < 2)
        d->seen++;
    d->mode = mode;
}

int bpref_predict (const struct bpref_detect *d, int n, uint64_t *out)
{
    int k = 0;

    if (d->mode == BPREF_NONE || d->seen == 0)
        return 0;
    for (int i = 1; i <= n; i++) {
        int64_t step = d->mode == BPREF_SEQ ? (int64_t) d->len[0] : d->stride;
        int64_t at = (int64_t) d->off[0] + step * i;
        if (at < 0)
            break;
        out[k++] = (uint64_t) at;
    }
    return k;
}

/* ---------------------------------------------------------------- list */

enum { EMPTY, FILLING, FULL };

struct buf {
    uint64_t blk;
    int state;
    bool stale;     /* FILLING, invalidated: drop on fill */
    uint64_t valid; /* bytes of the block held */
    uint64_t served;
    unsigned char *data;
};

struct bpref_list {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned nbuf;
    uint64_t block;
    unsigned char *mem;
    bool own;
    struct buf *bufs;
    struct bpref_stats st;
};

struct bpref_list *bpref_list_new (unsigned nbuf, uint64_t block, void *mem)
{
    struct bpref_list *l;

    if (nbuf == 0 || nbuf > 65536 || block < 4096 || block > (1ULL << 30)
        || (block & (block - 1))) {
        errno = EINVAL;
        return NULL;
    }
    if (!(l = calloc (1, sizeof (*l)))
        || !(l->bufs = calloc (nbuf, sizeof (*l->bufs))))
        goto nomem;
    if (!(l->mem = mem)) {
        if (!(l->mem = malloc ((size_t) (nbuf * block))))
            goto nomem;
        l->own = true;
    }
    if (pthread_mutex_init (&l->mu, NULL) != 0) {
        if (l->own)
            free (l->mem);
        goto nomem;
    }
    if (pthread_cond_init (&l->cv, NULL) != 0) {
        pthread_mutex_destroy (&l->mu);
        if (l->own)
            free (l->mem);
        goto nomem;
    }
    l->nbuf = nbuf;
    l->block = block;
    for (unsigned i = 0; i < nbuf; i++)
        l->bufs[i].data = l->mem + (size_t) i * block;
    return l;
nomem:
    if (l)
        free (l->bufs);
    free (l);
    errno = ENOMEM;
    return NULL;
}

void bpref_list_free (struct bpref_list *l)
{
    if (!l)
        return;
    pthread_cond_destroy (&l->cv);
    pthread_mutex_destroy (&l->mu);
    if (l->own)
        free (l->mem);
    free (l->bufs);
    free (l);
}

/* The buffer listing blk (filling or full, not stale), or NULL. */
static struct buf *find (struct bpref_list *l, uint64_t blk)
{
    for (unsigned i = 0; i < l->nbuf; i++) {
        struct buf *b = &l->bufs[i];
        if (b->state != EMPTY && !b->stale && b->blk == blk)
            return b;
    }
    return NULL;
}

static void drop (struct bpref_list *l, struct buf *b)
{
    if (b->state == FULL && b->served == 0)
        l->st.wasted++;
    b->state = EMPTY;
    b->stale = false;
}

/* Blocks the pattern needs after [off, off + len), nearest first, at
 * most depth (unique). */
static int needed (const struct bpref_list *l, const struct bpref_detect *d,
                   uint64_t off, uint64_t len, unsigned depth, uint64_t *out)
{
    uint64_t at[64];
    int n = 0, k;

    if (depth > 64)
        depth = 64;
    if (d->mode == BPREF_SEQ) {
        uint64_t first = (off + len) / l->block;
        for (unsigned i = 0; i < depth; i++)
            out[n++] = first + i;
        return n;
    }
    k = bpref_predict (d, (int) depth, at);
    for (int i = 0; i < k && n < (int) depth; i++) {
        uint64_t b0 = at[i] / l->block;
        uint64_t b1 = (at[i] + (len ? len - 1 : 0)) / l->block;
        for (uint64_t b = b0; b <= b1 && n < (int) depth; b++) {
            bool dup = false;
            for (int j = 0; j < n; j++)
                dup = dup || out[j] == b;
            if (!dup)
                out[n++] = b;
        }
    }
    return n;
}

int bpref_plan (struct bpref_list *l, const struct bpref_detect *d,
                uint64_t off, uint64_t len, unsigned depth, uint64_t *blk,
                void **buf, int max)
{
    uint64_t want[64];
    int n, got = 0;

    if (d->mode == BPREF_NONE)
        return 0;
    n = needed (l, d, off, len, depth, want);
    pthread_mutex_lock (&l->mu);
    for (int i = 0; i < n && got < max; i++) {
        struct buf *b = NULL;
        if (find (l, want[i]))
            continue;
        for (unsigned j = 0; j < l->nbuf && !b; j++)
            if (l->bufs[j].state == EMPTY)
                b = &l->bufs[j];
        if (!b)
            break; /* every buffer is in use: no further ahead */
        b->blk = want[i];
        b->state = FILLING;
        b->stale = false;
        b->valid = b->served = 0;
        blk[got] = want[i];
        buf[got++] = b->data;
    }
    pthread_mutex_unlock (&l->mu);
    return got;
}

void bpref_filled (struct bpref_list *l, uint64_t blk, int64_t n)
{
    pthread_mutex_lock (&l->mu);
    for (unsigned i = 0; i < l->nbuf; i++) {
        struct buf *b = &l->bufs[i];
        if (b->state != FILLING || b->blk != blk)
            continue;
        if (b->stale || n < 0)
            b->state = EMPTY;
        else {
            b->state = FULL;
            b->valid = (uint64_t) n > l->block ? l->block : (uint64_t) n;
            l->st.fetched++;
        }
        b->stale = false;
        break;
    }
    pthread_cond_broadcast (&l->cv);
    pthread_mutex_unlock (&l->mu);
}

/* Free full blocks the pattern d has moved past (the read at off). */
static void free_behind (struct bpref_list *l, const struct bpref_detect *d,
                         uint64_t off, uint64_t len)
{
    bool back = d->mode == BPREF_STRIDE && d->stride < 0;

    if (d->mode == BPREF_NONE)
        return;
    for (unsigned i = 0; i < l->nbuf; i++) {
        struct buf *b = &l->bufs[i];
        uint64_t start = b->blk * l->block, end = start + l->block;
        if (b->state == FULL && (back ? start >= off + len : end <= off))
            drop (l, b);
    }
}

uint64_t bpref_read (struct bpref_list *l, const struct bpref_detect *d,
                     uint64_t off, uint64_t len, void *dst, bool wait)
{
    uint64_t served = 0;
    bool waited = false;

    pthread_mutex_lock (&l->mu);
    l->st.reads++;
    while (served < len) {
        uint64_t pos = off + served, in = pos % l->block, n;
        struct buf *b = find (l, pos / l->block);
        if (!b)
            break;
        if (b->state == FILLING) {
            if (!wait)
                break;
            waited = true;
            pthread_cond_wait (&l->cv, &l->mu);
            continue;
        }
        if (in >= b->valid)
            break; /* the file ends in this block */
        n = b->valid - in < len - served ? b->valid - in : len - served;
        memcpy ((unsigned char *) dst + served, b->data + in, (size_t) n);
        served += n;
        b->served += n;
        if (b->served >= b->valid)
            drop (l, b); /* used up */
        if (in + n < l->block && served < len)
            break; /* a short block: the file's end */
    }
    if (served == len && !waited)
        l->st.hits++;
    else if (served == len)
        l->st.waited++;
    else if (served)
        l->st.partial++;
    l->st.bytes += served;
    if (d)
        free_behind (l, d, off, len);
    pthread_mutex_unlock (&l->mu);
    return served;
}

void bpref_stats (struct bpref_list *l, struct bpref_stats *s)
{
    pthread_mutex_lock (&l->mu);
    *s = l->st;
    pthread_mutex_unlock (&l->mu);
}

void bpref_invalidate (struct bpref_list *l)
{
    pthread_mutex_lock (&l->mu);
    for (unsigned i = 0; i < l->nbuf; i++) {
        struct buf *b = &l->bufs[i];
        if (b->state == FILLING)
            b->stale = true;
        else if (b->state == FULL)
            drop (l, b);
    }
    pthread_cond_broadcast (&l->cv);
    pthread_mutex_unlock (&l->mu);
}

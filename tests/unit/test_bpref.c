/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_bpref.c - the block cache's read-ahead: the pattern detector, the
 * prefetch list (partial hits, the file's end, failed and invalidated
 * fills, freeing used blocks, allocation failures), hit rates of
 * asynchronous read-ahead against the paper's synchronous prefetch in a
 * simulation, and a real fetcher thread serving a reader
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lib/bpref.h"

#include "failalloc.h"
#include "unit.h"

FAILALLOC_DEFINE

#define KiB 1024ull
#define MiB (1024 * KiB)

/* the file's byte at o */
static unsigned char byte_at (uint64_t o)
{
    return (unsigned char) ((o * 2654435761u) >> 13);
}

static void fill (void *buf, uint64_t blk, uint64_t block, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        ((unsigned char *) buf)[i] = byte_at (blk * block + i);
}

static void check_bytes (const unsigned char *p, uint64_t off, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] != byte_at (off + i))
            fail_msg ("byte %llu differs", (unsigned long long) (off + i));
}

static void test_detect (void **state)
{
    struct bpref_detect d = { 0 };
    uint64_t at[4];

    (void) state;
    bpref_observe (&d, 0, 128 * KiB);
    assert_int_equal (d.mode, BPREF_NONE);
    bpref_observe (&d, 128 * KiB, 128 * KiB);
    assert_int_equal (d.mode, BPREF_SEQ);
    assert_int_equal (bpref_predict (&d, 2, at), 2);
    assert_int_equal (at[0], 256 * KiB);
    assert_int_equal (at[1], 384 * KiB);
    /* a jump: random until a distance repeats */
    bpref_observe (&d, 10 * MiB, 64 * KiB);
    assert_int_equal (d.mode, BPREF_NONE);
    assert_int_equal (bpref_predict (&d, 2, at), 0);
    bpref_observe (&d, 13 * MiB, 64 * KiB);
    assert_int_equal (d.mode, BPREF_NONE);
    bpref_observe (&d, 16 * MiB, 64 * KiB);
    assert_int_equal (d.mode, BPREF_STRIDE);
    assert_int_equal (bpref_predict (&d, 3, at), 3);
    assert_int_equal (at[0], 19 * MiB);
    assert_int_equal (at[2], 25 * MiB);
    /* same distance, other size: not a stride */
    bpref_observe (&d, 19 * MiB, 8 * KiB);
    assert_int_equal (d.mode, BPREF_NONE);
    /* backwards */
    bpref_observe (&d, 18 * MiB, 8 * KiB);
    bpref_observe (&d, 17 * MiB, 8 * KiB);
    assert_int_equal (d.mode, BPREF_STRIDE);
    assert_int_equal (bpref_predict (&d, 3, at), 3);
    assert_int_equal (at[0], 16 * MiB);
    /* never before the file's start */
    bpref_observe (&d, 1 * MiB, 8 * KiB);
    bpref_observe (&d, 0, 8 * KiB);
    assert_int_equal (d.mode, BPREF_NONE);
}

static void test_list (void **state)
{
    struct bpref_list *l = bpref_list_new (4, 64 * KiB, NULL);
    struct bpref_detect d = { 0 };
    static unsigned char dst[256 * 1024];
    struct bpref_stats s;
    uint64_t blk[8];
    void *buf[8];
    int n;

    (void) state;
    assert_non_null (l);
    assert_null (bpref_list_new (4, 5000, NULL));
    assert_int_equal (errno, EINVAL);
    /* nothing listed: a miss */
    assert_int_equal (bpref_read (l, NULL, 0, 100, dst, true), 0);
    bpref_observe (&d, 0, 16 * KiB);
    bpref_observe (&d, 16 * KiB, 16 * KiB);
    n = bpref_plan (l, &d, 16 * KiB, 16 * KiB, 8, blk, buf, 8);
    assert_int_equal (n, 4); /* every buffer */
    assert_int_equal (blk[0], 0);
    assert_int_equal (blk[3], 3);
    assert_int_equal (bpref_plan (l, &d, 16 * KiB, 16 * KiB, 8, blk, buf, 8),
                      0); /* listed already */
    /* block 0 filled, 1 not yet: a partial hit from 32 KiB */
    fill (buf[0], 0, 64 * KiB, 64 * KiB);
    bpref_filled (l, 0, (int64_t) (64 * KiB));
    assert_int_equal (bpref_read (l, &d, 32 * KiB, 64 * KiB, dst, false),
                      32 * KiB);
    check_bytes (dst, 32 * KiB, 32 * KiB);
    /* block 1's fetch failed: its buffer is free, a read misses */
    bpref_filled (l, 1, -1);
    assert_int_equal (bpref_read (l, NULL, 64 * KiB, 10, dst, true), 0);
    /* block 2 is the file's end: 1000 bytes */
    fill (buf[2], 2, 64 * KiB, 1000);
    bpref_filled (l, 2, 1000);
    assert_int_equal (bpref_read (l, NULL, 128 * KiB, 64 * KiB, dst, false),
                      1000);
    check_bytes (dst, 128 * KiB, 1000);
    /* invalidated: block 3 (in flight) is dropped when it lands */
    bpref_invalidate (l);
    fill (buf[3], 3, 64 * KiB, 64 * KiB);
    bpref_filled (l, 3, (int64_t) (64 * KiB));
    assert_int_equal (bpref_read (l, NULL, 192 * KiB, 10, dst, true), 0);
    bpref_stats (l, &s);
    assert_int_equal (s.fetched, 2); /* 0 and 2 */
    assert_int_equal (s.partial, 2);
    assert_int_equal (s.hits, 0);
    /* random reads are not read ahead */
    {
        struct bpref_detect r = { 0 };
        unsigned seed = 1;
        int planned = 0;
        for (int i = 0; i < 1000; i++) {
            uint64_t o = (uint64_t) (rand_r (&seed) % 4096) * 8 * KiB;
            bpref_observe (&r, o, 8 * KiB);
            planned += bpref_plan (l, &r, o, 8 * KiB, 8, blk, buf, 8);
        }
        assert_true (planned < 5); /* chance adjacency only */
    }
    bpref_list_free (l);
    /* allocations that fail */
    for (int i = 1; i <= 3; i++) {
        failalloc_arm (i);
        assert_null (bpref_list_new (4, 64 * KiB, NULL));
        assert_int_equal (errno, ENOMEM);
    }
    failalloc_arm (4);
    assert_non_null ((l = bpref_list_new (4, 64 * KiB, NULL)));
    failalloc_arm (-1);
    bpref_list_free (l);
}

/* One reader of size-byte reads, one a tick; a fetcher that fills one
 * block per `per_block` ticks.  async: read-ahead of depth blocks;
 * otherwise the paper's synchronous prefetch (a miss reads its whole
 * block, then is served from it).  The hit rate, in thousandths. */
static int simulate (uint64_t fsize, uint64_t size, uint64_t stride,
                     int per_block, bool async, struct bpref_stats *out)
{
    const uint64_t block = 1 * MiB;
    struct bpref_list *l = bpref_list_new (8, block, NULL);
    static unsigned char dst[1 * 1024 * 1024];
    struct bpref_detect d = { 0 };
    uint64_t qblk[64], blk[8];
    void *qbuf[64], *buf[8];
    int qn = 0, busy = 0;
    uint64_t reads = 0, hits = 0;
    struct bpref_stats s;

    assert_non_null (l);
    for (uint64_t off = 0; off + size <= fsize; off += stride) {
        uint64_t got;
        bpref_observe (&d, off, size);
        got = bpref_read (l, &d, off, size, dst, false);
        check_bytes (dst, off, got);
        reads++;
        hits += got == size;
        if (got < size && !async) {
            /* synchronous: fetch the missing block now, then serve the
             * rest from it */
            const struct bpref_detect one = { .mode = BPREF_SEQ, .seen = 1 };
            int n = bpref_plan (l, &one, off + got, 0, 1, blk, buf, 1);
            for (int i = 0; i < n; i++) {
                fill (buf[i], blk[i], block, block);
                bpref_filled (l, blk[i], (int64_t) block);
            }
            check_bytes (dst, off,
                         bpref_read (l, &d, off + got, size - got, dst, false));
        }
        if (async && qn < 56) {
            int n = bpref_plan (l, &d, off, size, 4, blk, buf, 8);
            for (int i = 0; i < n; i++) {
                qblk[qn] = blk[i];
                qbuf[qn++] = buf[i];
            }
        }
        /* the fetcher: one block per per_block ticks, in order */
        if (qn && ++busy >= per_block) {
            fill (qbuf[0], qblk[0], block, block);
            bpref_filled (l, qblk[0], (int64_t) block);
            memmove (qblk, qblk + 1, (size_t) (qn - 1) * sizeof (qblk[0]));
            memmove (qbuf, qbuf + 1, (size_t) (qn - 1) * sizeof (qbuf[0]));
            qn--;
            busy = 0;
        }
    }
    bpref_stats (l, &s);
    if (out)
        *out = s;
    bpref_list_free (l);
    return (int) (hits * 1000 / reads);
}

static void test_hit_rates (void **state)
{
    struct bpref_stats s;
    int seq_async, seq_sync, stride, slow;

    (void) state;
    /* 128 KiB sequential reads of 1 MiB blocks, the GFS faster than the
     * reader (a block every 4 reads, 8 reads to consume it) */
    seq_async = simulate (128 * MiB, 128 * KiB, 128 * KiB, 4, true, &s);
    seq_sync = simulate (128 * MiB, 128 * KiB, 128 * KiB, 4, false, NULL);
    print_message ("# sequential 128 KiB: async read-ahead %d/1000 hits, "
                   "synchronous %d/1000; %llu blocks fetched, %llu wasted\n",
                   seq_async, seq_sync, (unsigned long long) s.fetched,
                   (unsigned long long) s.wasted);
    assert_true (seq_async >= 990);
    assert_true (seq_sync <= 875); /* the paper's 7/8 */
    assert_true (s.wasted <= 4);   /* read ahead past the end */
    /* 64 KiB every 3 MiB */
    stride = simulate (256 * MiB, 64 * KiB, 3 * MiB, 1, true, &s);
    print_message ("# stride 64 KiB / 3 MiB: %d/1000 hits\n", stride);
    assert_true (stride >= 900);
    /* the reader faster than the GFS: fewer hits, every byte right */
    slow = simulate (32 * MiB, 128 * KiB, 128 * KiB, 16, true, &s);
    print_message ("# GFS slower than the reader: %d/1000 hits\n", slow);
    assert_true (slow < seq_async);
}

/* A real fetcher thread, the reader waiting for blocks in flight. */
struct fetcher {
    struct bpref_list *l;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t blk[256];
    void *buf[256];
    int head, tail;
    bool stop;
};

static void *fetch_main (void *arg)
{
    struct fetcher *f = arg;

    pthread_mutex_lock (&f->mu);
    for (;;) {
        while (f->head == f->tail && !f->stop)
            pthread_cond_wait (&f->cv, &f->mu);
        if (f->head == f->tail)
            break;
        {
            uint64_t blk = f->blk[f->tail % 256];
            void *buf = f->buf[f->tail % 256];
            f->tail++;
            pthread_mutex_unlock (&f->mu);
            fill (buf, blk, 64 * KiB, 64 * KiB);
            bpref_filled (f->l, blk, (int64_t) (64 * KiB));
            pthread_mutex_lock (&f->mu);
        }
    }
    pthread_mutex_unlock (&f->mu);
    return NULL;
}

static void test_thread (void **state)
{
    struct fetcher f = { .mu = PTHREAD_MUTEX_INITIALIZER,
                         .cv = PTHREAD_COND_INITIALIZER };
    static unsigned char dst[32 * 1024];
    struct bpref_detect d = { 0 };
    struct bpref_stats s;
    uint64_t blk[8], served = 0;
    void *buf[8];
    pthread_t th;

    (void) state;
    assert_non_null ((f.l = bpref_list_new (8, 64 * KiB, NULL)));
    assert_int_equal (pthread_create (&th, NULL, fetch_main, &f), 0);
    for (uint64_t off = 0; off < 16 * MiB; off += 32 * KiB) {
        uint64_t got;
        int n;
        bpref_observe (&d, off, 32 * KiB);
        got = bpref_read (f.l, &d, off, 32 * KiB, dst, true);
        check_bytes (dst, off, got);
        served += got;
        n = bpref_plan (f.l, &d, off, 32 * KiB, 6, blk, buf, 8);
        pthread_mutex_lock (&f.mu);
        for (int i = 0; i < n; i++) {
            f.blk[f.head % 256] = blk[i];
            f.buf[f.head % 256] = buf[i];
            f.head++;
        }
        pthread_cond_signal (&f.cv);
        pthread_mutex_unlock (&f.mu);
    }
    pthread_mutex_lock (&f.mu);
    f.stop = true;
    pthread_cond_signal (&f.cv);
    pthread_mutex_unlock (&f.mu);
    pthread_join (th, NULL);
    bpref_stats (f.l, &s);
    print_message ("# a fetcher thread: %llu of %llu reads hits, %llu after "
                   "a wait, %llu MiB served\n",
                   (unsigned long long) s.hits, (unsigned long long) s.reads,
                   (unsigned long long) s.waited,
                   (unsigned long long) (served / MiB));
    assert_true (s.hits + s.waited >= s.reads - 2); /* the first two miss */
    bpref_list_free (f.l);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_detect),
        cmocka_unit_test (test_list),
        cmocka_unit_test (test_hit_rates),
        cmocka_unit_test (test_thread),
    };
    return UNIT_RUN (tests);
}

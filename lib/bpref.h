/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bpref.h - the block cache's read-ahead: a pattern detector and a list
 * of prefetched blocks (issue 18)
 *
 * The detector looks at a descriptor's last two reads (offset, size) and
 * a recorded stride, as the Sunway paper's prefetch engine does: a read
 * that starts where the last one ended is sequential; the same distance
 * between starts twice in a row, with the same size, is a stride.
 * Anything else is random, and random reads
 * are not read ahead (the paper prefetches them as sequential; that costs
 * a random reader a block per read, and tier's bound is 5%).
 *
 * The list holds up to nbuf blocks of `block` bytes (power of two) in
 * memory the caller gives (the NVDIMM tier's map) or allocates.  For each
 * read, bpref_plan claims buffers for the blocks the pattern will need
 * next, up to `depth` ahead, and the caller's fetcher fills them
 * asynchronously (bpref_filled); bpref_read serves what full buffers hold
 * from the read's start -- all of it (a hit), a first part (partial: the
 * caller reads the rest from the GFS), or nothing -- and may wait for a
 * block being filled.  A block is freed once every byte of it was served,
 * or once the pattern has moved past it; a block read ahead and freed
 * unread is counted as waste.  Thread-safe (one mutex): the reader and
 * the fetcher meet here.  libc only: the interposer links it.
 */
#ifndef TIER_BPREF_H
#define TIER_BPREF_H

#include <stdbool.h>
#include <stdint.h>

enum bpref_mode { BPREF_NONE, BPREF_SEQ, BPREF_STRIDE };

struct bpref_detect {
    uint64_t off[2], len[2]; /* the last two reads, newest first */
    int seen;                /* how many of them (0..2) */
    int64_t stride;          /* the last distance between starts */
    enum bpref_mode mode;
};

void bpref_observe (struct bpref_detect *d, uint64_t off, uint64_t len);

/* The offsets of the next n reads the pattern predicts (each of the last
 * read's size): how many were written (0 for BPREF_NONE). */
int bpref_predict (const struct bpref_detect *d, int n, uint64_t *out);

struct bpref_stats {
    uint64_t reads;   /* bpref_read calls */
    uint64_t hits;    /* served whole from full buffers */
    uint64_t partial; /* served in part */
    uint64_t waited;  /* ... after waiting for a fill */
    uint64_t bytes;   /* served */
    uint64_t fetched; /* blocks filled */
    uint64_t wasted;  /* filled, freed with nothing served */
};

struct bpref_list;

/* A list of nbuf blocks of block bytes (a power of two, 4 KiB..1 GiB) in
 * mem (nbuf * block bytes), or in memory of its own if mem is NULL.  NULL
 * with errno EINVAL or ENOMEM. */
struct bpref_list *bpref_list_new (unsigned nbuf, uint64_t block, void *mem);
void bpref_list_free (struct bpref_list *l);

/* After d observed the read [off, off + len): claim buffers for the
 * blocks the pattern needs next, up to depth blocks ahead, that are not
 * listed yet.  blk[i] and buf[i] (block bytes to fill) for each, at most
 * max; how many.  The caller fetches each and calls bpref_filled. */
int bpref_plan (struct bpref_list *l, const struct bpref_detect *d,
                uint64_t off, uint64_t len, unsigned depth, uint64_t *blk,
                void **buf, int max);

/* Block blk was filled with n bytes (fewer at the file's end), or its
 * fetch failed (n < 0: the buffer is free again). */
void bpref_filled (struct bpref_list *l, uint64_t blk, int64_t n);

/* Serve [off, off + len) into dst from the list, from off on: the bytes
 * served (len: a hit; fewer: read the rest elsewhere).  A block being
 * filled is waited for when wait is true.  Frees what is used up, and,
 * for a pattern d (may be NULL), the blocks it has moved past. */
uint64_t bpref_read (struct bpref_list *l, const struct bpref_detect *d,
                     uint64_t off, uint64_t len, void *dst, bool wait);

void bpref_stats (struct bpref_list *l, struct bpref_stats *s);

/* Forget every block (the file was written or truncated); fills in
 * flight are dropped when they land. */
void bpref_invalidate (struct bpref_list *l);

#endif /* !TIER_BPREF_H */

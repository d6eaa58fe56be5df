/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bdrain.h - the block cache's drain: a write log's records applied to
 * their GFS files, in order (issue 18)
 *
 * The drain runs with the job's credentials and writes through the
 * descriptors the job's processes handed over when they opened the files
 * (so a file renamed or unlinked since drains where it went).  One pass
 * walks the committed records from the log's tail: a write is a pwrite
 * (short writes and EINTR continued), a truncate an ftruncate.  Then
 * every file the pass touched is made durable (fdatasync), and only then
 * does the log's tail move past the pass's records: a record is free
 * only once its GFS range is.
 *
 * Applying records again is harmless: after a drain killed anywhere, the
 * next pass starts at the same tail and applies the same records in the
 * same order, so every file ends as if each acknowledged write had
 * reached it once.
 *
 * A failure (EIO, ENOSPC, EACCES, EDQUOT from the GFS) stops the pass at
 * the record that failed: the records before it are synced and freed, it
 * and those after it stay, and the result names the file, the record and
 * the error; the next pass tries it again.  A record for a file the job
 * never opened (no descriptor: only a user who wrote into the log by hand
 * makes one) is passed over and counted as refused.
 */
#ifndef TIER_BDRAIN_H
#define TIER_BDRAIN_H

#include <stdint.h>

#include "blog.h"
#include "error.h"

/* The descriptor of file id, or -1 if the job never opened it. */
typedef int (*bdrain_fd_f) (void *arg, uint32_t file);

struct bdrain_result {
    uint64_t records;        /* applied, durable and freed */
    uint64_t bytes;          /* of their payloads */
    uint64_t abandoned;      /* never acknowledged: passed over */
    uint64_t refused;        /* for files the job never opened */
    enum blog_state stopped; /* BLOG_EMPTY, BLOG_PENDING (a record
                                    * still being written), BLOG_READY (the
                                    * byte budget was spent, or a failure)
                                    * or BLOG_DAMAGED */
    int err;                 /* the failure's errno, or 0 */
    uint32_t err_file;       /* ... its file and record */
    uint64_t err_seq;
};

/* One pass over at most max_bytes of payload (0: no limit).  0, or -1 with
 * error when it failed (r->err and the file, or a damaged log: r->stopped
 * BLOG_DAMAGED) -- what it applied before is freed either way. */
int bdrain_pass (struct blog *b, bdrain_fd_f fd_of, void *arg,
                 uint64_t max_bytes, struct bdrain_result *r,
                 tier_error_t *error);

#endif /* !TIER_BDRAIN_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bdrain.c - the block cache's drain (see bdrain.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "bdrain.h"

/* tests/unit/test_bdrain.c kills the drain at these points */
#ifndef BDRAIN_HOOK
#define BDRAIN_HOOK(point) \
    do { \
    } while (0)
#endif

#define TOUCHED_MAX 64 /* files synced at once: a pass ends when full */

struct pass {
    int fds[TOUCHED_MAX];
    uint32_t files[TOUCHED_MAX];
    int n;
};

static bool touched (const struct pass *p, uint32_t file)
{
    for (int i = 0; i < p->n; i++)
        if (p->files[i] == file)
            return true;
    return false;
}

/* Remember fd for the sync (once applied: a file whose write failed is
 * not synced, so that the records before it can be freed). */
static void touch (struct pass *p, int fd, uint32_t file)
{
    if (!touched (p, file) && p->n < TOUCHED_MAX) {
        p->fds[p->n] = fd;
        p->files[p->n++] = file;
    }
}

static int apply_write (int fd, const struct blog_view *v)
{
    const char *buf = v->payload;
    uint64_t done = 0;

    while (done < v->length) {
        ssize_t n = pwrite (fd, buf + done, (size_t) (v->length - done),
                            (off_t) (v->offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        done += (uint64_t) n;
        BDRAIN_HOOK ("wrote");
    }
    return 0;
}

static int apply (int fd, const struct blog_view *v)
{
    int rc;

    if (v->offset > (uint64_t) INT64_MAX
        || v->length > (uint64_t) INT64_MAX - v->offset) {
        errno = EFBIG;
        return -1;
    }
    if (v->type == BLOG_WRITE)
        return apply_write (fd, v);
    while ((rc = ftruncate (fd, (off_t) v->offset)) < 0 && errno == EINTR)
        ;
    return rc;
}

static int fail (struct bdrain_result *r, const struct blog_view *v, int e,
                 tier_error_t *error)
{
    r->err = e;
    r->err_file = v->file;
    r->err_seq = v->seq;
    r->stopped = BLOG_READY;
    errno = e;
    return tier_errprintf (error,
                           "record %llu (file %u, %llu bytes at "
                           "%llu): %s",
                           (unsigned long long) v->seq, (unsigned) v->file,
                           (unsigned long long) v->length,
                           (unsigned long long) v->offset, strerror (e));
}

/* Make the pass's files durable, then free its records (up to pos). */
static int settle (struct blog *b, struct pass *p, uint64_t pos,
                   const struct blog_view *failed, struct bdrain_result *r,
                   uint64_t records, uint64_t bytes, tier_error_t *error)
{
    for (int i = 0; i < p->n; i++)
        if (fdatasync (p->fds[i]) < 0) {
            struct blog_view v = { .file = p->files[i], .seq = blog_tail (b) };
            /* nothing of the pass is freed: all of it is tried again */
            return fail (r, failed ? failed : &v, errno, error);
        }
    BDRAIN_HOOK ("synced");
    if (pos != blog_tail (b) && blog_advance (b, pos) < 0)
        return tier_errprintf (error, "cannot persist the log's tail: %s",
                               strerror (errno));
    r->records += records;
    r->bytes += bytes;
    return 0;
}

int bdrain_pass (struct blog *b, bdrain_fd_f fd_of, void *arg,
                 uint64_t max_bytes, struct bdrain_result *r,
                 tier_error_t *error)
{
    uint64_t pos = blog_tail (b), records = 0, bytes = 0;
    struct pass p = { .n = 0 };
    struct blog_view v;
    int fd;

    memset (r, 0, sizeof (*r));
    for (;;) {
        enum blog_state st = blog_peek (b, pos, &v, error);

        if (st == BLOG_DAMAGED) {
            r->stopped = st;
            (void) settle (b, &p, pos, NULL, r, records, bytes, NULL);
            return -1;
        }
        if (st == BLOG_EMPTY || st == BLOG_PENDING
            || (max_bytes && bytes >= max_bytes)) {
            r->stopped = st;
            break;
        }
        if (st == BLOG_ABANDONED || v.type == BLOG_PAD) {
            r->abandoned += st == BLOG_ABANDONED;
            pos = v.seq + v.total;
            continue;
        }
        if ((fd = fd_of (arg, v.file)) < 0) {
            r->refused++;
            pos = v.seq + v.total;
            continue;
        }
        if (!touched (&p, v.file) && p.n == TOUCHED_MAX) {
            r->stopped = BLOG_READY; /* the rest in the next pass */
            break;
        }
        if (apply (fd, &v) < 0) {
            int e = errno;
            (void) settle (b, &p, pos, &v, r, records, bytes, NULL);
            return fail (r, &v, e, error);
        }
        touch (&p, fd, v.file);
        BDRAIN_HOOK ("applied");
        records++;
        bytes += v.length;
        pos = v.seq + v.total;
    }
    return settle (b, &p, pos, NULL, r, records, bytes, error);
}

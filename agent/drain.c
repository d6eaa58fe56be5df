/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* drain.c - the block cache's drain child (see drain.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/bdrain.h"
#include "lib/blog.h"
#include "lib/clock.h"
#include "drain.h"

static const struct chmsg_type drmsg_types[] = {
    { DRMSG_FILE, "file" },     { DRMSG_FLUSH, "flush" },
    { DRMSG_END, "end" },       { DRMSG_PROGRESS, "progress" },
    { DRMSG_FAILED, "failed" }, { DRMSG_FLUSHED, "flushed" },
    { DRMSG_ENDED, "ended" },   { DRMSG_DAMAGED, "damaged" },
};

const struct chmsg_proto drmsg_proto = {
    .channel = "drain",
    .version = 1,
    .types = drmsg_types,
    .ntypes = CHMSG_NTYPES (drmsg_types),
};

#define FLUSHES_MAX 64
#define RETRY_MS 1000   /* after a failed pass */
#define IDLE_MS 200     /* the channel's poll with nothing to do */
#define ORPHAN_MS 60000 /* alone and empty this long: exit */

uint64_t drain_budget (struct drain_pace *p, uint64_t used, uint64_t cap,
                       bool flushing, uint64_t trickle, int tick_ms)
{
    uint64_t pct = cap ? used * 100 / cap : 0;
    uint64_t b;

    if (pct >= DRAIN_HIGH_PCT)
        p->hurry = true;
    else if (pct < DRAIN_LOW_PCT)
        p->hurry = false;
    if (flushing || p->hurry || trickle == 0)
        return 0;
    b = trickle / 1000 * (uint64_t) (tick_ms > 0 ? tick_ms : 1);
    return b ? b : 1;
}

struct drain {
    struct blog *b;
    int chan;
    bool chan_gone; /* the agent died: drain on alone */
    int fds[DRAIN_FILES_MAX];
    struct {
        int64_t id;
        uint64_t upto;
    } flushes[FLUSHES_MAX];
    int nflushes;
    bool ending;
    struct drain_pace pace;
    struct bdrain_result total;
    uint64_t told_records, told_bytes, told_used;
    int64_t told_ms, retry_ms;
    int fail_errno;
    uint32_t fail_file;
    int64_t empty_ms; /* since when the log is empty, or 0 */
};

static int fd_of (void *arg, uint32_t file)
{
    const struct drain *d = arg;

    return file < DRAIN_FILES_MAX ? d->fds[file] : -1;
}

/* One message of the agent. */
static void handle (struct drain *d)
{
    json_t *body = NULL;
    json_int_t id = 0;
    tier_error_t e;
    int type, fd = -1, nfds = 0;

    if (chmsg_recv (d->chan, &drmsg_proto, &type, &body, &fd, &nfds, 1, 1000,
                    &e)
        < 0) {
        if (errno == ECONNRESET || errno == ENODATA)
            d->chan_gone = true;
        return;
    }
    switch (type) {
        case DRMSG_FILE:
            if (nfds == 1 && json_unpack (body, "{s:I}", "file", &id) == 0
                && id >= 0 && id < DRAIN_FILES_MAX) {
                if (d->fds[id] >= 0)
                    (void) close (d->fds[id]);
                d->fds[id] = fd;
                fd = -1;
                d->retry_ms = 0; /* a new descriptor: try at once */
            }
            break;
        case DRMSG_FLUSH:
            if (json_unpack (body, "{s:I}", "id", &id) == 0) {
                if (d->nflushes == FLUSHES_MAX)
                    d->nflushes--; /* the newest covers the one dropped */
                d->flushes[d->nflushes].id = id;
                d->flushes[d->nflushes++].upto = blog_head (d->b);
            }
            break;
        case DRMSG_END:
            d->ending = true;
            break;
        default:
            break;
    }
    if (fd >= 0)
        (void) close (fd);
    json_decref (body);
}

static void tell (struct drain *d, int type, const char *fmt, ...)
{
    json_t *body = NULL;
    va_list ap;

    if (d->chan_gone)
        return;
    va_start (ap, fmt);
    body = json_vpack_ex (NULL, 0, fmt, ap);
    va_end (ap);
    if (chmsg_send (d->chan, &drmsg_proto, true, type, body, NULL, 0, 5000,
                    NULL)
        < 0)
        d->chan_gone = true;
}

/* Flushes whose records are all freed now. */
static void answer_flushes (struct drain *d)
{
    uint64_t tail = blog_tail (d->b);
    int k = 0;

    for (int i = 0; i < d->nflushes; i++) {
        if (d->flushes[i].upto <= tail)
            tell (d, DRMSG_FLUSHED, "{s:I s:I}", "id",
                  (json_int_t) d->flushes[i].id, "tail", (json_int_t) tail);
        else
            d->flushes[k++] = d->flushes[i];
    }
    d->nflushes = k;
}

/* One pass; false once the log is damaged. */
static bool pass (struct drain *d, const struct drain_arg *da, int64_t now)
{
    struct bdrain_result r;
    tier_error_t e;
    uint64_t budget;

    if (d->retry_ms && now < d->retry_ms)
        return true;
    budget = drain_budget (&d->pace, blog_used (d->b), blog_capacity (d->b),
                           d->nflushes > 0 || d->ending, da->trickle,
                           da->tick_ms);
    if (bdrain_pass (d->b, fd_of, d, budget, &r, &e) < 0) {
        if (r.stopped == BLOG_DAMAGED) {
            tell (d, DRMSG_DAMAGED, "{s:s}", "error", e.text);
            return false;
        }
        if (r.err != d->fail_errno || r.err_file != d->fail_file)
            tell (d, DRMSG_FAILED, "{s:I s:I s:i s:s}", "file",
                  (json_int_t) r.err_file, "seq", (json_int_t) r.err_seq,
                  "errno", r.err, "error", e.text);
        d->fail_errno = r.err;
        d->fail_file = r.err_file;
        d->retry_ms = now + RETRY_MS;
    }
    else {
        d->fail_errno = 0;
        d->retry_ms = 0;
    }
    d->total.records += r.records;
    d->total.bytes += r.bytes;
    d->total.abandoned += r.abandoned;
    d->total.refused += r.refused;
    return true;
}

static void progress (struct drain *d, int64_t now)
{
    uint64_t used = blog_used (d->b);

    /* at most once a second; at once when the log became empty (the
     * agent answers its waiters then) */
    if (!(used == 0 && d->told_used != 0)
        && ((d->total.records == d->told_records
             && d->total.bytes == d->told_bytes)
            || now - d->told_ms < 1000))
        return;
    tell (d, DRMSG_PROGRESS, "{s:I s:I s:I s:I}", "records",
          (json_int_t) d->total.records, "bytes", (json_int_t) d->total.bytes,
          "used", (json_int_t) used, "tail", (json_int_t) blog_tail (d->b));
    d->told_used = used;
    d->told_records = d->total.records;
    d->told_bytes = d->total.bytes;
    d->told_ms = now;
}

int drain_main (void *arg, int chan)
{
    const struct drain_arg *da = arg;
    struct drain *d = calloc (1, sizeof (*d));
    tier_error_t e;
    int rc = 0;

    if (!d)
        return 1;
    d->chan = chan;
    for (int i = 0; i < DRAIN_FILES_MAX; i++)
        d->fds[i] = -1;
    if (!(d->b = blog_open (da->logfd, da->blog_flags, &e))) {
        tell (d, DRMSG_DAMAGED, "{s:s}", "error", e.text);
        free (d);
        return 2;
    }
    for (;;) {
        struct pollfd p = { .fd = chan, .events = POLLIN };
        bool busy = blog_used (d->b) > 0 && !d->retry_ms;
        int64_t now;

        if (poll (&p, d->chan_gone ? 0 : 1, busy ? da->tick_ms : IDLE_MS) > 0)
            handle (d);
        now = tier_now_ms ();
        if (!pass (d, da, now)) {
            rc = 3;
            break;
        }
        answer_flushes (d);
        progress (d, now);
        if (blog_used (d->b) > 0)
            d->empty_ms = 0;
        else if (!d->empty_ms)
            d->empty_ms = now;
        /* the job ended and all is on the GFS; or the agent is gone and
         * nothing came for a while (a new agent would have taken the
         * descriptors and ended this one) */
        if (blog_used (d->b) == 0
            && (d->ending
                || (d->chan_gone && now - d->empty_ms >= ORPHAN_MS))) {
            tell (d, DRMSG_ENDED, "{s:I s:I s:I s:I}", "records",
                  (json_int_t) d->total.records, "bytes",
                  (json_int_t) d->total.bytes, "abandoned",
                  (json_int_t) d->total.abandoned, "refused",
                  (json_int_t) d->total.refused);
            break;
        }
    }
    for (int i = 0; i < DRAIN_FILES_MAX; i++)
        if (d->fds[i] >= 0)
            (void) close (d->fds[i]);
    blog_close (d->b);
    free (d);
    return rc;
}

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_fetch.c - the replica cache's copies: the fetch queue, its
 * waiters, and the fetcher child
 *
 * One fetch per key at a time on a node: concurrent misses wait for the
 * copy in flight (their replies are deferred).  A fetch waits for a GFS
 * stream (streams.c: at most GfsStreams at once, the queue shared fairly
 * between users), then runs in a fetcher: a child started with child.c
 * ("tierd-fetch"), which stays root (it writes the BB's root-owned
 * directories; it reads the source only through the descriptor the task
 * passed, spec->keep) and dies with the agent.  It takes the key's
 * cross-node lock (bblock.h), copies into BBDir/.tmp/NODE/ with the copy
 * engine (fsync; the source must be the version the key names when the
 * copy starts and still when it ends, else ESTALE and the opens read the
 * GFS), renames the complete file into place, and reports one message
 * of replica_msg.h.  A replica is never visible half-written.
 *
 * The stall watchdog: while it waits for the lock or copies, the fetcher
 * says it is alive (progress, at most once a second, only when a chunk
 * moved or the lock was looked at); one that says nothing for
 * StallTimeout is killed and, if it does not end (a GFS read that is
 * never answered keeps it in the kernel), abandoned by child.c.  Either
 * way the fetch fails now: its stream goes back, its waiters read the
 * GFS (their own open, not the descriptor the stuck fetcher holds), the
 * log names the file and the job, and the next open of the file fetches
 * it again (once the stuck fetcher's lock is stale: BBLockStale).
 *
 * Owns struct fetch and struct waiter.  Calls child.c, bblock.c,
 * replica_msg.c, streams.c, the copy engine, replica_index.c and
 * replica.c's replies.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/log.h"
#include "bblock.h"
#include "child.h"
#include "replica.h"
#include "replica_msg.h"
#include "streams.h"

/* What the fetcher is given (filled in the agent, read in the child). */
struct fetch_ctx {
    int srcfd, scopefd, tmpfd;
    const char *key;
    const struct stat *expect; /* the version key names */
    const char *node, *boot;
    char scope_path[PATH_MAX], tmp_path[PATH_MAX];
    uint64_t size;
    mode_t mode;
    uint64_t stale_s, wait_s;
    struct tier_copy_limit *limit; /* the user's bucket */
    uint64_t bytes;                /* copied */
    char err[512];
    int chan;        /* to the agent */
    int64_t beat_ms; /* the last progress sent */
};

#define BEAT_MS 1000 /* progress at most this often */

/* ------------------------------------------------------ in the fetcher */

/* Tell the agent the fetch is alive (bytes: copied so far). */
static void beat (struct fetch_ctx *f, uint64_t bytes)
{
    struct repmsg m = { .type = REPMSG_PROGRESS, .bytes = bytes };
    int64_t now = tier_now_ms ();

    if (now - f->beat_ms < BEAT_MS)
        return;
    f->beat_ms = now;
    (void) repmsg_send (f->chan, &m, -1);
}

static void on_copy_progress (uint64_t done, uint64_t total, void *arg)
{
    (void) total;
    beat (arg, done);
}

static bool replica_present (void *arg)
{
    const struct fetch_ctx *f = arg;
    struct stat st;

    return fstatat (f->scopefd, f->key, &st, AT_SYMLINK_NOFOLLOW) == 0
           && S_ISREG (st.st_mode) && (uint64_t) st.st_size == f->size;
}

/* Copy the source into .tmp/NODE/KEY and publish it as SCOPE/KEY.
 *
 * Read the source around the page cache (O_DIRECT) where the file
 * system allows: the data goes to the BB, not to this node's tasks, and
 * cached pages would be dropped and read again whenever another task
 * opens the source (FUSE without keep_cache, NFS on a change).  Else no
 * readahead, for the same reason.  The open file description is the
 * task's own, which waits for the answer: restore its flags (if this
 * process is killed first, the interposer does it, or gives the task a
 * fresh open when the agent never answers).
 */
static int copy_publish (struct fetch_ctx *f)
{
    struct tier_copy_opts opts = {
        .flags = TIER_COPY_MODE,
        .mode = f->mode,
        .threads = 1,
        .limit = f->limit, /* the user's UserBandwidth */
        .progress = on_copy_progress,
        .progress_arg = f,
        /* the copy must be of the version its key names: the source may
         * have changed while the request was queued or waited for the
         * lock, and the engine only compares with the copy's start */
        .expect = f->expect,
    };
    struct tier_copy_result res;
    tier_error_t e;
    int rc, fl, err;
    bool direct;

    (void) unlinkat (f->tmpfd, f->key, 0); /* a leftover of a crash */
    fl = fcntl (f->srcfd, F_GETFL);
    direct = fl >= 0 && fcntl (f->srcfd, F_SETFL, fl | O_DIRECT) == 0;
    if (direct)
        opts.methods = TIER_COPY_RW;
    else
        (void) posix_fadvise (f->srcfd, 0, 0, POSIX_FADV_RANDOM);
    rc = tier_copy_fd (f->srcfd, f->tmpfd, f->key, &opts, &res, &e);
    err = rc < 0 ? errno : 0;
    if (rc < 0 && direct && err == EINVAL) {
        /* the file system takes O_DIRECT but not our buffers: buffered */
        (void) fcntl (f->srcfd, F_SETFL, fl);
        direct = false;
        opts.methods = 0;
        (void) posix_fadvise (f->srcfd, 0, 0, POSIX_FADV_RANDOM);
        rc = tier_copy_fd (f->srcfd, f->tmpfd, f->key, &opts, &res, &e);
        err = rc < 0 ? errno : 0;
    }
    if (fl >= 0)
        (void) fcntl (f->srcfd, F_SETFL, fl);
    if (!direct)
        (void) posix_fadvise (f->srcfd, 0, 0, POSIX_FADV_NORMAL);
    if (rc < 0) {
        (void) snprintf (f->err, sizeof (f->err), "%s%.400s",
                         err == ESTALE ? "the source changed since it was "
                                         "opened: "
                                       : "",
                         e.text);
        return -1;
    }
    if (renameat (f->tmpfd, f->key, f->scopefd, f->key) < 0) {
        (void) snprintf (f->err, sizeof (f->err), "publish: %s",
                         strerror (errno));
        (void) unlinkat (f->tmpfd, f->key, 0);
        return -1;
    }
    (void) fsync (f->scopefd);
    f->bytes = res.bytes;
    return 0;
}

/* The lock's wait: alive, and is the replica there already? */
static bool lock_wait_done (void *arg)
{
    beat (arg, 0);
    return replica_present (arg);
}

static enum repmsg_type fetch_run (struct fetch_ctx *f)
{
    char lock[BBLOCK_NAME_MAX];
    struct bblock l;
    int rc;

    (void) snprintf (lock, sizeof (lock), "%s.lock", f->key);
    bblock_init (&l, f->scopefd, lock, f->node, f->boot, f->stale_s, f->wait_s);
    l.done = lock_wait_done;
    l.done_arg = f;
    if ((rc = bblock_take (&l, f->err, sizeof (f->err))) == 1)
        return REPMSG_FOUND;
    if (rc < 0)
        return REPMSG_FAILED;
    if (replica_present (f)) {
        bblock_release (&l);
        return REPMSG_FOUND;
    }
    (void) bblock_beat (&l);
    rc = copy_publish (f);
    bblock_release (&l);
    return rc == 0 ? REPMSG_COPIED : REPMSG_FAILED;
}

/* The fetcher's main (root; child.c made it): one result. */
static int fetcher_main (void *arg, int chan)
{
    struct fetch_ctx *f = arg;
    struct repmsg m = { .type = REPMSG_FAILED };

    f->chan = chan;
    f->beat_ms = tier_now_ms ();
    f->scopefd = open (f->scope_path,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    f->tmpfd = open (f->tmp_path,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (f->scopefd < 0 || f->tmpfd < 0)
        (void) snprintf (f->err, sizeof (f->err), "%.400s: %.100s", f->tmp_path,
                         strerror (errno));
    else
        m.type = fetch_run (f);
    m.bytes = f->bytes;
    m.error = f->err[0] ? f->err : "failed";
    (void) repmsg_send (chan, &m, -1); /* the agent is gone: nobody to
                                         * tell */
    return 0;
}

/* ------------------------------------------------------- in the agent */

static void waiter_free_all (struct fetch *f)
{
    while (f->waiters) {
        struct waiter *w = f->waiters;
        f->waiters = w->next;
        free (w);
    }
}

static void fetch_remove (struct agent *a, struct fetch *f)
{
    struct replicas *r = a->replicas;
    struct fetch **pp = &r->fetches;

    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp)
        *pp = f->next;
    if (f->child)
        child_orphan (f->child); /* reaped by child.c */
    if (f->srcfd >= 0)
        close (f->srcfd);
    streams_done (a, &f->ticket);
    waiter_free_all (f);
    free (f->path);
    free (f);
}

/* The record of a fetch that ended with a replica (NULL: out of memory). */
static struct replica *fetch_record (struct agent *a, struct fetch *f,
                                     enum repmsg_type kind, uint64_t bytes)
{
    struct replicas *r = a->replicas;
    struct replica *x;
    int64_t now = time (NULL);

    if (!(x = replica_index_find (r, f->id))
        && (x = replica_index_add (r, f->id))) {
        x->path = strdup (f->path);
        x->uid = f->uid;
        x->size = f->size;
        x->fetched = now;
        x->expires = f->ttl ? now + (int64_t) f->ttl : 0;
    }
    if (x && kind == REPMSG_COPIED && !x->owner) {
        x->owner = true;
        replica_index_account (r, x, +1);
        x->fetched = now;
        x->expires = f->ttl ? now + (int64_t) f->ttl : 0;
    }
    if (x) {
        x->used = now;
        x->batch = f->batch;
        replica_index_store (a, x);
    }
    if (kind == REPMSG_COPIED) {
        r->fetched_bytes += bytes;
        tier_log (LOG_INFO, "replica of %s fetched (%llu bytes)", f->path,
                  (unsigned long long) bytes);
    }
    return x;
}

/* Answer one waiter: the replica x, or (NULL) read the GFS. */
static void answer (struct agent *a, struct fetch *f, struct waiter *w,
                    struct replica *x, enum repmsg_type kind, uint64_t bytes,
                    const char *err)
{
    const struct store_job *job = w->has_job ? &w->job : NULL;
    char *body;
    int fd = -1;

    if (x && w->want_fd
        && (fd = replica_open_published (a->replicas, f->id, f->size)) < 0) {
        x = NULL;
        err = "the replica is gone";
    }
    if (x) {
        bool miss = kind == REPMSG_COPIED && w->miss;
        x->opens++;
        if (miss) {
            ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_MISSES, 1);
            ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_READ, bytes);
            ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, f->size);
        }
        else
            replica_count_hit (a, job, f->size);
        body = replica_reply (a->replicas, f->id, f->size, w->revalidate,
                              !miss);
    }
    else {
        json_t *o = replica_fallthrough (a, job, "%s",
                                         err && *err ? err : "the copy failed");
        ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_FAILURES, 1);
        body = o ? json_dumps (o, JSON_COMPACT) : NULL;
        json_decref (o);
    }
    w->c->waiting--;
    server_reply_fd (a, w->c, w->msgid, body, fd);
}

/* A fetch ended: record the replica, answer every waiter. */
static void fetch_finish (struct agent *a, struct fetch *f,
                          enum repmsg_type kind, uint64_t bytes,
                          const char *err)
{
    struct replicas *r = a->replicas;
    struct replica *x = NULL;

    f->done = true;
    if (f->child)
        r->running--;
    if (kind == REPMSG_COPIED || kind == REPMSG_FOUND)
        x = fetch_record (a, f, kind, bytes);
    else {
        /* the job that asked first: the one whose tasks read the GFS */
        char who[48] = "";
        for (struct waiter *w = f->waiters; w && !who[0]; w = w->next)
            if (w->has_job)
                (void) snprintf (who, sizeof (who), "job %u: ", w->job.job_id);
        tier_log (LOG_WARNING,
                  "%sreplica of %s not made: %s (read from the "
                  "GFS instead)",
                  who, f->path, err && *err ? err : "failed");
    }
    for (struct waiter *w = f->waiters; w; w = w->next)
        answer (a, f, w, x, kind, bytes, err);
    fetch_remove (a, f);
}

/* The fetcher's result. */
static void on_fetch_msg (struct agent *a, struct child *c, int type,
                          json_t *body, int *fds, int nfds, void *owner)
{
    struct fetch *f = owner;
    struct repmsg m;
    tier_error_t e;

    (void) c;
    (void) fds;
    (void) nfds;
    if (repmsg_unpack (type, body, &m, &e) < 0)
        tier_log (LOG_WARNING, "replica of %s: %s", f->path, e.text);
    else if (m.type == REPMSG_PROGRESS)
        ; /* alive (child.c's stall watchdog saw the message) */
    else if (!f->done)
        fetch_finish (a, f, m.type, m.bytes, m.error);
    json_decref (body);
}

/* A fetcher killed mid-copy leaves its part in .tmp/NODE/ (the copy
 * engine's .KEY.tier-XXXXXX.part): it does nothing more with it (a stuck
 * one dies as soon as its read returns), and a new fetch of the key
 * starts from scratch, under a name of its own. */
static void drop_part (struct agent *a, const struct fetch *f)
{
    char path[PATH_MAX], prefix[REPLICA_KEY_MAX + 16];
    struct dirent *de;
    size_t n;
    DIR *d;

    (void) snprintf (path, sizeof (path), "%.2048s/.tmp/%.64s", a->replicas->bb,
                     a->node);
    n = (size_t) snprintf (prefix, sizeof (prefix), ".%s.tier-", f->key);
    if (!(d = opendir (path)))
        return;
    while ((de = readdir (d))) {
        size_t len = strlen (de->d_name);
        if (len > n + 5 && !strncmp (de->d_name, prefix, n)
            && !strcmp (de->d_name + len - 5, ".part")
            && unlinkat (dirfd (d), de->d_name, 0) == 0)
            tier_log (LOG_DEBUG, "replica of %s: its part %s removed", f->path,
                      de->d_name);
    }
    closedir (d);
}

/* The fetcher ended without a result (with one, f is gone and this is
 * not called: fetch_remove orphaned the child), or it was killed for
 * making no progress and maybe abandoned (child.h). */
static void on_fetch_done (struct agent *a, struct child *c, int status,
                           void *owner)
{
    struct fetch *f = owner;
    char why[256];

    if (f->done)
        return;
    if (child_why (c))
        drop_part (a, f);
    if (child_why (c) == ESTALE)
        (void) snprintf (why, sizeof (why),
                         "no data from the GFS for %llu s (StallTimeout): "
                         "the fetcher was %s; the next open fetches it "
                         "again",
                         (unsigned long long) a->conf->stall_timeout,
                         child_abandoned (c) ? "stuck in a read that is "
                                               "never answered, and "
                                               "abandoned"
                                             : "killed");
    else
        (void) snprintf (why, sizeof (why),
                         "the fetcher ended without a result "
                         "(status %d)",
                         status);
    fetch_finish (a, f, REPMSG_FAILED, 0, why);
}

static int fetch_start (struct agent *a, struct fetch *f, tier_error_t *error)
{
    struct replicas *r = a->replicas;
    struct fetch_ctx ctx = {
        .srcfd = f->srcfd,
        .scopefd = -1,
        .tmpfd = -1,
        .key = f->key,
        .expect = &f->st,
        .node = a->node,
        .boot = r->boot,
        .size = f->size,
        .mode = f->mode,
        .stale_s = a->conf->bb_lock_stale ? a->conf->bb_lock_stale : 1,
        .wait_s = a->conf->replica_wait ? a->conf->replica_wait : 1,
        .limit = streams_limit (a, f->uid, NULL),
    };
    struct child_spec spec = {
        .name = "tierd-fetch",
        .keep = { f->srcfd },
        .nkeep = 1,
        .proto = &repmsg_fetch_proto,
        .main = fetcher_main,
        .arg = &ctx, /* the child's copy of it */
        .on_msg = on_fetch_msg,
        .on_done = on_fetch_done,
        .owner = f,
        /* StallTimeout: the progress watchdog (0: none) */
        .stall_ms = a->conf->stall_timeout > INT_MAX / 1000
                        ? INT_MAX
                        : (int) a->conf->stall_timeout * 1000,
    };

    (void) snprintf (ctx.scope_path, sizeof (ctx.scope_path),
                     "%.2048s/replicas/%.24s", r->bb, f->scope);
    (void) snprintf (ctx.tmp_path, sizeof (ctx.tmp_path), "%.2048s/.tmp/%.64s",
                     r->bb, a->node);
    spec.for_uid = f->uid;
    (void) snprintf (spec.title, sizeof (spec.title), "tierd-fetch %.100s",
                     f->id);
    if (!(f->child = child_start (a, &spec, error)))
        return -1;
    close (f->srcfd);
    f->srcfd = -1;
    r->running++;
    return 0;
}

/* The fetch's GFS stream is granted (streams.c: the node's GfsStreams,
 * fair between users): start its fetcher. */
static void fetch_go (struct agent *a, void *arg)
{
    struct fetch *f = arg;
    tier_error_t e;

    if (fetch_start (a, f, &e) < 0)
        fetch_finish (a, f, REPMSG_FAILED, 0, e.text);
}

struct fetch *replica_fetch_find (struct replicas *r, const char *id)
{
    for (struct fetch *f = r->fetches; f; f = f->next)
        if (!f->done && !strcmp (f->id, id))
            return f;
    return NULL;
}

void replica_fetch_queue (struct agent *a, struct fetch *f, struct waiter *w)
{
    struct replicas *r = a->replicas;
    struct fetch **pp = &r->fetches;
    char what[PATH_MAX + 32];

    w->miss = true;
    f->waiters = w;
    w->c->waiting++;
    /* append: the queue is served in arrival order within a user */
    while (*pp)
        pp = &(*pp)->next;
    *pp = f;
    (void) snprintf (what, sizeof (what), "replica of %s", f->path);
    streams_want (a, f->uid, STREAMS_REPLICA, what, fetch_go, f, &f->ticket);
}

void replica_conn_gone (struct agent *a, struct conn *c)
{
    struct replicas *r = a->replicas;

    if (!r)
        return;
    for (struct fetch *f = r->fetches; f; f = f->next) {
        struct waiter **pp = &f->waiters;
        while (*pp) {
            if ((*pp)->c == c) {
                struct waiter *w = *pp;
                *pp = w->next;
                free (w);
                c->waiting--;
            }
            else
                pp = &(*pp)->next;
        }
    }
}

void replica_fetch_fini (struct agent *a)
{
    struct replicas *r = a->replicas;

    while (r->fetches) {
        struct fetch *f = r->fetches;
        if (f->child)
            child_kill (f->child, SIGKILL);
        for (struct waiter *w = f->waiters; w; w = w->next)
            w->c->waiting--;
        fetch_remove (a, f);
    }
}

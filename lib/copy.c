/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* copy.c - the copy engine: data path, publication, worker pool, trees
 *
 * One call (tier_copy_fd or tier_copy_tree) owns a struct copy_ctx: the
 * options, the counters, the first error and a job queue.  A job is either
 * the start of a file (create its temporary, cut it into ranges) or one
 * range of a file; the thread that finishes the last range of a file
 * finishes it (verify, metadata, fsync, rename).  Tree directories are
 * reference counted (the walker, every file job and every subdirectory
 * hold one) so that a directory gets its mode and times, and its fsync,
 * after the last entry in it has been published.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "copy.h"

#define RW_BUFSIZE (1u << 20)           /* pread/pwrite buffer (at most) */
#define QUEUE_PER_THREAD 4              /* queued files per pool thread */
#define MAX_RANGES 65536u             /* per file */
#define TEMP_TRIES 100
#define TEMP_PREFIX ".tier-"
#define TEMP_SUFFIX ".part"
#define TEMP_RANDLEN 6
/* "." NAME ".tier-" XXXXXX ".part" */
#define TEMP_EXTRA (1 + sizeof (TEMP_PREFIX) - 1 + TEMP_RANDLEN \
                    + sizeof (TEMP_SUFFIX) - 1)

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/*
 * Bandwidth limit: a token bucket that may go into debt, so that a chunk
 * larger than the burst still passes, and concurrent takers queue up
 * behind each other's debt (each waits for its share).  A shared one lives
 * in its own MAP_SHARED mapping, so that the processes forked after it was
 * made share it; its mutex is process-shared and robust (a taker killed
 * inside the few instructions it holds it leaves it usable).  The
 * accounting is the bucket's own, computed from it, never from measured
 * sleeps (as the GFS emulator's throttle does).
 */

struct tier_copy_limit {
    pthread_mutex_t lock;
    bool shared;                        /* mmap'ed: munmap, not free */
    double rate;                        /* bytes per second; 0: unlimited */
    double burst;
    double tokens;
    uint64_t last_ns;
    uint64_t busy_end_ns;               /* the end of the current stall */
    struct tier_copy_limit_stats st;
};

static void limit_set_locked (struct tier_copy_limit *lim, uint64_t rate,
                              uint64_t burst)
{
    lim->rate = (double) rate;
    lim->burst = burst ? (double) burst : lim->rate / 10;
    if (lim->tokens > lim->burst)
        lim->tokens = lim->burst;
}

static int limit_init (struct tier_copy_limit *lim, uint64_t rate,
                       uint64_t burst, bool shared)
{
    pthread_mutexattr_t attr;
    int e;

    if ((e = pthread_mutexattr_init (&attr)))
        goto error;
    if ((shared && (e = pthread_mutexattr_setpshared (&attr,
                                                      PTHREAD_PROCESS_SHARED)))
        || (e = pthread_mutexattr_setrobust (&attr, PTHREAD_MUTEX_ROBUST))
        || (e = pthread_mutex_init (&lim->lock, &attr))) {
        pthread_mutexattr_destroy (&attr);
        goto error;
    }
    pthread_mutexattr_destroy (&attr);
    lim->shared = shared;
    limit_set_locked (lim, rate, burst);
    lim->tokens = lim->burst;
    lim->last_ns = lim->busy_end_ns = (uint64_t) tier_now_ns ();
    return 0;
error:
    errno = e;
    return -1;
}

struct tier_copy_limit *tier_copy_limit_create (uint64_t rate,
                                                uint64_t burst)
{
    struct tier_copy_limit *lim;

    if (!(lim = calloc (1, sizeof (*lim))))
        return NULL;
    if (limit_init (lim, rate, burst, false) < 0) {
        int e = errno;
        free (lim);
        errno = e;
        return NULL;
    }
    return lim;
}

struct tier_copy_limit *tier_copy_limit_create_shared (uint64_t rate,
                                                       uint64_t burst)
{
    struct tier_copy_limit *lim;

    lim = mmap (NULL, sizeof (*lim), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (lim == MAP_FAILED)
        return NULL;
    if (limit_init (lim, rate, burst, true) < 0) {
        int e = errno;
        (void) munmap (lim, sizeof (*lim));
        errno = e;
        return NULL;
    }
    return lim;
}

void tier_copy_limit_destroy (struct tier_copy_limit *lim)
{
    int saved = errno;

    if (lim) {
        pthread_mutex_destroy (&lim->lock);
        if (lim->shared)
            (void) munmap (lim, sizeof (*lim));
        else
            free (lim);
    }
    errno = saved;
}

/* A holder that died with the lock held left the bucket as it was
 * between two consistent states: take it over. */
static void limit_lock (struct tier_copy_limit *lim)
{
    if (pthread_mutex_lock (&lim->lock) == EOWNERDEAD)
        (void) pthread_mutex_consistent (&lim->lock);
}

void tier_copy_limit_set (struct tier_copy_limit *lim, uint64_t rate,
                          uint64_t burst)
{
    if (!lim)
        return;
    limit_lock (lim);
    limit_set_locked (lim, rate, burst);
    pthread_mutex_unlock (&lim->lock);
}

void tier_copy_limit_stats (struct tier_copy_limit *lim,
                            struct tier_copy_limit_stats *out)
{
    memset (out, 0, sizeof (*out));
    if (!lim)
        return;
    limit_lock (lim);
    *out = lim->st;
    out->rate = (uint64_t) lim->rate;
    out->burst = (uint64_t) lim->burst;
    pthread_mutex_unlock (&lim->lock);
}

/* Sleep until deadline (CLOCK_MONOTONIC), in slices, watching the flags.
 * Returns 0, or -1 with errno ECANCELED. */
static int sleep_until (uint64_t deadline, atomic_int *cancel,
                        atomic_int *stop)
{
    for (;;) {
        uint64_t now = (uint64_t) tier_now_ns (), until;
        struct timespec ts;

        if ((cancel && atomic_load (cancel)) || (stop && atomic_load (stop))) {
            errno = ECANCELED;
            return -1;
        }
        if (now >= deadline)
            return 0;
        until = MIN (deadline, now + 50000000ull);      /* 50 ms slices */
        ts.tv_sec = until / 1000000000ull;
        ts.tv_nsec = until % 1000000000ull;
        (void) clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
    }
}

static int limit_take (struct tier_copy_limit *lim, uint64_t bytes,
                       atomic_int *cancel, atomic_int *stop)
{
    uint64_t now, wait_ns = 0;

    limit_lock (lim);
    now = (uint64_t) tier_now_ns ();
    lim->st.bytes += bytes;
    lim->st.ops++;
    if (lim->rate > 0) {
        if (now > lim->last_ns)
            lim->tokens += (double) (now - lim->last_ns) * lim->rate / 1e9;
        if (lim->tokens > lim->burst)
            lim->tokens = lim->burst;
        lim->tokens -= (double) bytes;
        if (lim->tokens < 0) {
            uint64_t end;

            wait_ns = (uint64_t) (-lim->tokens / lim->rate * 1e9) + 1;
            end = now + wait_ns;
            lim->st.delayed_bytes += bytes;
            lim->st.delayed_ops++;
            lim->st.wait_ns += wait_ns;
            /* waits end in arrival order (the debt only grows while it
             * lasts): the union of the intervals grows by what sticks out */
            if (now >= lim->busy_end_ns)
                lim->st.stall_ns += wait_ns;
            else if (end > lim->busy_end_ns)
                lim->st.stall_ns += end - lim->busy_end_ns;
            if (end > lim->busy_end_ns)
                lim->busy_end_ns = end;
        }
    }
    if (now > lim->last_ns)
        lim->last_ns = now;
    pthread_mutex_unlock (&lim->lock);
    if (wait_ns == 0)
        return 0;
    return sleep_until (now + wait_ns, cancel, stop);
}

int tier_copy_limit_take (struct tier_copy_limit *lim, uint64_t bytes,
                          atomic_int *cancel)
{
    if (!lim)
        return 0;
    return limit_take (lim, bytes, cancel, NULL);
}

/*
 * Names.
 */

const char *tier_copy_method_name (unsigned int methods)
{
    static const char *names[] = {
        "none",
        "copy_file_range",
        "sendfile",
        "copy_file_range+sendfile",
        "read/write",
        "copy_file_range+read/write",
        "sendfile+read/write",
        "copy_file_range+sendfile+read/write",
    };

    return names[methods & TIER_COPY_METHODS_ALL];
}

static const char temp_chars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

int tier_copy_is_temp_name (const char *name)
{
    size_t len, tail = sizeof (TEMP_PREFIX) - 1 + TEMP_RANDLEN
                       + sizeof (TEMP_SUFFIX) - 1;
    const char *p;

    if (!name || name[0] != '.' || (len = strlen (name)) < 1 + tail)
        return 0;
    p = name + len - tail;
    if (strncmp (p, TEMP_PREFIX, sizeof (TEMP_PREFIX) - 1) != 0)
        return 0;
    p += sizeof (TEMP_PREFIX) - 1;
    for (int i = 0; i < TEMP_RANDLEN; i++)
        if (!p[i] || !strchr (temp_chars, p[i]))
            return 0;
    return strcmp (p + TEMP_RANDLEN, TEMP_SUFFIX) == 0;
}

/* Make a temporary name for name into buf (NAME_MAX + 1 bytes): the
 * name is shortened if the whole would exceed NAME_MAX. */
static void temp_name (const char *name, char *buf)
{
    static atomic_uint counter;
    unsigned char rnd[TEMP_RANDLEN];
    char suffix[TEMP_RANDLEN + 1];
    int keep = (int) MIN (strlen (name), NAME_MAX - TEMP_EXTRA);

    if (getrandom (rnd, sizeof (rnd), GRND_NONBLOCK) != sizeof (rnd)) {
        uint64_t x = (uint64_t) tier_now_ns () ^ ((uint64_t) getpid () << 32)
                     ^ atomic_fetch_add (&counter, 0x9e3779b9u);
        for (int i = 0; i < TEMP_RANDLEN; i++, x >>= 8)
            rnd[i] = (unsigned char) x;
    }
    for (int i = 0; i < TEMP_RANDLEN; i++)
        suffix[i] = temp_chars[rnd[i] % (sizeof (temp_chars) - 1)];
    suffix[TEMP_RANDLEN] = '\0';
    snprintf (buf, NAME_MAX + 1, ".%.*s" TEMP_PREFIX "%s" TEMP_SUFFIX, keep,
              name, suffix);
}

static bool valid_name (const char *name)
{
    return name && *name && !strchr (name, '/') && strcmp (name, ".") != 0
           && strcmp (name, "..") != 0 && strlen (name) <= NAME_MAX;
}

/*
 * The context of one call.
 */

enum job_kind {
    JOB_FILE,                           /* start a file */
    JOB_RANGE,                          /* copy one range of a started file */
};

struct fjob;

struct job {
    struct job *next;
    enum job_kind kind;
    struct fjob *f;
    off_t start, end;
};

struct copy_ctx {
    const struct tier_copy_opts *o;
    struct tier_copy_opts defaults;
    size_t chunk;
    uint64_t split;
    unsigned int nthreads;
    unsigned int methods;               /* allowed */
    uint64_t start_ns;

    atomic_int stop;                    /* an error stopped the copy */
    _Atomic uint64_t done, total;
    _Atomic uint64_t bytes, hole_bytes, holes;
    _Atomic uint64_t files, dirs, symlinks, skipped, errors;
    atomic_uint used;                   /* methods that moved data */

    pthread_mutex_t elock;              /* first error, reports */
    int err;
    tier_error_t error;
    pthread_mutex_t plock;              /* serialises progress calls */

    pthread_mutex_t qlock;              /* the pool */
    pthread_cond_t qcond;               /* a job, or the end */
    pthread_cond_t qspace;              /* room for another file */
    struct job *head, *tail;
    unsigned int queued_files, max_files;
    unsigned int active;
    bool closed;
    pthread_t *tids;
    unsigned int ntids;
};

struct worker {
    struct copy_ctx *ctx;
    char *buf;
    size_t bufsize;
};

struct dnode;

/* One file being copied. */
struct fjob {
    struct copy_ctx *ctx;
    struct dnode *dir;                  /* tree: holds a reference */
    int dirfd;                          /* destination directory */
    int srcfd;
    bool own_src;                       /* close srcfd when done */
    int tmpfd;
    struct stat st;                     /* the source before the copy */
    const char *name;                   /* final name in dirfd */
    const char *rel;                    /* for messages */
    char tmp[NAME_MAX + 1];             /* temporary name, "" if none */
    struct job start;
    struct job *ranges;
    unsigned int nranges;
    atomic_uint pending;                /* ranges not finished */
    atomic_int err;                     /* first errno of this file */
    tier_error_t error;                 /* written by who set err */
    atomic_int method;                  /* current method (after fallback) */
    atomic_uint used;
};

static bool ctx_cancelled (struct copy_ctx *ctx)
{
    return (ctx->o->cancel && atomic_load (ctx->o->cancel))
           || atomic_load (&ctx->stop);
}

static void ctx_report (struct copy_ctx *ctx, enum tier_copy_event ev,
                        const char *path, int errnum, const char *text)
{
    if (ctx->o->report) {
        pthread_mutex_lock (&ctx->elock);
        ctx->o->report (ev, path, errnum, text, ctx->o->report_arg);
        pthread_mutex_unlock (&ctx->elock);
    }
}

/* Record a failed entry (errnum, text); stop the copy unless
 * TIER_COPY_KEEP_GOING.  A cancellation is recorded only as the first
 * error, never reported as a failed entry. */
static void ctx_fail (struct copy_ctx *ctx, const char *path, int errnum,
                      const char *text)
{
    bool cancel = errnum == ECANCELED;

    pthread_mutex_lock (&ctx->elock);
    if (!ctx->err) {
        ctx->err = errnum;
        snprintf (ctx->error.text, sizeof (ctx->error.text), "%s", text);
    }
    if (!cancel) {
        atomic_fetch_add (&ctx->errors, 1);
        if (ctx->o->report && (ctx->o->flags & TIER_COPY_KEEP_GOING))
            ctx->o->report (TIER_COPY_FAILED, path, errnum, text,
                            ctx->o->report_arg);
    }
    pthread_mutex_unlock (&ctx->elock);
    if (!cancel && !(ctx->o->flags & TIER_COPY_KEEP_GOING))
        atomic_store (&ctx->stop, 1);
}

/* ctx_fail with a formatted "path: what: strerror" text. */
static void ctx_failf (struct copy_ctx *ctx, const char *path, int errnum,
                       const char *what)
{
    char text[TIER_ERROR_MAX];

    snprintf (text, sizeof (text), "%s: %s: %s", *path ? path : ".", what,
              strerror (errnum));
    ctx_fail (ctx, path, errnum, text);
}

static void progress_add (struct copy_ctx *ctx, uint64_t n)
{
    atomic_fetch_add (&ctx->done, n);
    if (ctx->o->progress && pthread_mutex_trylock (&ctx->plock) == 0) {
        ctx->o->progress (atomic_load (&ctx->done), atomic_load (&ctx->total),
                          ctx->o->progress_arg);
        pthread_mutex_unlock (&ctx->plock);
    }
}

static void progress_final (struct copy_ctx *ctx)
{
    if (ctx->o->progress) {
        pthread_mutex_lock (&ctx->plock);
        ctx->o->progress (atomic_load (&ctx->done), atomic_load (&ctx->total),
                          ctx->o->progress_arg);
        pthread_mutex_unlock (&ctx->plock);
    }
}

static void ctx_init (struct copy_ctx *ctx, const struct tier_copy_opts *opts)
{
    memset (ctx, 0, sizeof (*ctx));
    ctx->o = opts ? opts : &ctx->defaults;
    ctx->chunk = ctx->o->chunk_size ? ctx->o->chunk_size
                                    : TIER_COPY_CHUNK_DEFAULT;
    if (ctx->chunk > (1u << 30))
        ctx->chunk = 1u << 30;      /* sendfile moves at most ~2 GiB */
    ctx->split = ctx->o->split_size ? ctx->o->split_size : UINT64_MAX;
    if (ctx->split < ctx->chunk)
        ctx->split = ctx->chunk;
    ctx->nthreads = ctx->o->threads ? ctx->o->threads
                                    : TIER_COPY_THREADS_DEFAULT;
    if (ctx->nthreads > 256)
        ctx->nthreads = 256;
    ctx->methods = ctx->o->methods & TIER_COPY_METHODS_ALL;
    if (!ctx->methods)
        ctx->methods = TIER_COPY_METHODS_ALL;
    ctx->start_ns = (uint64_t) tier_now_ns ();
    pthread_mutex_init (&ctx->elock, NULL);
    pthread_mutex_init (&ctx->plock, NULL);
    pthread_mutex_init (&ctx->qlock, NULL);
    pthread_cond_init (&ctx->qcond, NULL);
    pthread_cond_init (&ctx->qspace, NULL);
}

static void ctx_fini (struct copy_ctx *ctx)
{
    pthread_mutex_destroy (&ctx->elock);
    pthread_mutex_destroy (&ctx->plock);
    pthread_mutex_destroy (&ctx->qlock);
    pthread_cond_destroy (&ctx->qcond);
    pthread_cond_destroy (&ctx->qspace);
    free (ctx->tids);
}

/* Fill res, set *error and errno from the first error.  Returns 0 or -1. */
static int ctx_result (struct copy_ctx *ctx, struct tier_copy_result *res,
                       tier_error_t *error)
{
    int err;

    if (!ctx->err && ctx->o->cancel && atomic_load (ctx->o->cancel)) {
        ctx->err = ECANCELED;
        snprintf (ctx->error.text, sizeof (ctx->error.text), "cancelled");
    }
    progress_final (ctx);
    if (res) {
        res->bytes = atomic_load (&ctx->bytes);
        res->bytes_total = atomic_load (&ctx->total);
        res->hole_bytes = atomic_load (&ctx->hole_bytes);
        res->holes = atomic_load (&ctx->holes);
        res->files = atomic_load (&ctx->files);
        res->dirs = atomic_load (&ctx->dirs);
        res->symlinks = atomic_load (&ctx->symlinks);
        res->skipped = atomic_load (&ctx->skipped);
        res->errors = atomic_load (&ctx->errors);
        res->methods = atomic_load (&ctx->used);
        res->threads = ctx->ntids + 1;
        res->elapsed_ns = (uint64_t) tier_now_ns () - ctx->start_ns;
    }
    err = ctx->err;
    if (err) {
        tier_errprintf (error, "%s", ctx->error.text);
        ctx_fini (ctx);
        errno = err;
        return -1;
    }
    ctx_fini (ctx);
    return 0;
}

/*
 * Data path.
 */

/* Record the first error of a file as "rel: what: strerror (e)" (or
 * "rel: what" for ESTALE/ECANCELED, whose what says it all).  Returns e. */
static int file_fail (struct fjob *f, int e, const char *what)
{
    int zero = 0;

    if (atomic_compare_exchange_strong (&f->err, &zero, e)) {
        if (e == ESTALE || e == ECANCELED)
            snprintf (f->error.text, sizeof (f->error.text), "%s: %s",
                      f->rel, what);
        else
            snprintf (f->error.text, sizeof (f->error.text), "%s: %s: %s",
                      f->rel, what, strerror (e));
    }
    return e;
}

static bool fallback_errno (int e)
{
    return e == EXDEV || e == EINVAL || e == ENOSYS || e == EOPNOTSUPP
           || e == EBADF;
}

/* The next allowed method after m (sendfile writes at the file offset of
 * the destination, so not for ranges copied concurrently); 0 if none. */
static int method_next (struct copy_ctx *ctx, int m, bool parallel)
{
    for (m = m ? m << 1 : TIER_COPY_CFR; m <= TIER_COPY_RW; m <<= 1) {
        if (m == TIER_COPY_SENDFILE && parallel)
            continue;
        if (ctx->methods & m)
            return m;
    }
    return 0;
}

static int method_first (struct copy_ctx *ctx, bool parallel)
{
    return method_next (ctx, 0, parallel);
}

static ssize_t xfer_cfr (int in, int out, off_t off, size_t n)
{
    loff_t oin = off, oout = off;
    ssize_t r;

    do {
        r = copy_file_range (in, &oin, out, &oout, n, 0);
    } while (r < 0 && errno == EINTR);
    return r;
}

static ssize_t xfer_sendfile (int in, int out, off_t off, size_t n)
{
    off_t oin = off;
    ssize_t r;

    if (lseek (out, off, SEEK_SET) < 0)
        return -1;
    do {
        r = sendfile (out, in, &oin, n);
    } while (r < 0 && errno == EINTR);
    return r;
}

static ssize_t xfer_rw (struct worker *w, int in, int out, off_t off,
                        size_t n, const char **what)
{
    size_t total = 0;

    if (!w->buf) {
        w->bufsize = MIN (w->ctx->chunk, RW_BUFSIZE);
        /* page-aligned, so that sources opened with O_DIRECT work */
        if (posix_memalign ((void **) &w->buf, 4096, w->bufsize) != 0) {
            w->buf = NULL;
            *what = "allocating a buffer";
            return -1;
        }
    }
    while (total < n) {
        size_t len = MIN (w->bufsize, n - total);
        ssize_t r, wr;
        size_t put = 0;

        do {
            r = pread (in, w->buf, len, off + total);
        } while (r < 0 && errno == EINTR);
        if (r < 0) {
            *what = "read";
            return total ? (ssize_t) total : -1;
        }
        if (r == 0)
            break;
        while (put < (size_t) r) {
            wr = pwrite (out, w->buf + put, r - put, off + total + put);
            if (wr < 0 && errno == EINTR)
                continue;
            if (wr <= 0) {
                if (wr == 0)
                    errno = EIO;
                *what = "write";
                return -1;
            }
            put += wr;
        }
        total += r;
    }
    return total;
}

/* Copy the data [off, end) of f, chunk by chunk, falling back from one
 * method to the next.  Returns 0 or an errno (recorded in f). */
static int copy_data (struct worker *w, struct fjob *f, off_t off, off_t end,
                      bool parallel, int *method)
{
    struct copy_ctx *ctx = f->ctx;
    uint64_t credit = 0;        /* taken from the limit, not yet moved: a
                                 * short transfer or a fallback is not
                                 * charged twice, so the limit counts the
                                 * bytes moved */

    while (off < end) {
        size_t n = MIN (ctx->chunk, (uint64_t) (end - off));
        const char *what = "copy";
        ssize_t r;
        int next;

        if (ctx_cancelled (ctx) || atomic_load (&f->err))
            return file_fail (f, ECANCELED, "cancelled");
        if (ctx->o->limit && credit < n) {
            if (limit_take (ctx->o->limit, n - credit, ctx->o->cancel,
                            &ctx->stop) < 0)
                return file_fail (f, ECANCELED, "cancelled");
            credit = n;
        }
        switch (*method) {
            case TIER_COPY_CFR:
                what = "copy_file_range";
                r = xfer_cfr (f->srcfd, f->tmpfd, off, n);
                break;
            case TIER_COPY_SENDFILE:
                what = "sendfile";
                r = xfer_sendfile (f->srcfd, f->tmpfd, off, n);
                break;
            default:
                r = xfer_rw (w, f->srcfd, f->tmpfd, off, n, &what);
                break;
        }
        if (r < 0) {
            int e = errno;

            if (*method != TIER_COPY_RW && fallback_errno (e)
                && (next = method_next (ctx, *method, parallel))) {
                *method = next;
                atomic_store (&f->method, next);
                continue;
            }
            return file_fail (f, e, what);
        }
        if (r == 0) {
            /* End of file before the end: shrunk, or a file system whose
             * in-kernel copy gives up (it happens); tell them apart. */
            char c;
            ssize_t p = pread (f->srcfd, &c, 1, off);

            if (p == 0)
                return file_fail (f, ESTALE, "changed during the copy"
                                  " (shrunk)");
            if (p < 0)
                return file_fail (f, errno, "read");
            if (*method != TIER_COPY_RW
                && (next = method_next (ctx, *method, parallel))) {
                *method = next;
                atomic_store (&f->method, next);
                continue;
            }
            return file_fail (f, EIO, what);
        }
        atomic_fetch_or (&f->used, (unsigned int) *method);
        atomic_fetch_add (&ctx->bytes, (uint64_t) r);
        progress_add (ctx, (uint64_t) r);
        off += r;
        credit -= MIN (credit, (uint64_t) r);
    }
    return 0;
}

static void count_hole (struct copy_ctx *ctx, off_t len)
{
    atomic_fetch_add (&ctx->holes, 1);
    atomic_fetch_add (&ctx->hole_bytes, (uint64_t) len);
    progress_add (ctx, (uint64_t) len);
}

/* Copy [start, end) of f, skipping holes. */
static void copy_range (struct worker *w, struct fjob *f, off_t start,
                        off_t end)
{
    struct copy_ctx *ctx = f->ctx;
    bool parallel = f->nranges > 1;
    bool sparse = !(ctx->o->flags & TIER_COPY_NOSPARSE);
    int method = atomic_load (&f->method);
    off_t pos = start;

    while (pos < end) {
        off_t data = pos, hole = end;

        if (atomic_load (&f->err))
            return;
        if (sparse) {
            if ((data = lseek (f->srcfd, pos, SEEK_DATA)) < 0) {
                if (errno == ENXIO)
                    data = end;                 /* a hole up to EOF */
                else if (errno == EINVAL || errno == EOPNOTSUPP) {
                    sparse = false;             /* no hole support */
                    data = pos;
                } else {
                    file_fail (f, errno, "lseek SEEK_DATA");
                    return;
                }
            }
            if (data > end)
                data = end;
            if (sparse && data < end) {
                if ((hole = lseek (f->srcfd, data, SEEK_HOLE)) < 0) {
                    file_fail (f, errno, "lseek SEEK_HOLE");
                    return;
                }
                if (hole > end || hole <= data)
                    hole = end;
            }
            if (data > pos)
                count_hole (ctx, data - pos);
        }
        if (data < hole && copy_data (w, f, data, hole, parallel, &method))
            return;
        pos = hole;
    }
}

/*
 * Publication.
 */

static bool changed (const struct stat *a, const struct stat *b)
{
    return a->st_ino != b->st_ino || a->st_dev != b->st_dev
           || a->st_size != b->st_size
           || a->st_mtim.tv_sec != b->st_mtim.tv_sec
           || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec
           || a->st_ctim.tv_sec != b->st_ctim.tv_sec
           || a->st_ctim.tv_nsec != b->st_ctim.tv_nsec;
}

/* The same version of a file, as a replica key names it: st_dev is left
 * out (it differs between the clients of a network file system, and the
 * expected stat may come from another call). */
static bool same_version (const struct stat *a, const struct stat *b)
{
    return a->st_ino == b->st_ino && a->st_size == b->st_size
           && a->st_mtim.tv_sec == b->st_mtim.tv_sec
           && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec
           && a->st_ctim.tv_sec == b->st_ctim.tv_sec
           && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static mode_t final_mode (struct copy_ctx *ctx, const struct stat *st,
                          bool file)
{
    mode_t m = st->st_mode & 07777;

    if (file && (ctx->o->flags & TIER_COPY_MODE))
        m = ctx->o->mode & 07777;
    if (!(ctx->o->flags & TIER_COPY_OWNER))
        m &= ~(mode_t) (S_ISUID | S_ISGID);
    return m;
}

/* Rename tmp to name in dirfd.  Returns 0 or an errno. */
static int publish (struct copy_ctx *ctx, int dirfd, const char *tmp,
                    const char *name)
{
    if (!(ctx->o->flags & TIER_COPY_NOREPLACE))
        return renameat (dirfd, tmp, dirfd, name) < 0 ? errno : 0;
    if (renameat2 (dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
        return errno;
    /* no RENAME_NOREPLACE here: a hard link fails atomically if the
     * target exists, too */
    if (linkat (dirfd, tmp, dirfd, name, 0) < 0)
        return errno;
    (void) unlinkat (dirfd, tmp, 0);
    return 0;
}

/* fsync a directory (reopened if dirfd is O_PATH).  Returns 0 or -1. */
static int sync_dir (int dirfd)
{
    int fd, rc;

    if (fsync (dirfd) == 0)
        return 0;
    if (errno != EBADF)
        return -1;
    if ((fd = openat (dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    rc = fsync (fd);
    if (rc < 0) {
        int saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    return close (fd);
}

/* Create the temporary of f, size it and cut it into ranges.  Returns 0 or
 * an errno (recorded). */
static int file_open (struct fjob *f)
{
    struct copy_ctx *ctx = f->ctx;
    uint64_t size = (uint64_t) f->st.st_size;
    uint64_t rsize = ctx->split;
    unsigned int n = 1;
    int tries = 0;

    if (ctx_cancelled (ctx))
        return file_fail (f, ECANCELED, "cancelled");
    do {
        temp_name (f->name, f->tmp);
        f->tmpfd = openat (f->dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL
                           | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    } while (f->tmpfd < 0 && errno == EEXIST && ++tries < TEMP_TRIES);
    if (f->tmpfd < 0) {
        int e = errno;
        f->tmp[0] = '\0';
        return file_fail (f, e, "create");
    }
    if (size > 0 && ftruncate (f->tmpfd, (off_t) size) < 0)
        return file_fail (f, errno, "truncate");
    if (ctx->nthreads > 1 && size > rsize) {
        if ((size + rsize - 1) / rsize > MAX_RANGES)
            rsize = (size + MAX_RANGES - 1) / MAX_RANGES;
        n = (unsigned int) ((size + rsize - 1) / rsize);
    }
    if (n > 1 && !(f->ranges = calloc (n, sizeof (*f->ranges))))
        n = 1;                              /* copy it in one go instead */
    f->nranges = n;
    atomic_store (&f->method, method_first (ctx, n > 1));
    atomic_store (&f->pending, n);
    if (n > 1) {
        for (unsigned int i = 0; i < n; i++) {
            f->ranges[i].kind = JOB_RANGE;
            f->ranges[i].f = f;
            f->ranges[i].start = (off_t) (i * rsize);
            f->ranges[i].end = (off_t) MIN ((i + 1) * rsize, size);
        }
    }
    return 0;
}

static int file_meta (struct fjob *f)
{
    struct copy_ctx *ctx = f->ctx;
    struct timespec times[2] = { f->st.st_atim, f->st.st_mtim };

    if ((ctx->o->flags & TIER_COPY_OWNER)
        && fchown (f->tmpfd, f->st.st_uid, f->st.st_gid) < 0)
        return file_fail (f, errno, "chown");
    if (fchmod (f->tmpfd, final_mode (ctx, &f->st, true)) < 0)
        return file_fail (f, errno, "chmod");
    if (futimens (f->tmpfd, times) < 0)
        return file_fail (f, errno, "set times");
    return 0;
}

/* Verify, set metadata, sync and publish f, or remove its temporary. */
static void file_finish (struct fjob *f)
{
    struct copy_ctx *ctx = f->ctx;
    struct stat now;
    int e = atomic_load (&f->err);

    if (!e && ctx_cancelled (ctx))
        e = file_fail (f, ECANCELED, "cancelled");
    if (!e) {
        if (fstat (f->srcfd, &now) < 0)
            e = file_fail (f, errno, "fstat");
        else if (changed (&f->st, &now))
            e = file_fail (f, ESTALE, "changed during the copy");
    }
    if (!e)
        e = file_meta (f);
    if (!e && !(ctx->o->flags & TIER_COPY_NOSYNC) && fsync (f->tmpfd) < 0)
        e = file_fail (f, errno, "fsync");
    if (!e && f->tmp[0] && ctx->o->before_publish) {
        struct stat tst;
        if (fstat (f->tmpfd, &tst) < 0)
            e = file_fail (f, errno, "fstat");
        else if ((e = ctx->o->before_publish (&tst, ctx->o->publish_arg)))
            file_fail (f, e, "not published");
    }
    if (f->tmpfd >= 0) {
        if (close (f->tmpfd) < 0 && !e)
            e = file_fail (f, errno, "close");
        f->tmpfd = -1;
    }
    if (!e && f->tmp[0] && (e = publish (ctx, f->dirfd, f->tmp, f->name)))
        file_fail (f, e, "publish");
    if (e && f->tmp[0])
        (void) unlinkat (f->dirfd, f->tmp, 0);
    if (!e) {
        atomic_fetch_add (&ctx->files, 1);
        atomic_fetch_or (&ctx->used, atomic_load (&f->used));
    }
}

/*
 * Tree directories.
 */

struct dnode {
    struct copy_ctx *ctx;
    struct dnode *parent;
    int fd;                             /* destination, O_RDONLY|O_DIRECTORY */
    atomic_uint refs;
    struct stat st;                     /* the source directory */
    bool created;
    char rel[];                         /* "" for the root */
};

static struct dnode *dnode_create (struct copy_ctx *ctx, struct dnode *parent,
                                   const char *name)
{
    size_t len = parent && parent->rel[0] ? strlen (parent->rel) + 1 : 0;
    struct dnode *d;

    len += name ? strlen (name) : 0;
    if (!(d = calloc (1, sizeof (*d) + len + 1)))
        return NULL;
    d->ctx = ctx;
    d->fd = -1;
    atomic_init (&d->refs, 1);
    if (name)
        snprintf (d->rel, len + 1, "%s%s%s", parent && parent->rel[0]
                  ? parent->rel : "", parent && parent->rel[0] ? "/" : "",
                  name);
    return d;
}

/* Last reference gone: mode and times (if we made it), fsync, close. */
static void dnode_finish (struct dnode *d)
{
    struct copy_ctx *ctx = d->ctx;
    struct timespec times[2] = { d->st.st_atim, d->st.st_mtim };

    if (d->fd < 0)
        return;
    if (d->created) {
        if ((ctx->o->flags & TIER_COPY_OWNER)
            && fchown (d->fd, d->st.st_uid, d->st.st_gid) < 0)
            ctx_failf (ctx, d->rel, errno, "chown");
        else if (fchmod (d->fd, final_mode (ctx, &d->st, false)) < 0)
            ctx_failf (ctx, d->rel, errno, "chmod");
        else if (futimens (d->fd, times) < 0)
            ctx_failf (ctx, d->rel, errno, "set times");
    }
    if (!(ctx->o->flags & TIER_COPY_NOSYNC) && fsync (d->fd) < 0)
        ctx_failf (ctx, d->rel, errno, "fsync");
    (void) close (d->fd);
    d->fd = -1;
}

static void dnode_release (struct dnode *d)
{
    while (d && atomic_fetch_sub (&d->refs, 1) == 1) {
        struct dnode *parent = d->parent;

        dnode_finish (d);
        free (d);
        d = parent;
    }
}

static void dnode_hold (struct dnode *d)
{
    atomic_fetch_add (&d->refs, 1);
}

/*
 * Jobs and the pool.
 */

static void fjob_destroy (struct fjob *f)
{
    if (f->own_src && f->srcfd >= 0)
        (void) close (f->srcfd);
    free (f->ranges);
    if (f->dir)
        dnode_release (f->dir);
    free (f);
}

/* A file is done (published or not): account for it, free it if tree. */
static void fjob_done (struct fjob *f)
{
    int e = atomic_load (&f->err);

    if (!f->dir)
        return;                         /* tier_copy_fd: the caller's */
    if (e)
        ctx_fail (f->ctx, f->rel, e, f->error.text);
    fjob_destroy (f);
}

/* The end of one range (or of the whole file when it is not split). */
static void range_done (struct fjob *f)
{
    if (atomic_fetch_sub (&f->pending, 1) == 1) {
        file_finish (f);
        fjob_done (f);
    }
}

static void queue_push (struct copy_ctx *ctx, struct job *j, bool front)
{
    pthread_mutex_lock (&ctx->qlock);
    j->next = NULL;
    if (front) {
        j->next = ctx->head;
        ctx->head = j;
        if (!ctx->tail)
            ctx->tail = j;
    } else {
        if (ctx->tail)
            ctx->tail->next = j;
        else
            ctx->head = j;
        ctx->tail = j;
    }
    if (j->kind == JOB_FILE)
        ctx->queued_files++;
    pthread_cond_signal (&ctx->qcond);
    pthread_mutex_unlock (&ctx->qlock);
}

/* Queue a file, waiting while the queue is full (bounds open files). */
static void queue_push_file (struct copy_ctx *ctx, struct job *j)
{
    pthread_mutex_lock (&ctx->qlock);
    while (ctx->queued_files >= ctx->max_files)
        pthread_cond_wait (&ctx->qspace, &ctx->qlock);
    pthread_mutex_unlock (&ctx->qlock);
    queue_push (ctx, j, false);
}

static struct job *queue_pop (struct copy_ctx *ctx)
{
    struct job *j;

    pthread_mutex_lock (&ctx->qlock);
    while (!ctx->head && !(ctx->closed && ctx->active == 0))
        pthread_cond_wait (&ctx->qcond, &ctx->qlock);
    if ((j = ctx->head)) {
        if (!(ctx->head = j->next))
            ctx->tail = NULL;
        if (j->kind == JOB_FILE) {
            ctx->queued_files--;
            pthread_cond_signal (&ctx->qspace);
        }
        ctx->active++;
    }
    pthread_mutex_unlock (&ctx->qlock);
    return j;
}

static void queue_job_done (struct copy_ctx *ctx)
{
    pthread_mutex_lock (&ctx->qlock);
    if (--ctx->active == 0 && !ctx->head && ctx->closed)
        pthread_cond_broadcast (&ctx->qcond);
    pthread_mutex_unlock (&ctx->qlock);
}

static void queue_close (struct copy_ctx *ctx)
{
    pthread_mutex_lock (&ctx->qlock);
    ctx->closed = true;
    pthread_cond_broadcast (&ctx->qcond);
    pthread_mutex_unlock (&ctx->qlock);
}

/* Run a job; with pool false, in the calling thread with no queue (the
 * file is never split then). */
static void run_job (struct worker *w, struct job *j, bool pool)
{
    struct fjob *f = j->f;

    if (j->kind == JOB_RANGE) {
        copy_range (w, f, j->start, j->end);
        range_done (f);
        return;
    }
    atomic_store (&f->pending, 1);
    if (file_open (f)) {
        range_done (f);
        return;
    }
    if (f->nranges > 1 && pool) {
        /* the others to the front of the queue, so that started files
         * finish first; this thread takes the first range */
        for (unsigned int i = f->nranges - 1; i > 0; i--)
            queue_push (f->ctx, &f->ranges[i], true);
        copy_range (w, f, f->ranges[0].start, f->ranges[0].end);
    } else {
        if (f->nranges > 1) {           /* no pool: in order, one thread */
            atomic_store (&f->pending, 1);
            f->nranges = 1;
            atomic_store (&f->method, method_first (f->ctx, false));
        }
        copy_range (w, f, 0, f->st.st_size);
    }
    range_done (f);
}

static void worker_loop (struct worker *w)
{
    struct job *j;

    while ((j = queue_pop (w->ctx))) {
        run_job (w, j, true);
        queue_job_done (w->ctx);
    }
}

static void *worker_main (void *arg)
{
    struct worker w = { .ctx = arg };

    worker_loop (&w);
    free (w.buf);
    return NULL;
}

/* Start up to n threads (fewer if the system refuses); workers never take
 * signals.  Sets ctx->max_files. */
static void pool_start (struct copy_ctx *ctx, unsigned int n)
{
    sigset_t all, old;

    ctx->max_files = QUEUE_PER_THREAD * (n ? n : 1);
    if (n == 0 || !(ctx->tids = calloc (n, sizeof (*ctx->tids))))
        return;
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &old);
    for (unsigned int i = 0; i < n; i++) {
        if (pthread_create (&ctx->tids[i], NULL, worker_main, ctx) != 0)
            break;
        ctx->ntids++;
    }
    pthread_sigmask (SIG_SETMASK, &old, NULL);
}

/* No more jobs: help until the queue is drained, then join. */
static void pool_finish (struct copy_ctx *ctx, struct worker *w)
{
    queue_close (ctx);
    worker_loop (w);
    for (unsigned int i = 0; i < ctx->ntids; i++)
        pthread_join (ctx->tids[i], NULL);
}

/*
 * One file.
 */

static int check_source (int srcfd, struct stat *st, const char *name,
                         tier_error_t *error)
{
    int fl;

    if (fstat (srcfd, st) < 0)
        return tier_errprintf (error, "%s: fstat source: %s", name,
                               strerror (errno));
    if (!S_ISREG (st->st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: source is not a regular file",
                               name);
    }
    if ((fl = fcntl (srcfd, F_GETFL)) < 0)
        return tier_errprintf (error, "%s: source: %s", name,
                               strerror (errno));
    if ((fl & O_ACCMODE) == O_WRONLY || (fl & O_PATH)) {
        errno = EBADF;
        return tier_errprintf (error, "%s: source is not open for reading",
                               name);
    }
    return 0;
}

int tier_copy_fd (int srcfd, int dstdirfd, const char *name,
                  const struct tier_copy_opts *opts,
                  struct tier_copy_result *res, tier_error_t *error)
{
    struct copy_ctx ctx;
    struct fjob f = { .srcfd = srcfd, .dirfd = dstdirfd, .tmpfd = -1 };
    struct worker w = { .ctx = &ctx };

    if (res)
        memset (res, 0, sizeof (*res));
    if (!valid_name (name)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: not a valid file name",
                               name ? name : "(null)");
    }
    if (check_source (srcfd, &f.st, name, error) < 0)
        return -1;
    if (opts && opts->expect && !same_version (&f.st, opts->expect)) {
        errno = ESTALE;
        return tier_errprintf (error, "%s: changed since it was looked at",
                               name);
    }
    ctx_init (&ctx, opts);
    f.ctx = &ctx;
    f.name = f.rel = name;
    f.start.kind = JOB_FILE;
    f.start.f = &f;
    atomic_store (&ctx.total, (uint64_t) f.st.st_size);
    if (res)
        res->src = f.st;

    if (ctx.nthreads > 1 && (uint64_t) f.st.st_size > ctx.split) {
        pool_start (&ctx, ctx.nthreads - 1);
        queue_push (&ctx, &f.start, false);
        pool_finish (&ctx, &w);
    } else
        run_job (&w, &f.start, false);
    free (w.buf);
    free (f.ranges);

    if (atomic_load (&f.err))
        ctx_fail (&ctx, name, atomic_load (&f.err), f.error.text);
    else if (!(ctx.o->flags & TIER_COPY_NOSYNC) && sync_dir (dstdirfd) < 0)
        ctx_failf (&ctx, name, errno, "fsync directory");
    return ctx_result (&ctx, res, error);
}

/*
 * Trees.
 */

struct walk {
    struct copy_ctx *ctx;
    struct worker *w;
    bool pool;
    dev_t dst_dev;                      /* the destination root */
    ino_t dst_ino;
};

static void rel_of (const struct dnode *d, const char *name, char *buf,
                    size_t size)
{
    snprintf (buf, size, "%s%s%s", d->rel, d->rel[0] ? "/" : "", name);
}

static void walk_skip (struct walk *wk, const char *rel, const char *why)
{
    char text[TIER_ERROR_MAX];

    snprintf (text, sizeof (text), "%s: %s, not copied", rel, why);
    atomic_fetch_add (&wk->ctx->skipped, 1);
    ctx_report (wk->ctx, TIER_COPY_SKIPPED, rel, 0, text);
}

static void walk_file (struct walk *wk, struct dnode *d, int sfd,
                       const char *name, const char *rel)
{
    struct copy_ctx *ctx = wk->ctx;
    int flags = O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
    size_t nlen = strlen (name) + 1, rlen = strlen (rel) + 1;
    struct fjob *f;
    struct stat st;
    int fd;

    /* O_NONBLOCK: a fifo swapped in after readdir must not block us */
    if ((fd = openat (sfd, name, flags | O_NOATIME)) < 0 && errno == EPERM)
        fd = openat (sfd, name, flags);
    if (fd < 0) {
        ctx_failf (ctx, rel, errno, "open");
        return;
    }
    if (fstat (fd, &st) < 0) {
        ctx_failf (ctx, rel, errno, "fstat");
        close (fd);
        return;
    }
    if (!S_ISREG (st.st_mode)) {
        close (fd);
        walk_skip (wk, rel, "replaced by a special file");
        return;
    }
    (void) fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK);
    if (!(f = calloc (1, sizeof (*f) + nlen + rlen))) {
        ctx_failf (ctx, rel, errno, "allocate");
        close (fd);
        return;
    }
    f->ctx = ctx;
    f->dir = d;
    dnode_hold (d);
    f->dirfd = d->fd;
    f->srcfd = fd;
    f->own_src = true;
    f->tmpfd = -1;
    f->st = st;
    memcpy ((char *) (f + 1), name, nlen);
    memcpy ((char *) (f + 1) + nlen, rel, rlen);
    f->name = (char *) (f + 1);
    f->rel = (char *) (f + 1) + nlen;
    f->start.kind = JOB_FILE;
    f->start.f = f;
    atomic_fetch_add (&ctx->total, (uint64_t) st.st_size);
    if (wk->pool)
        queue_push_file (ctx, &f->start);
    else
        run_job (wk->w, &f->start, false);
}

static void walk_symlink (struct walk *wk, struct dnode *d, int sfd,
                          const char *name, const char *rel)
{
    struct copy_ctx *ctx = wk->ctx;
    char target[PATH_MAX], tmp[NAME_MAX + 1];
    struct timespec times[2];
    struct stat st;
    ssize_t n;
    int tries = 0, e;

    if (ctx->o->flags & TIER_COPY_SKIP_SYMLINKS) {
        walk_skip (wk, rel, "symlink");
        return;
    }
    if (fstatat (sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        ctx_failf (ctx, rel, errno, "lstat");
        return;
    }
    if ((n = readlinkat (sfd, name, target, sizeof (target))) < 0) {
        ctx_failf (ctx, rel, errno, "readlink");
        return;
    }
    if ((size_t) n >= sizeof (target)) {
        ctx_failf (ctx, rel, ENAMETOOLONG, "readlink");
        return;
    }
    target[n] = '\0';
    do {
        temp_name (name, tmp);
        e = symlinkat (target, d->fd, tmp) < 0 ? errno : 0;
    } while (e == EEXIST && ++tries < TEMP_TRIES);
    if (e) {
        ctx_failf (ctx, rel, e, "symlink");
        return;
    }
    times[0] = st.st_atim;
    times[1] = st.st_mtim;
    if ((ctx->o->flags & TIER_COPY_OWNER)
        && fchownat (d->fd, tmp, st.st_uid, st.st_gid,
                     AT_SYMLINK_NOFOLLOW) < 0)
        ctx_failf (ctx, rel, errno, "chown");
    else if (utimensat (d->fd, tmp, times, AT_SYMLINK_NOFOLLOW) < 0)
        ctx_failf (ctx, rel, errno, "set times");
    else if ((e = publish (ctx, d->fd, tmp, name)))
        ctx_failf (ctx, rel, e, "publish");
    else {
        atomic_fetch_add (&ctx->symlinks, 1);
        return;
    }
    (void) unlinkat (d->fd, tmp, 0);
}

static void walk_dir (struct walk *wk, struct dnode *d, int sfd);

static void walk_subdir (struct walk *wk, struct dnode *d, int sfd,
                         const char *name, const char *rel)
{
    struct copy_ctx *ctx = wk->ctx;
    struct dnode *sub;
    int fd;

    if ((fd = openat (sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0) {
        ctx_failf (ctx, rel, errno, "open directory");
        return;
    }
    if (!(sub = dnode_create (ctx, d, name))) {
        ctx_failf (ctx, rel, errno, "allocate");
        close (fd);
        return;
    }
    if (fstat (fd, &sub->st) < 0) {
        ctx_failf (ctx, rel, errno, "fstat");
        goto out;
    }
    if (sub->st.st_dev == wk->dst_dev && sub->st.st_ino == wk->dst_ino) {
        walk_skip (wk, rel, "the destination directory");
        goto out;
    }
    if (mkdirat (d->fd, name, 0700) == 0)
        sub->created = true;
    else if (errno != EEXIST) {
        ctx_failf (ctx, rel, errno, "mkdir");
        goto out;
    }
    if ((sub->fd = openat (d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                           | O_CLOEXEC)) < 0) {
        ctx_failf (ctx, rel, errno, sub->created ? "open new directory"
                   : "open existing directory");
        goto out;
    }
    if (sub->created)
        atomic_fetch_add (&ctx->dirs, 1);
    sub->parent = d;
    dnode_hold (d);
    walk_dir (wk, sub, fd);             /* takes fd */
    dnode_release (sub);
    return;
out:
    close (fd);
    free (sub);
}

/* Walk the source directory sfd (taken) into d. */
static void walk_dir (struct walk *wk, struct dnode *d, int sfd)
{
    struct copy_ctx *ctx = wk->ctx;
    struct dirent *de;
    char *rel;
    DIR *dir;

    /* on the heap: this recurses once per level */
    if (!(rel = malloc (PATH_MAX))) {
        ctx_failf (ctx, d->rel, errno, "allocate");
        close (sfd);
        return;
    }
    if (!(dir = fdopendir (sfd))) {
        ctx_failf (ctx, d->rel, errno, "opendir");
        close (sfd);
        free (rel);
        return;
    }
    for (;;) {
        unsigned char type;
        struct stat st;

        if (ctx_cancelled (ctx))
            break;
        errno = 0;
        if (!(de = readdir (dir))) {
            if (errno)
                ctx_failf (ctx, d->rel, errno, "readdir");
            break;
        }
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        rel_of (d, de->d_name, rel, PATH_MAX);
        if ((type = de->d_type) == DT_UNKNOWN) {
            if (fstatat (sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                ctx_failf (ctx, rel, errno, "lstat");
                continue;
            }
            type = IFTODT (st.st_mode);
        }
        switch (type) {
            case DT_REG:
                walk_file (wk, d, sfd, de->d_name, rel);
                break;
            case DT_DIR:
                walk_subdir (wk, d, sfd, de->d_name, rel);
                break;
            case DT_LNK:
                walk_symlink (wk, d, sfd, de->d_name, rel);
                break;
            case DT_FIFO:
                walk_skip (wk, rel, "fifo");
                break;
            case DT_SOCK:
                walk_skip (wk, rel, "socket");
                break;
            case DT_CHR:
            case DT_BLK:
                walk_skip (wk, rel, "device");
                break;
            default:
                walk_skip (wk, rel, "unknown file type");
                break;
        }
    }
    closedir (dir);
    free (rel);
}

int tier_copy_tree (int srcdirfd, int dstdirfd,
                    const struct tier_copy_opts *opts,
                    struct tier_copy_result *res, tier_error_t *error)
{
    struct copy_ctx ctx;
    struct worker w = { .ctx = &ctx };
    struct walk wk = { .ctx = &ctx, .w = &w };
    struct dnode *root;
    struct stat sst, dst;
    int sfd;

    if (res)
        memset (res, 0, sizeof (*res));
    if (fstat (srcdirfd, &sst) < 0 || fstat (dstdirfd, &dst) < 0)
        return tier_errprintf (error, "fstat: %s", strerror (errno));
    if (!S_ISDIR (sst.st_mode) || !S_ISDIR (dst.st_mode)) {
        errno = ENOTDIR;
        return tier_errprintf (error, "source and destination must be"
                               " directories");
    }
    if (sst.st_dev == dst.st_dev && sst.st_ino == dst.st_ino) {
        errno = EINVAL;
        return tier_errprintf (error, "source and destination are the same"
                               " directory");
    }
    ctx_init (&ctx, opts);
    wk.dst_dev = dst.st_dev;
    wk.dst_ino = dst.st_ino;
    if (!(root = dnode_create (&ctx, NULL, NULL))) {
        ctx_failf (&ctx, "", errno, "allocate");
        return ctx_result (&ctx, res, error);
    }
    root->st = sst;
    if ((sfd = openat (srcdirfd, ".", O_RDONLY | O_DIRECTORY
                       | O_CLOEXEC)) < 0)
        ctx_failf (&ctx, "", errno, "open source");
    else if ((root->fd = openat (dstdirfd, ".", O_RDONLY | O_DIRECTORY
                                 | O_CLOEXEC)) < 0) {
        ctx_failf (&ctx, "", errno, "open destination");
        close (sfd);
    } else {
        if (ctx.nthreads > 1) {
            pool_start (&ctx, ctx.nthreads);
            wk.pool = ctx.ntids > 0;
        }
        walk_dir (&wk, root, sfd);
        dnode_release (root);           /* the walker's; files hold theirs */
        root = NULL;
        if (wk.pool)
            pool_finish (&ctx, &w);
    }
    if (root)
        dnode_release (root);
    free (w.buf);
    return ctx_result (&ctx, res, error);
}

/* End of copy.c */

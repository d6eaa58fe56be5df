/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica.c - the batch replica cache: read-only copies of batch-shared
 * GFS files on the burst buffer, fetched once per file version per BB
 *
 * The interposer in a task opens a batch file itself, with the user's own
 * credentials, and passes the descriptor (replica.open, SCM_RIGHTS).  The
 * agent never opens a user path: it checks that the descriptor is a
 * readable regular file whose path (as the kernel tells) is the one
 * claimed and lies under a batch directory of the caller's job, keys the
 * replica by the source's identity and version, and answers with the
 * replica's path, which the interposer opens instead.  Layout on the BB
 * (shared by the nodes):
 *
 *   BBDir/                      root 0711
 *   BBDir/replicas/             root 0711
 *   BBDir/replicas/uUID/        root 0700, ACL user:UID:--x -- only that
 *                               user may open a replica by name; nobody
 *                               lists, nobody else traverses
 *   BBDir/replicas/uUID/KEY     a replica: root-owned, 0444, immutable
 *   BBDir/replicas/uUID/KEY.lock  its fetch lock (root 0600)
 *   BBDir/replicas/world/       root 0711 (site policies with share=world)
 *   BBDir/.tmp/NODE/            root 0700: this node's copies in flight
 *
 * KEY is the source's inode, size, mtime and ctime (ns); not st_dev, which
 * differs between the clients of a network file system.  A changed source
 * is a new key; the old replica ages out.
 *
 * One fetch per key per BB.  On a node, concurrent misses wait for the
 * copy in flight.  Across nodes, a lock file made with O_EXCL decides who
 * copies; its holder (node, boot id, pid, start time) refreshes its mtime
 * as a heartbeat.  Others poll for the replica with backoff; a lock whose
 * heartbeat has not moved for BBLockStale by the waiter's own clock (or
 * whose holder is a dead process of this node) is broken by renaming it
 * away, and the waiter tries again.  Breaking a live lock by mistake only
 * costs a second copy: publication is a rename of a complete file.
 *
 * Copies run in fetcher processes (one per copy, at most GfsStreams at
 * once, the queue shared fairly between users), which die with the
 * agent.  Each copies into BBDir/.tmp/NODE/ with the copy engine (fsync;
 * the source must be the version the key names when the copy starts and
 * still when it ends, else ESTALE and the opens read the GFS) and renames
 * the complete file into place: a replica is never visible half-written.
 *
 * The index is LMDB (node-local): what this node knows of, what it
 * fetched (and so evicts: LRU past BBCapacity or below BBMinFree free,
 * replicas of running batches last, and past the policy's ttl).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/acl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "agent.h"
#include "peer.h"
#include "policy.h"
#include "streams.h"

#define BUCKETS 4096
#define ID_MAX 200                      /* "uUID/KEY" */
#define KEY_MAX 160
#define HOLDER_MAX 256

struct replica {
    char id[ID_MAX];
    char *path;                 /* the source, as fetched */
    uint32_t uid;               /* the scope's user (world: the fetcher's) */
    uint64_t size;
    int64_t fetched, used, expires;     /* epoch seconds; expires 0: never */
    uint32_t batch;             /* the last batch that opened it */
    uint64_t opens;
    bool owner;                 /* fetched by this node: it evicts it */
    bool dirty;                 /* not yet in LMDB as it is now */
    struct replica *next;
};

struct waiter {
    struct conn *c;
    uint32_t msgid;
    bool miss;                  /* the request that started the fetch */
    bool has_job;
    struct store_job job;
    int revalidate;
    struct waiter *next;
};

struct fetch {
    unsigned seq;
    char id[ID_MAX];
    char scope[24];
    char key[KEY_MAX];
    char *path;
    uint32_t uid;               /* who asked first (fairness) */
    uint64_t size;
    uint64_t ttl;
    uint32_t batch;
    mode_t mode;                /* 0444, or 0555 for executables */
    struct stat st;             /* the source when asked: what key names */
    int srcfd;
    pid_t pid;                  /* 0 while queued */
    struct stream_ticket *ticket;       /* its GFS stream (streams.c) */
    bool done;
    struct waiter *waiters;
    struct fetch *next;
};

struct replicas {
    bool enabled;
    char why[PATH_MAX + 128];   /* why not, for replies and status */
    char bb[2048];              /* BBDir (longer ones are refused) */
    char boot[64];
    struct replica *tab[BUCKETS];
    uint64_t owned_bytes, owned_files, known_files;
    struct fetch *fetches;      /* running and queued, in arrival order */
    int running;
    unsigned seq;
    int rfd, wfd;               /* fetchers report here */
    char rbuf[8192];
    size_t rlen;
    int64_t last_tick;
    uint64_t fallthroughs, fetched_bytes;
    char scopes_ok[64][24];     /* scope directories made this run */
    int nscopes_ok;
    struct tier_log_limit log_full;     /* opens that fell through: BB full */
    struct tier_log_limit log_big;      /* ... a file larger than the BB */
};

/* ---------------------------------------------------------------- index */

static unsigned hash (const char *s)
{
    unsigned h = 2166136261u;

    while (*s)
        h = (h ^ (unsigned char) *s++) * 16777619u;
    return h % BUCKETS;
}

static struct replica *rec_find (struct replicas *r, const char *id)
{
    for (struct replica *x = r->tab[hash (id)]; x; x = x->next)
        if (!strcmp (x->id, id))
            return x;
    return NULL;
}

static struct replica *rec_add (struct replicas *r, const char *id)
{
    struct replica *x = calloc (1, sizeof (*x));
    unsigned h = hash (id);

    if (!x)
        return NULL;
    (void) snprintf (x->id, sizeof (x->id), "%s", id);
    x->next = r->tab[h];
    r->tab[h] = x;
    r->known_files++;
    return x;
}

static void rec_account (struct replicas *r, struct replica *x, int sign)
{
    if (!x->owner)
        return;
    if (sign > 0) {
        r->owned_bytes += x->size;
        r->owned_files++;
    }
    else {
        r->owned_bytes -= x->size;
        r->owned_files--;
    }
}

static void rec_unlink (struct replicas *r, struct replica *x)
{
    struct replica **pp = &r->tab[hash (x->id)];

    while (*pp && *pp != x)
        pp = &(*pp)->next;
    if (*pp)
        *pp = x->next;
    rec_account (r, x, -1);
    r->known_files--;
    free (x->path);
    free (x);
}

static char *rec_encode (const struct replica *x)
{
    json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:I s:b s:I}",
                           "path", x->path ? x->path : "",
                           "uid", (json_int_t) x->uid,
                           "size", (json_int_t) x->size,
                           "fetched", (json_int_t) x->fetched,
                           "used", (json_int_t) x->used,
                           "expires", (json_int_t) x->expires,
                           "batch", (json_int_t) x->batch,
                           "owner", x->owner,
                           "opens", (json_int_t) x->opens);
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;

    json_decref (o);
    return s;
}

static void rec_store (struct agent *a, struct replica *x)
{
    struct store_kv kv = { .key = x->id, .val = rec_encode (x) };
    tier_error_t e;

    if (kv.val && store_replica_apply (a->store, &kv, 1, &e) == 0)
        x->dirty = false;
    else
        x->dirty = true;
    free ((char *) kv.val);
}

static void rec_forget (struct agent *a, struct replica *x)
{
    struct store_kv kv = { .key = x->id, .val = NULL };
    tier_error_t e;

    if (store_replica_apply (a->store, &kv, 1, &e) < 0)
        tier_log (LOG_ERR, "replica index: %s", e.text);
    rec_unlink (a->replicas, x);
}

/* The replica's file: BBDir/replicas/ID. */
static void rec_file (const struct replicas *r, const char *id, char *buf,
                      size_t size)
{
    (void) snprintf (buf, size, "%.2048s/replicas/%.200s", r->bb, id);
}

/* Remove the replica's file (safe while open: readers keep theirs). */
static void rec_evict (struct agent *a, struct replica *x, const char *why)
{
    char file[PATH_MAX];

    rec_file (a->replicas, x->id, file, sizeof (file));
    if (unlink (file) < 0 && errno != ENOENT)
        tier_log_error ("evict %s", file);
    tier_log (LOG_INFO, "replica of %s (%llu bytes) evicted: %s",
              x->path ? x->path : x->id, (unsigned long long) x->size, why);
    if (x->id[0] == 'u' && strchr (x->id, '/'))
        mirror_drop (a, x->uid, strchr (x->id, '/') + 1, NULL);
    rec_forget (a, x);
}

/* ------------------------------------------------------- directories */

/* A directory tier made: root-owned, never a symlink, with mode. */
static int own_dir (const char *path, mode_t mode)
{
    struct stat st;

    if (mkdir (path, mode) < 0 && errno != EEXIST)
        return -1;
    if (lstat (path, &st) < 0)
        return -1;
    if (!S_ISDIR (st.st_mode) || st.st_uid != 0) {
        errno = EPERM;
        return -1;
    }
    if ((st.st_mode & 07777) != mode && chmod (path, mode) < 0)
        return -1;
    return 0;
}

/* The scope directory of uid: root 0700 with an ACL entry that lets only
 * that user traverse it (open a replica by name; no listing).
 */
static int scope_dir (struct replicas *r, const char *scope, uint32_t uid,
                      bool world, tier_error_t *error)
{
    char path[PATH_MAX], text[128];
    struct stat st;
    acl_t acl;
    int fd;

    for (int i = 0; i < r->nscopes_ok; i++)
        if (!strcmp (r->scopes_ok[i], scope))
            return 0;
    (void) snprintf (path, sizeof (path), "%.2048s/replicas/%.24s", r->bb,
                     scope);
    if (mkdir (path, 0700) < 0 && errno != EEXIST)
        return tier_errprintf (error, "%s: %s", path, strerror (errno));
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        < 0)
        return tier_errprintf (error, "%s: %s", path, strerror (errno));
    if (fstat (fd, &st) < 0 || st.st_uid != 0) {
        close (fd);
        errno = EPERM;
        return tier_errprintf (error, "%s: not a directory of root's",
                               path);
    }
    if (world) {
        if ((st.st_mode & 07777) != 0711 && fchmod (fd, 0711) < 0) {
            close (fd);
            return tier_errprintf (error, "%s: %s", path, strerror (errno));
        }
        close (fd);
        goto done;
    }
    (void) snprintf (text, sizeof (text),
                     "u::rwx,u:%u:--x,g::---,m::--x,o::---", (unsigned) uid);
    if (!(acl = acl_from_text (text)) || acl_set_fd (fd, acl) < 0) {
        int e = errno;
        if (acl)
            acl_free (acl);
        close (fd);
        errno = e;
        return tier_errprintf (error, "%s: cannot set an ACL (%s): the "
                               "burst buffer must support POSIX ACLs", path,
                               strerror (e));
    }
    acl_free (acl);
    close (fd);
done:
    if (r->nscopes_ok < 64)
        (void) snprintf (r->scopes_ok[r->nscopes_ok++], 24, "%s", scope);
    return 0;
}

static int rm_tree_at (int dfd, const char *name)
{
    int fd = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                     | O_CLOEXEC);
    struct dirent *de;
    DIR *d;

    if (fd < 0)
        return unlinkat (dfd, name, 0);
    if (!(d = fdopendir (fd))) {
        close (fd);
        return -1;
    }
    while ((de = readdir (d)))
        if (strcmp (de->d_name, ".") && strcmp (de->d_name, ".."))
            (void) rm_tree_at (dirfd (d), de->d_name);
    closedir (d);
    return unlinkat (dfd, name, AT_REMOVEDIR);
}

/* ------------------------------------------------------------ fetcher */

struct holder {
    char node[TIER_NODENAME_MAX];
    char boot[64];
    long pid;
    unsigned long long start;
};

static unsigned long long proc_start (pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long start = 0;
    ssize_t n;
    int fd;

    (void) snprintf (path, sizeof (path), "/proc/%d/stat", (int) pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read (fd, buf, sizeof (buf) - 1);
    close (fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (!(p = strrchr (buf, ')')))
        return 0;
    /* field 22 (starttime); p is at the end of field 2 */
    for (int field = 2; field < 22 && p; field++)
        p = strchr (p + 1, ' ');
    if (p)
        start = strtoull (p + 1, NULL, 10);
    return start;
}

static int holder_read (int dfd, const char *name, struct holder *h,
                        struct timespec *mtime, char *raw, size_t rawsize)
{
    int fd = openat (dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    ssize_t n;

    memset (h, 0, sizeof (*h));
    raw[0] = '\0';
    if (fd < 0)
        return -1;
    if (fstat (fd, &st) < 0 || (n = read (fd, raw, rawsize - 1)) < 0) {
        close (fd);
        return -1;
    }
    close (fd);
    raw[n] = '\0';
    *mtime = st.st_mtim;
    if (sscanf (raw, "node=%63s boot=%63s pid=%ld start=%llu", h->node,
                h->boot, &h->pid, &h->start) != 4)
        h->node[0] = '\0';              /* unknown holder: heartbeat only */
    return 0;
}

struct heartbeat {
    int fd;
    unsigned period;
    volatile int stop;
};

static void *heartbeat_run (void *arg)
{
    struct heartbeat *hb = arg;

    while (!hb->stop) {
        for (unsigned i = 0; i < hb->period * 10 && !hb->stop; i++) {
            struct timespec ts = { 0, 100 * 1000 * 1000 };
            nanosleep (&ts, NULL);
        }
        if (!hb->stop)
            (void) futimens (hb->fd, NULL);
    }
    return NULL;
}

enum fetch_outcome {
    FETCH_COPIED = 'C',         /* this node copied it */
    FETCH_FOUND = 'F',          /* another node published it meanwhile */
    FETCH_FAILED = 'E',
};

struct fetch_ctx {
    int srcfd, scopefd, tmpfd;
    const char *key;
    const struct stat *expect;  /* the version key names */
    const char *node, *boot;
    uint64_t size;
    mode_t mode;
    uint64_t stale_s, wait_s;
    struct tier_copy_limit *limit;      /* the user's bucket */
    uint64_t bytes;             /* copied */
    char err[512];
};

static bool replica_present (int scopefd, const char *key, uint64_t size)
{
    struct stat st;

    return fstatat (scopefd, key, &st, AT_SYMLINK_NOFOLLOW) == 0
           && S_ISREG (st.st_mode) && (uint64_t) st.st_size == size;
}

/* Wait until this node holds the key's lock (returns the lock's fd), or
 * the replica appears (-2), or time runs out (-1).
 */
static int fetch_lock (struct fetch_ctx *f, const char *lock, char *mine,
                       size_t minesize)
{
    int64_t deadline = tier_now_ms () + (int64_t) f->wait_s * 1000;
    int64_t seen_ms = 0, backoff = 50;
    struct timespec seen_mtime = { 0, 0 };
    char seen_raw[HOLDER_MAX] = "";
    unsigned broken = 0;

    (void) snprintf (mine, minesize, "node=%s boot=%s pid=%ld start=%llu\n",
                     f->node, f->boot, (long) getpid (),
                     proc_start (getpid ()));
    for (;;) {
        struct holder h;
        struct timespec mt;
        char raw[HOLDER_MAX];
        bool stale = false;
        int fd;

        if (replica_present (f->scopefd, f->key, f->size))
            return -2;
        fd = openat (f->scopefd, lock, O_WRONLY | O_CREAT | O_EXCL
                     | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write (fd, mine, strlen (mine)) < 0) {
                /* the heartbeat is the mtime: the text is for humans */
            }
            return fd;
        }
        if (errno != EEXIST) {
            (void) snprintf (f->err, sizeof (f->err), "lock %s: %s", lock,
                             strerror (errno));
            return -1;
        }
        if (holder_read (f->scopefd, lock, &h, &mt, raw, sizeof (raw)) < 0)
            continue;                   /* gone meanwhile: try again */
        if (!strcmp (h.node, f->node)) {
            /* this node: a previous boot, or a process that is gone */
            if (strcmp (h.boot, f->boot)
                || proc_start ((pid_t) h.pid) != h.start)
                stale = true;
        }
        if (!stale) {
            int64_t now = tier_now_ms ();
            if (!seen_ms || strcmp (raw, seen_raw)
                || mt.tv_sec != seen_mtime.tv_sec
                || mt.tv_nsec != seen_mtime.tv_nsec) {
                /* the heartbeat moved: the holder lives */
                seen_ms = now;
                seen_mtime = mt;
                (void) snprintf (seen_raw, sizeof (seen_raw), "%s", raw);
            }
            else if (now - seen_ms >= (int64_t) f->stale_s * 1000)
                stale = true;
        }
        if (stale) {
            char away[KEY_MAX + 96];
            (void) snprintf (away, sizeof (away), "%s.broken.%s.%ld.%u", lock,
                             f->node, (long) getpid (), broken++);
            if (renameat (f->scopefd, lock, f->scopefd, away) == 0)
                (void) unlinkat (f->scopefd, away, 0);
            seen_ms = 0;
            continue;
        }
        if (tier_now_ms () > deadline) {
            (void) snprintf (f->err, sizeof (f->err), "waited %llu s for "
                             "the copy by %s", (unsigned long long) f->wait_s,
                             h.node[0] ? h.node : "another node");
            errno = ETIMEDOUT;
            return -1;
        }
        {
            struct timespec ts = { backoff / 1000,
                                   (backoff % 1000) * 1000000 };
            nanosleep (&ts, NULL);
        }
        if (backoff < 1000)
            backoff *= 2;
    }
}

static int fetch_run (struct fetch_ctx *f)
{
    char lock[KEY_MAX + 8], mine[HOLDER_MAX];
    struct tier_copy_opts opts = {
        .flags = TIER_COPY_MODE,
        .mode = f->mode,
        .threads = 1,
        .limit = f->limit,              /* the user's UserBandwidth */
        /* the copy must be of the version its key names: the source may
         * have changed while the request was queued or waited for the
         * lock, and the engine only compares with the copy's start */
        .expect = f->expect,
    };
    struct tier_copy_result res;
    struct heartbeat hb = { .fd = -1 };
    pthread_t th;
    tier_error_t e;
    int lfd, rc, beating, fl, err;
    bool direct;

    (void) snprintf (lock, sizeof (lock), "%s.lock", f->key);
    if ((lfd = fetch_lock (f, lock, mine, sizeof (mine))) == -2)
        return FETCH_FOUND;
    if (lfd < 0)
        return FETCH_FAILED;
    if (replica_present (f->scopefd, f->key, f->size)) {
        (void) unlinkat (f->scopefd, lock, 0);
        close (lfd);
        return FETCH_FOUND;
    }
    hb.fd = lfd;
    hb.period = f->stale_s >= 8 ? (unsigned) (f->stale_s / 4) : 1;
    beating = pthread_create (&th, NULL, heartbeat_run, &hb) == 0;
    (void) unlinkat (f->tmpfd, f->key, 0);      /* a leftover of a crash */
    /* Read the source around the page cache (O_DIRECT) where the file
     * system allows: the data goes to the BB, not to this node's tasks,
     * and cached pages would be dropped and read again whenever another
     * task opens the source (FUSE without keep_cache, NFS on a change).
     * Else no readahead, for the same reason.  The open file description
     * is the task's own, which waits for the answer: restore its flags
     * (if this process is killed first, the interposer does it, or
     * gives the task a fresh open when the agent never answers).
     */
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
                         "opened: " : "", e.text);
        rc = -1;
    }
    else if (renameat (f->tmpfd, f->key, f->scopefd, f->key) < 0) {
        (void) snprintf (f->err, sizeof (f->err), "publish: %s",
                         strerror (errno));
        (void) unlinkat (f->tmpfd, f->key, 0);
        rc = -1;
    }
    else {
        (void) fsync (f->scopefd);
        f->bytes = res.bytes;
        rc = 0;
    }
    hb.stop = 1;
    if (beating)
        (void) pthread_join (th, NULL);
    {
        /* release the lock, if it is still ours */
        struct holder h;
        struct timespec mt;
        char raw[HOLDER_MAX];
        if (holder_read (f->scopefd, lock, &h, &mt, raw, sizeof (raw)) == 0
            && !strcmp (raw, mine))
            (void) unlinkat (f->scopefd, lock, 0);
    }
    close (lfd);
    return rc == 0 ? FETCH_COPIED : FETCH_FAILED;
}

/* In the fetcher process (root): dies with the agent. */
static void fetcher (struct agent *a, struct fetch *ft, pid_t parent)
{
    struct replicas *r = a->replicas;
    struct fetch_ctx f = {
        .srcfd = ft->srcfd,
        .key = ft->key,
        .expect = &ft->st,
        .node = a->node,
        .boot = r->boot,
        .size = ft->size,
        .mode = ft->mode,
        .stale_s = a->conf->bb_lock_stale ? a->conf->bb_lock_stale : 1,
        .wait_s = a->conf->replica_wait ? a->conf->replica_wait : 1,
        .limit = streams_limit (a, ft->uid, NULL),
    };
    char path[PATH_MAX], line[1024];
    sigset_t all;
    int kind, n;

    (void) prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (0);
    sigemptyset (&all);
    sigprocmask (SIG_SETMASK, &all, NULL);
    signal (SIGPIPE, SIG_IGN);
    (void) snprintf (path, sizeof (path), "%.2048s/replicas/%.24s", r->bb,
                     ft->scope);
    f.scopefd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    (void) snprintf (path, sizeof (path), "%.2048s/.tmp/%.64s", r->bb,
                     a->node);
    f.tmpfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (f.scopefd < 0 || f.tmpfd < 0) {
        (void) snprintf (f.err, sizeof (f.err), "%.400s: %.100s", path,
                         strerror (errno));
        kind = FETCH_FAILED;
    }
    else
        kind = fetch_run (&f);
    for (char *p = f.err; *p; p++)
        if (*p == '\n')
            *p = ' ';
    n = snprintf (line, sizeof (line), "%u %c %llu %s\n", ft->seq, kind,
                  (unsigned long long) f.bytes, f.err);
    if (n >= (int) sizeof (line))
        n = sizeof (line) - 1, line[n - 1] = '\n';
    if (write (r->wfd, line, n) < 0) {
        /* the agent is gone: nobody to tell */
    }
    _exit (0);
}

/* ------------------------------------------------------------ replies */

static char *reply_replica (struct replicas *r, const char *id, uint64_t size,
                            int revalidate, bool hit)
{
    char file[PATH_MAX];
    json_t *o;
    char *s;

    rec_file (r, id, file, sizeof (file));
    o = json_pack ("{s:s s:i s:I s:b}", "replica", file, "revalidate",
                   revalidate, "size", (json_int_t) size, "hit", hit);
    s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    return s;
}

static json_t *fallthrough (struct agent *a, const struct store_job *job,
                            const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static json_t *fallthrough (struct agent *a, const struct store_job *job,
                            const char *fmt, ...)
{
    char why[512];
    va_list ap;

    va_start (ap, fmt);
    (void) vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    if (a->replicas)
        a->replicas->fallthroughs++;
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_FALLTHROUGHS, 1);
    return json_pack ("{s:s}", "fallthrough", why);
}

static void count_hit (struct agent *a, const struct store_job *job,
                       uint64_t size)
{
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_HITS, 1);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, size);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_AVOIDED, size);
}

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
    if (f->srcfd >= 0)
        close (f->srcfd);
    streams_done (a, &f->ticket);
    waiter_free_all (f);
    free (f->path);
    free (f);
}

/* A fetch ended: record the replica, answer every waiter. */
static void fetch_finish (struct agent *a, struct fetch *f, int kind,
                          uint64_t bytes, const char *err)
{
    struct replicas *r = a->replicas;
    struct replica *x = NULL;
    int64_t now = time (NULL);

    f->done = true;
    if (f->pid > 0)
        r->running--;
    if (kind == FETCH_COPIED || kind == FETCH_FOUND) {
        if (!(x = rec_find (r, f->id)) && (x = rec_add (r, f->id))) {
            x->path = strdup (f->path);
            x->uid = f->uid;
            x->size = f->size;
            x->fetched = now;
            x->expires = f->ttl ? now + (int64_t) f->ttl : 0;
        }
        if (x && kind == FETCH_COPIED && !x->owner) {
            x->owner = true;
            rec_account (r, x, +1);
            x->fetched = now;
            x->expires = f->ttl ? now + (int64_t) f->ttl : 0;
        }
        if (x) {
            x->used = now;
            x->batch = f->batch;
            rec_store (a, x);
        }
        if (kind == FETCH_COPIED) {
            r->fetched_bytes += bytes;
            tier_log (LOG_INFO, "replica of %s fetched (%llu bytes)",
                      f->path, (unsigned long long) bytes);
        }
    }
    else
        tier_log (LOG_WARNING, "replica of %s not made: %s (read from the "
                  "GFS instead)", f->path, err && *err ? err : "failed");
    for (struct waiter *w = f->waiters; w; w = w->next) {
        const struct store_job *job = w->has_job ? &w->job : NULL;
        char *body;

        if (x) {
            x->opens++;
            if (kind == FETCH_COPIED && w->miss) {
                ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_MISSES, 1);
                ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_READ,
                         bytes);
                ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, f->size);
            }
            else
                count_hit (a, job, f->size);
            body = reply_replica (r, f->id, f->size, w->revalidate,
                                  !(kind == FETCH_COPIED && w->miss));
        }
        else {
            json_t *o = fallthrough (a, job, "%s", err && *err ? err
                                     : "the copy failed");
            ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_FAILURES, 1);
            body = o ? json_dumps (o, JSON_COMPACT) : NULL;
            json_decref (o);
        }
        w->c->waiting--;
        server_reply (a, w->c, w->msgid, body);
    }
    fetch_remove (a, f);
}

static void results_read (struct agent *a)
{
    struct replicas *r = a->replicas;
    ssize_t n;

    for (;;) {
        char *nl;
        n = read (r->rfd, r->rbuf + r->rlen, sizeof (r->rbuf) - 1 - r->rlen);
        if (n <= 0)
            break;
        r->rlen += (size_t) n;
        r->rbuf[r->rlen] = '\0';
        while ((nl = strchr (r->rbuf, '\n'))) {
            unsigned seq = 0;
            unsigned long long bytes = 0;
            char kind = 0;
            int off = 0;
            *nl = '\0';
            if (sscanf (r->rbuf, "%u %c %llu %n", &seq, &kind, &bytes, &off)
                >= 3) {
                for (struct fetch *f = r->fetches; f; f = f->next)
                    if (f->seq == seq && !f->done) {
                        fetch_finish (a, f, kind, bytes, r->rbuf + off);
                        break;
                    }
            }
            r->rlen -= (size_t) (nl + 1 - r->rbuf);
            memmove (r->rbuf, nl + 1, r->rlen + 1);
        }
        if (r->rlen >= sizeof (r->rbuf) - 1)
            r->rlen = 0;                /* garbage: drop it */
    }
}

bool replica_child (struct agent *a, pid_t pid, int status)
{
    struct replicas *r = a->replicas;

    if (!r)
        return false;
    for (struct fetch *f = r->fetches; f; f = f->next)
        if (f->pid == pid && !f->done) {
            results_read (a);           /* its result may be in the pipe */
            for (struct fetch *g = r->fetches; g; g = g->next)
                if (g == f && !g->done) {
                    char why[64];
                    (void) snprintf (why, sizeof (why), "the fetcher ended "
                                     "without a result (status %d)", status);
                    fetch_finish (a, g, FETCH_FAILED, 0, why);
                    break;
                }
            return true;
        }
    return false;
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

static int fetch_fork (struct agent *a, struct fetch *f)
{
    struct replicas *r = a->replicas;
    pid_t parent = getpid ();
    pid_t pid = fork ();

    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* keep only the source, the result pipe and stdio */
        int lo = f->srcfd < r->wfd ? f->srcfd : r->wfd;
        int hi = f->srcfd < r->wfd ? r->wfd : f->srcfd;
        if (lo > 3)
            (void) close_range (3, lo - 1, 0);
        if (hi > lo + 1)
            (void) close_range (lo + 1, hi - 1, 0);
        (void) close_range (hi + 1, ~0U, 0);
        fetcher (a, f, parent);
    }
    close (f->srcfd);
    f->srcfd = -1;
    f->pid = pid;
    r->running++;
    return 0;
}

/* The fetch's GFS stream is granted (streams.c: the node's GfsStreams,
 * fair between users): fork its fetcher. */
static void fetch_go (struct agent *a, void *arg)
{
    struct fetch *f = arg;

    if (fetch_fork (a, f) < 0) {
        char why[128];
        (void) snprintf (why, sizeof (why), "fork: %s", strerror (errno));
        fetch_finish (a, f, FETCH_FAILED, 0, why);
    }
}

/* ----------------------------------------------------------- eviction */

struct batches {
    uint32_t ids[256];
    int n;
};

static int running_cb (const struct store_job *j, void *arg)
{
    struct batches *b = arg;

    if (j->state == STORE_JOB_RUNNING && b->n < 256)
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

    for (int i = 0; i < BUCKETS; i++)
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

static uint64_t inflight_bytes (struct replicas *r)
{
    uint64_t sum = 0;

    for (struct fetch *f = r->fetches; f; f = f->next)
        if (!f->done)
            sum += f->size;
    return sum;
}

static uint64_t bb_free (struct replicas *r)
{
    struct statvfs sv;

    if (statvfs (r->bb, &sv) < 0)
        return UINT64_MAX;
    return (uint64_t) sv.f_bavail * sv.f_frsize;
}

/* The largest file this node may make a replica of, 0 if no bound is
 * known: its budget (BBCapacity), or without one the BB's size less
 * BBMinFree.  what says which, for messages. */
static uint64_t size_bound (struct agent *a, char *what, size_t whatsize)
{
    struct replicas *r = a->replicas;
    uint64_t cap = a->conf->bb_capacity, min = a->conf->bb_min_free, size;
    struct statvfs sv;

    if (cap) {
        (void) snprintf (what, whatsize, "the BB budget of node %s "
                         "(BBCapacity %llu MiB)", a->node,
                         (unsigned long long) (cap >> 20));
        return cap;
    }
    if (!r || !r->enabled || statvfs (r->bb, &sv) < 0)
        return 0;
    size = (uint64_t) sv.f_blocks * sv.f_frsize;
    (void) snprintf (what, whatsize, "the burst buffer (%llu MiB, BBMinFree "
                     "%llu MiB)", (unsigned long long) (size >> 20),
                     (unsigned long long) (min >> 20));
    return size > min ? size - min : 1;
}

/* Make room for size bytes within the budget and the free-space floor,
 * evicting this node's least recently used replicas -- only when that
 * can make enough room: a request that cannot fit evicts nothing. */
static int make_room (struct agent *a, uint64_t size, char *why,
                      size_t whysize)
{
    struct replicas *r = a->replicas;
    uint64_t cap = a->conf->bb_capacity, min = a->conf->bb_min_free;
    uint64_t inflight = inflight_bytes (r), avail;
    struct batches b = { .n = 0 };
    tier_error_t e;

    if (cap && inflight + size > cap) {
        (void) snprintf (why, whysize, "the BB budget of node %s "
                         "(BBCapacity %llu MiB) is taken by copies in "
                         "flight", a->node,
                         (unsigned long long) (cap >> 20));
        return -1;
    }
    avail = bb_free (r);
    if (avail != UINT64_MAX
        && avail + r->owned_bytes < size + min + inflight) {
        (void) snprintf (why, whysize, "the burst buffer is full (%llu MiB "
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
        if (!x) {
            (void) snprintf (why, whysize, "the BB budget of node %s "
                             "(BBCapacity %llu MiB) is taken by copies in "
                             "flight", a->node,
                             (unsigned long long) (cap >> 20));
            return -1;
        }
        rec_evict (a, x, "BB budget");
    }
    while (bb_free (r) < size + min + inflight_bytes (r)) {
        struct replica *x = lru (r, &b);
        if (!x) {
            (void) snprintf (why, whysize, "the burst buffer is full");
            return -1;
        }
        rec_evict (a, x, "BB free space");
    }
    return 0;
}

void replica_tick (struct agent *a)
{
    struct replicas *r = a->replicas;
    int64_t now = time (NULL);

    if (!r || !r->enabled || now - r->last_tick < 5)
        return;
    r->last_tick = now;
    for (int i = 0; i < BUCKETS; i++) {
        struct replica *x = r->tab[i], *next;
        for (; x; x = next) {
            next = x->next;
            if (!x->expires || now < x->expires)
                continue;
            if (x->owner)
                rec_evict (a, x, "ttl");
            else
                rec_forget (a, x);
        }
    }
}

int replica_flush (struct agent *a)
{
    struct replicas *r = a->replicas;
    struct store_kv kv[64];
    struct replica *xs[64];
    tier_error_t e;
    int n = 0, rc = 0;

    if (!r)
        return 0;
    for (int i = 0; i < BUCKETS; i++)
        for (struct replica *x = r->tab[i]; x; x = x->next) {
            if (!x->dirty)
                continue;
            if (n == 64) {
                if ((rc = store_replica_apply (a->store, kv, n, &e)) == 0)
                    for (int k = 0; k < n; k++)
                        xs[k]->dirty = false;
                for (int k = 0; k < n; k++)
                    free ((char *) kv[k].val);
                n = 0;
            }
            kv[n].key = x->id;
            kv[n].val = rec_encode (x);
            xs[n++] = x;
            if (!kv[n - 1].val)
                n--;
        }
    if (n && (rc = store_replica_apply (a->store, kv, n, &e)) == 0)
        for (int k = 0; k < n; k++)
            xs[k]->dirty = false;
    for (int k = 0; k < n; k++)
        free ((char *) kv[k].val);
    return rc;
}

/* ----------------------------------------------------------- requests */

/* share = world: only for sources every user may read (o+x on every
 * ancestor, o+r on the file), checked by name as root and matched with
 * the descriptor's identity.
 */
static bool world_readable (const char *path, const struct stat *st)
{
    char buf[PATH_MAX];
    struct stat s;

    (void) snprintf (buf, sizeof (buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (lstat (buf, &s) < 0 || !S_ISDIR (s.st_mode)
            || !(s.st_mode & S_IXOTH)) {
            *p = '/';
            return false;
        }
        *p = '/';
    }
    return lstat (path, &s) == 0 && S_ISREG (s.st_mode)
           && (s.st_mode & S_IROTH) && s.st_dev == st->st_dev
           && s.st_ino == st->st_ino;
}

static int take_fd (struct conn *c)
{
    int fd;

    if (c->req_nfds != 1 || c->req_fds[0] < 0)
        return -1;
    fd = c->req_fds[0];
    c->req_fds[0] = -1;
    return fd;
}

/* The checks every replica request makes of the descriptor it brings:
 * a regular file open for reading, the one the kernel says is at path.
 */
static int check_source (int fd, const char *path, struct stat *st,
                         uint64_t max, const char *what,
                         tier_error_t *error)
{
    char link[64], real[PATH_MAX];
    int fl;
    ssize_t n;

    if (fstat (fd, st) < 0 || !S_ISREG (st->st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "the descriptor is not a regular "
                               "file");
    }
    fl = fcntl (fd, F_GETFL);
    if (fl < 0 || ((fl & O_ACCMODE) != O_RDONLY
                   && (fl & O_ACCMODE) != O_RDWR) || (fl & O_PATH)) {
        errno = EBADF;
        return tier_errprintf (error, "the descriptor is not open for "
                               "reading");
    }
    (void) snprintf (link, sizeof (link), "/proc/self/fd/%d", fd);
    if ((n = readlink (link, real, sizeof (real) - 1)) < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "cannot tell the descriptor's path");
    }
    real[n] = '\0';
    if (strcmp (real, path)) {
        errno = EPERM;
        return tier_errprintf (error, "the descriptor is not %s", path);
    }
    if (max && (uint64_t) st->st_size > max) {
        errno = EFBIG;
        return tier_errprintf (error, "%s (%llu MiB) is larger than %s",
                               path, (unsigned long long) (st->st_size >> 20),
                               what);
    }
    return 0;
}

/* A replica's key: the source's identity and version (mirror.c's
 * manifests name replicas by it too). */
void replica_key (const struct stat *st, char *key, size_t size)
{
    (void) snprintf (key, size, "%llx-%llx-%lld.%09ld-%lld.%09ld",
                     (unsigned long long) st->st_ino,
                     (unsigned long long) st->st_size,
                     (long long) st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                     (long long) st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

struct replica_req {
    const struct store_job *job;
    uint32_t uid;
    const struct tier_policy *pol;
    const char *path;
    int fd;
    struct stat st;
};

/* Serve a checked request: a hit, a wait for a copy in flight, or a new
 * fetch.  Consumes rq->fd.
 */
static json_t *serve (struct agent *a, struct conn *c, struct replica_req *rq,
                      tier_error_t *error)
{
    struct replicas *r = a->replicas;
    int revalidate = rq->pol->set & TIER_PA_REVALIDATE
                     ? (int) rq->pol->revalidate
                     : TIER_POLICY_REVALIDATE_DEFAULT;
    bool world = rq->pol->share == TIER_PSHARE_WORLD
                 && world_readable (rq->path, &rq->st);
    char scope[24], key[KEY_MAX], id[ID_MAX], file[PATH_MAX], why[256];
    struct replica *x;
    struct fetch *f;
    struct waiter *w;
    struct stat st;

    if (world)
        (void) snprintf (scope, sizeof (scope), "world");
    else
        (void) snprintf (scope, sizeof (scope), "u%u", (unsigned) rq->uid);
    replica_key (&rq->st, key, sizeof (key));
    (void) snprintf (id, sizeof (id), "%s/%s", scope, key);
    if (scope_dir (r, scope, rq->uid, world, error) < 0) {
        close (rq->fd);
        tier_log (LOG_ERR, "%s", error->text);
        return fallthrough (a, rq->job, "%s", error->text);
    }
    /* published (by this node or another)? */
    rec_file (r, id, file, sizeof (file));
    if (lstat (file, &st) == 0 && S_ISREG (st.st_mode)
        && (uint64_t) st.st_size == (uint64_t) rq->st.st_size) {
        close (rq->fd);
        if (!(x = rec_find (r, id)) && (x = rec_add (r, id))) {
            x->path = strdup (rq->path);
            x->uid = rq->uid;
            x->size = (uint64_t) rq->st.st_size;
            x->fetched = time (NULL);
            x->expires = rq->pol->ttl ? x->fetched + (int64_t) rq->pol->ttl
                                      : 0;
        }
        if (x) {
            x->used = time (NULL);
            x->batch = rq->job ? rq->job->batch_id : 0;
            x->opens++;
            x->dirty = true;
        }
        count_hit (a, rq->job, (uint64_t) rq->st.st_size);
        {
            char *s = reply_replica (r, id, (uint64_t) rq->st.st_size,
                                     revalidate, true);
            json_t *o = s ? json_loads (s, 0, NULL) : NULL;
            free (s);
            return o;
        }
    }
    if ((x = rec_find (r, id)))
        rec_forget (a, x);              /* its file is gone */
    if (!(w = calloc (1, sizeof (*w)))) {
        close (rq->fd);
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    w->c = c;
    w->msgid = c->req_id;
    w->revalidate = revalidate;
    if (rq->job) {
        w->has_job = true;
        w->job = *rq->job;
    }
    for (f = r->fetches; f; f = f->next)
        if (!f->done && !strcmp (f->id, id))
            break;
    if (f) {
        /* a copy is in flight: wait for it (a hit when it lands) */
        close (rq->fd);
        w->next = f->waiters;
        f->waiters = w;
        c->waiting++;
        return RPC_DEFERRED;
    }
    if (make_room (a, (uint64_t) rq->st.st_size, why, sizeof (why)) < 0) {
        close (rq->fd);
        free (w);
        tier_log_limited (&r->log_full, LOG_WARNING, "replica of %s not "
                          "made: %s (read from the GFS)", rq->path, why);
        return fallthrough (a, rq->job, "%s", why);
    }
    if (!(f = calloc (1, sizeof (*f))) || !(f->path = strdup (rq->path))) {
        free (f);
        free (w);
        close (rq->fd);
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    f->seq = ++r->seq;
    (void) snprintf (f->id, sizeof (f->id), "%s", id);
    (void) snprintf (f->scope, sizeof (f->scope), "%s", scope);
    (void) snprintf (f->key, sizeof (f->key), "%s", key);
    f->uid = rq->uid;
    f->size = (uint64_t) rq->st.st_size;
    f->ttl = rq->pol->ttl;
    f->batch = rq->job ? rq->job->batch_id : 0;
    /* read-only for everyone who can reach it; executables stay so (a
     * bound mirror runs them) */
    f->mode = (rq->st.st_mode & 0111) ? 0555 : 0444;
    f->st = rq->st;
    f->srcfd = rq->fd;
    w->miss = true;
    f->waiters = w;
    c->waiting++;
    /* append: the queue is served in arrival order within a user */
    {
        struct fetch **pp = &r->fetches;
        while (*pp)
            pp = &(*pp)->next;
        *pp = f;
    }
    {
        char what[PATH_MAX + 32];
        (void) snprintf (what, sizeof (what), "replica of %s", f->path);
        streams_want (a, f->uid, STREAMS_REPLICA, what, fetch_go, f,
                      &f->ticket);
    }
    return RPC_DEFERRED;
}

static int get_path (json_t *req, char *out, size_t size,
                     tier_error_t *error)
{
    const char *p = NULL;

    if (json_unpack (req, "{s:s}", "path", &p) < 0 || p[0] != '/'
        || tier_path_normalize (p, out, size) < 0 || strcmp (out, p)) {
        errno = EINVAL;
        return tier_errprintf (error, "'path' must be a normalised "
                               "absolute path");
    }
    return 0;
}

static bool under_allowed (struct agent *a, const char *path)
{
    for (int i = 0; i < a->conf->allowed_roots_count; i++)
        if (tier_path_under (path, a->conf->allowed_roots[i]))
            return true;
    return false;
}

/* Opens served from the interposer's own cache since its last report. */
static void cached_opens (struct agent *a, const struct store_job *job,
                          json_t *req)
{
    json_int_t n = 0, bytes = 0;

    if (json_unpack (req, "{s?I s?I}", "cached", &n, "cached_bytes",
                     &bytes) < 0 || n <= 0 || bytes < 0
        || n > (1LL << 40) || bytes > (1LL << 50))
        return;
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_OPS, (uint64_t) n);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_HITS, (uint64_t) n);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, (uint64_t) bytes);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_AVOIDED,
             (uint64_t) bytes);
}

/* replica.open {path, cached?, cached_bytes?} + the source's descriptor,
 * from the interposer in a task: {replica, revalidate, size, hit}, or
 * {fallthrough: why} (read the GFS), or an error.
 */
json_t *op_replica_open (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error)
{
    struct replicas *r = a->replicas;
    struct store_job job;
    struct peer_job pj;
    struct tier_policy pol;
    struct replica_req rq = { .job = &job };
    char path[PATH_MAX], what[160];
    uint64_t max;
    int fd = take_fd (c);

    if (fd < 0) {
        errno = EINVAL;
        tier_errprintf (error, "replica.open needs one descriptor");
        return NULL;
    }
    if (get_path (req, path, sizeof (path), error) < 0
        || rpc_caller_job (a, c, &job, &pj, error) < 0) {
        close (fd);
        return NULL;
    }
    cached_opens (a, &job, req);
    ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_OPS, 1);
    ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_GFS_META_OPS, 1);
    max = size_bound (a, what, sizeof (what));
    if (check_source (fd, path, &rq.st, max, what, error) < 0) {
        close (fd);
        if (errno == EFBIG) {
            if (r)
                tier_log_limited (&r->log_big, LOG_WARNING, "replica not "
                                  "made: %s (read from the GFS)",
                                  error->text);
            return fallthrough (a, &job, "%s", error->text);
        }
        ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_FAILURES, 1);
        return NULL;
    }
    if (!r || !r->enabled) {
        close (fd);
        return fallthrough (a, &job, "no replica cache on node %s: %s",
                            a->node, r ? r->why : "no BBDir");
    }
    if (!under_allowed (a, path)
        || policy_job_resolve (a, &job, path, &pol) < 0
        || pol.role != TIER_POLICY_BATCH) {
        close (fd);
        return fallthrough (a, &job, "%s is not in a batch directory of "
                            "job %u", path, job.job_id);
    }
    rq.uid = job.uid;
    rq.pol = &pol;
    rq.path = path;
    rq.fd = fd;
    return serve (a, c, &rq, error);
}

json_t *op_replica_report (struct agent *a, struct conn *c, json_t *req,
                           tier_error_t *error)
{
    struct store_job job;
    struct peer_job pj;

    if (rpc_caller_job (a, c, &job, &pj, error) < 0)
        return NULL;
    cached_opens (a, &job, req);
    return json_pack ("{s:I}", "job_id", (json_int_t) job.job_id);
}

/* replica.prefetch {path} + descriptor: make the replica now (tierctl
 * prefetch), by the policies of the caller's job when it runs in one,
 * else by the site and user policies its next job would follow.
 */
json_t *op_replica_prefetch (struct agent *a, struct conn *c, json_t *req,
                             tier_error_t *error)
{
    struct replicas *r = a->replicas;
    struct store_job job, *jp = NULL;
    struct peer_job pj;
    struct tier_policy pol;
    struct replica_req rq;
    char path[PATH_MAX], what[160];
    uint64_t max;
    int fd = take_fd (c);
    tier_error_t e2;

    if (fd < 0) {
        errno = EINVAL;
        tier_errprintf (error, "replica.prefetch needs one descriptor");
        return NULL;
    }
    max = size_bound (a, what, sizeof (what));
    if (get_path (req, path, sizeof (path), error) < 0
        || check_source (fd, path, &rq.st, max, what, error) < 0) {
        close (fd);
        return NULL;
    }
    if (!r || !r->enabled) {
        close (fd);
        errno = ENOTSUP;
        tier_errprintf (error, "no replica cache on node %s: %s", a->node,
                        r ? r->why : "no BBDir");
        return NULL;
    }
    memset (&pol, 0, sizeof (pol));
    if (rpc_caller_job (a, c, &job, &pj, &e2) == 0) {
        jp = &job;
        if (policy_job_resolve (a, &job, path, &pol) < 0)
            pol.role = TIER_POLICY_NONE;
    }
    else {
        struct passwd *pw = NULL;
        struct tier_policy_set *set;
        struct tier_policy_match m;
        char buf[4096];
        struct passwd pwd;
        if (getpwuid_r (c->cred.uid, &pwd, buf, sizeof (buf), &pw) || !pw
            || !(set = policy_user_set (a, c->cred.uid, pw->pw_gid,
                                        pw->pw_name))) {
            close (fd);
            errno = EIO;
            tier_errprintf (error, "cannot read the policies of uid %u",
                            (unsigned) c->cred.uid);
            return NULL;
        }
        if (tier_policy_resolve (set, path, &m) == 0 && m.policy) {
            pol = *m.policy;
            pol.dir = pol.comment = pol.source = NULL;
        }
        tier_policy_set_destroy (set);
    }
    if (!under_allowed (a, path) || pol.role != TIER_POLICY_BATCH) {
        close (fd);
        errno = EPERM;
        tier_errprintf (error, "%s is not in a batch directory (set one "
                        "with: tierctl set policy DIR batch)", path);
        return NULL;
    }
    rq.job = jp;
    rq.uid = c->cred.uid;
    rq.pol = &pol;
    rq.path = path;
    rq.fd = fd;
    if (jp)
        ctr_add (a, jp, TIER_ROLE_BATCH, TIER_CTR_GFS_META_OPS, 1);
    return serve (a, c, &rq, error);
}

static json_t *rec_json (const struct replica *x)
{
    return json_pack ("{s:s s:s s:I s:I s:I s:I s:I s:b s:I}",
                      "id", x->id, "path", x->path ? x->path : "",
                      "uid", (json_int_t) x->uid,
                      "size", (json_int_t) x->size,
                      "fetched", (json_int_t) x->fetched,
                      "used", (json_int_t) x->used,
                      "expires", (json_int_t) x->expires,
                      "owner", x->owner,
                      "opens", (json_int_t) x->opens);
}

static bool mine (struct agent *a, struct conn *c, const struct replica *x)
{
    return agent_privileged (a, c->cred.uid) || x->uid == c->cred.uid;
}

/* replica.evict {path}: remove the caller's replicas of files under path
 * (root: everyone's) that this node knows of.
 */
json_t *op_replica_evict (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error)
{
    struct replicas *r = a->replicas;
    char path[PATH_MAX];
    json_int_t files = 0, bytes = 0;

    if (get_path (req, path, sizeof (path), error) < 0)
        return NULL;
    if (r)
        for (int i = 0; i < BUCKETS; i++) {
            struct replica *x = r->tab[i], *next;
            for (; x; x = next) {
                next = x->next;
                if (!x->path || !tier_path_under (x->path, path)
                    || !mine (a, c, x))
                    continue;
                files++;
                bytes += (json_int_t) x->size;
                rec_evict (a, x, "tierctl evict");
            }
        }
    /* and the mirrors of directories under path */
    mirror_drop (a, c->cred.uid, NULL, path);
    return json_pack ("{s:s s:I s:I}", "node", a->node, "files", files,
                      "bytes", bytes);
}

/* replica.list {path?}: the replicas this node knows (the caller's). */
json_t *op_replica_list (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error)
{
    struct replicas *r = a->replicas;
    json_t *arr = json_array ();
    const char *under = NULL;

    if (!arr)
        return NULL;
    (void) json_unpack (req, "{s?s}", "path", &under);
    if (r)
        for (int i = 0; i < BUCKETS; i++)
            for (struct replica *x = r->tab[i]; x; x = x->next) {
                json_t *o;
                if (!mine (a, c, x) || (under && (!x->path
                    || !tier_path_under (x->path, under))))
                    continue;
                if ((o = rec_json (x)))
                    json_array_append_new (arr, o);
            }
    return json_pack ("{s:s s:o}", "node", a->node, "replicas", arr);
}

uint64_t replica_used (struct agent *a)
{
    return a->replicas ? a->replicas->owned_bytes : 0;
}

json_t *replica_status_json (struct agent *a)
{
    struct replicas *r = a->replicas;
    int queued = 0;

    if (!r)
        return json_pack ("{s:b s:s}", "enabled", 0, "why", "no BBDir");
    for (struct fetch *f = r->fetches; f; f = f->next)
        if (!f->pid && !f->done)
            queued++;
    return json_pack ("{s:b s:s s:s s:I s:I s:I s:I s:I s:i s:i s:I s:I}",
                      "enabled", r->enabled, "why", r->why,
                      "path", r->bb,
                      "files", (json_int_t) r->owned_files,
                      "bytes", (json_int_t) r->owned_bytes,
                      "known", (json_int_t) r->known_files,
                      "budget", (json_int_t) a->conf->bb_capacity,
                      "free", (json_int_t) (r->enabled ? bb_free (r) : 0),
                      "fetching", r->running, "queued", queued,
                      "fetched_bytes", (json_int_t) r->fetched_bytes,
                      "fallthroughs", (json_int_t) r->fallthroughs);
}

/* --------------------------------------------------------- start, stop */

struct load_ctx {
    struct agent *a;
    struct store_kv *drop;
    int ndrop, cdrop;
};

/* Re-verify a record from LMDB: its file must still be there. */
static int load_cb (const char *key, const void *val, size_t len, void *arg)
{
    struct load_ctx *lc = arg;
    struct replicas *r = lc->a->replicas;
    json_error_t jerr;
    json_t *o = json_loadb (val, len, 0, &jerr);
    const char *path = "";
    json_int_t uid = 0, size = 0, fetched = 0, used = 0, expires = 0;
    json_int_t batch = 0, opens = 0;
    int owner = 0;
    char file[PATH_MAX];
    struct replica *x;
    struct stat st;

    rec_file (r, key, file, sizeof (file));
    if (!o || json_unpack (o, "{s:s s:I s:I s:I s:I s:I s?I s:b s?I}",
                           "path", &path, "uid", &uid, "size", &size,
                           "fetched", &fetched, "used", &used,
                           "expires", &expires, "batch", &batch,
                           "owner", &owner, "opens", &opens) < 0
        || lstat (file, &st) < 0 || !S_ISREG (st.st_mode)
        || st.st_size != size || strlen (key) >= ID_MAX) {
        /* gone, or unreadable: forget it */
        if (lc->ndrop == lc->cdrop) {
            int n = lc->cdrop ? lc->cdrop * 2 : 16;
            struct store_kv *d = realloc (lc->drop, n * sizeof (*d));
            if (!d) {
                json_decref (o);
                return 0;
            }
            lc->drop = d;
            lc->cdrop = n;
        }
        lc->drop[lc->ndrop].key = strdup (key);
        lc->drop[lc->ndrop].val = NULL;
        if (lc->drop[lc->ndrop].key)
            lc->ndrop++;
        json_decref (o);
        return 0;
    }
    if ((x = rec_add (r, key))) {
        x->path = strdup (path);
        x->uid = (uint32_t) uid;
        x->size = (uint64_t) size;
        x->fetched = fetched;
        x->used = used;
        x->expires = expires;
        x->batch = (uint32_t) batch;
        x->opens = (uint64_t) opens;
        x->owner = owner;
        rec_account (r, x, +1);
    }
    json_decref (o);
    return 0;
}

int replica_init (struct agent *a)
{
    struct replicas *r = calloc (1, sizeof (*r));
    char path[PATH_MAX];
    struct load_ctx lc = { .a = a };
    tier_error_t e;
    int fds[2];

    if (!r)
        return -1;
    a->replicas = r;
    r->rfd = r->wfd = -1;
    if (!a->conf->bb_dir[0]) {
        (void) snprintf (r->why, sizeof (r->why), "no BBDir is configured");
        return 0;
    }
    if (strlen (a->conf->bb_dir) >= sizeof (r->bb)) {
        (void) snprintf (r->why, sizeof (r->why), "BBDir is too long");
        return 0;
    }
    (void) snprintf (r->bb, sizeof (r->bb), "%s", a->conf->bb_dir);
    {
        /* the boot id tells a previous boot's locks of this node */
        int fd = open ("/proc/sys/kernel/random/boot_id", O_RDONLY
                       | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read (fd, r->boot, sizeof (r->boot) - 1) : -1;
        if (fd >= 0)
            close (fd);
        r->boot[n > 0 ? n : 0] = '\0';
        for (char *p = r->boot; *p; p++)
            if (*p == '\n' || *p == ' ')
                *p = '\0';
        if (!r->boot[0])
            (void) snprintf (r->boot, sizeof (r->boot), "unknown");
    }
    (void) snprintf (path, sizeof (path), "%.2048s/replicas", r->bb);
    if (own_dir (r->bb, 0711) < 0 || own_dir (path, 0711) < 0) {
        (void) snprintf (r->why, sizeof (r->why), "%s: %s (BBDir must be a "
                         "directory of root's)", path, strerror (errno));
        tier_log (LOG_ERR, "replica cache disabled: %s", r->why);
        return 0;
    }
    (void) snprintf (path, sizeof (path), "%.2048s/.tmp", r->bb);
    if (own_dir (path, 0700) < 0) {
        (void) snprintf (r->why, sizeof (r->why), "%s: %s", path,
                         strerror (errno));
        tier_log (LOG_ERR, "replica cache disabled: %s", r->why);
        return 0;
    }
    {
        /* copies of this node's previous life are garbage */
        int dfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                        | O_CLOEXEC);
        if (dfd >= 0) {
            (void) rm_tree_at (dfd, a->node);
            close (dfd);
        }
    }
    (void) snprintf (path, sizeof (path), "%.2048s/.tmp/%.64s", r->bb,
                     a->node);
    if (own_dir (path, 0700) < 0) {
        (void) snprintf (r->why, sizeof (r->why), "%s: %s", path,
                         strerror (errno));
        tier_log (LOG_ERR, "replica cache disabled: %s", r->why);
        return 0;
    }
    if (pipe2 (fds, O_CLOEXEC) < 0
        || fcntl (fds[0], F_SETFL, O_NONBLOCK) < 0) {
        tier_log_error ("replica cache: pipe");
        return -1;
    }
    r->rfd = fds[0];
    r->wfd = fds[1];
    if (server_watch (a, r->rfd, results_read) < 0) {
        tier_log_error ("replica cache: epoll");
        return -1;
    }
    if (store_replica_foreach (a->store, load_cb, &lc, &e) < 0)
        tier_log (LOG_ERR, "replica index: %s", e.text);
    if (lc.ndrop) {
        (void) store_replica_apply (a->store, lc.drop, lc.ndrop, &e);
        tier_log (LOG_INFO, "replica index: %d records without their "
                  "file dropped", lc.ndrop);
    }
    for (int i = 0; i < lc.ndrop; i++)
        free ((char *) lc.drop[i].key);
    free (lc.drop);
    r->enabled = true;
    tier_log (LOG_INFO, "replica cache in %s: %llu replicas of this node, "
              "%llu bytes (budget %llu)", r->bb,
              (unsigned long long) r->owned_files,
              (unsigned long long) r->owned_bytes,
              (unsigned long long) a->conf->bb_capacity);
    return 0;
}

void replica_fini (struct agent *a)
{
    struct replicas *r = a->replicas;

    if (!r)
        return;
    (void) replica_flush (a);
    while (r->fetches) {
        struct fetch *f = r->fetches;
        if (f->pid > 0)
            (void) kill (f->pid, SIGKILL);
        for (struct waiter *w = f->waiters; w; w = w->next)
            w->c->waiting--;
        fetch_remove (a, f);
    }
    for (int i = 0; i < BUCKETS; i++)
        while (r->tab[i])
            rec_unlink (r, r->tab[i]);
    if (r->rfd >= 0)
        close (r->rfd);
    if (r->wfd >= 0)
        close (r->wfd);
    free (r);
    a->replicas = NULL;
}

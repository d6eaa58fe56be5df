/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* gfsemu.c - GFS emulator: a counting, throttled FUSE passthrough
 *
 * Serves BACKING at MOUNTPOINT through the libfuse low-level API, so that
 * every kernel request (LOOKUP, GETATTR, OPEN, READ...) is seen and
 * counted as such.  Each inode the kernel knows is an O_PATH descriptor
 * of the backing file, keyed by (st_dev, st_ino); operations go through
 * these descriptors (never through path names, so BACKING may be the
 * mount point itself), with the caller's fsuid, fsgid and supplementary
 * groups set in the serving thread.  A hidden control directory
 * MOUNTPOINT/.gfsemu holds the counters (stats), a reset switch and the
 * fault rules (fault.c: injected errors, short transfers, hangs).
 * README.md says what is counted.
 *
 * Why not bindfs (Debian 12 has 1.14.7): it serves paths through
 * libfuse's high-level API and neither counts the kernel's requests by
 * type, nor adds latency or a shared bandwidth cap, which is what the
 * tests measure.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "lib/log.h"
#include "lib/units.h"

#include "creds.h"
#include "fault.h"
#include "stats.h"
#include "throttle.h"

#define CTL_NAME "gfsemu"
#define CTL_DIRNAME "." CTL_NAME

/* Node ids of the control files.  Real nodes are heap addresses, and
 * FUSE_ROOT_ID (1) is the root. */
enum ctl_ino {
    CTL_DIR = 2,
    CTL_STATS = 3,
    CTL_RESET = 4,
    CTL_FAULT = 5,
};

/* An inode the kernel holds a reference to (nlookup of them). */
struct node {
    struct node *next;          /* hash chain */
    int fd;                     /* O_PATH|O_NOFOLLOW */
    dev_t dev;
    ino_t ino;
    mode_t type;                /* S_IFMT bits: they never change */
    uint64_t nlookup;
};

/* An open file. */
struct handle {
    int fd;
    struct stats_entry *st;     /* counters of the path it was opened as */
    bool reader, writer;        /* counted in the open-handle gauges */
};

/* A gauge of open handles and its peak (since the last reset). */
struct gauge {
    uint64_t now;               /* atomic */
    uint64_t peak;              /* atomic */
};

/* An open directory. */
struct dirhandle {
    DIR *dp;
    off_t off;                  /* offset of entry (or of the next one) */
    struct dirent *entry;       /* read but not yet returned */
    struct stats_entry *st;
    int is_root;
};

/* An open control file: a snapshot of the stats or of the fault rules,
 * or (writer) the rules written so far. */
struct ctlhandle {
    char *buf;
    size_t len;
    size_t size; /* of buf, for a writer */
    bool writer;
    bool written; /* a write came */
    bool dirty;   /* written since the last flush */
    bool bad;     /* a line written did not parse */
};

struct options {
    char *latency;              /* microseconds */
    char *bandwidth;            /* bytes per second, with K/M/G suffix */
    char *burst;
    char *timeout;              /* seconds: all three timeouts */
    char *entry_timeout;
    char *attr_timeout;
    char *negative_timeout;
    int root_squash;
    int acl; /* POSIX ACLs (FUSE_CAP_POSIX_ACL) */
    unsigned int squash_uid;
    unsigned int squash_gid;
    unsigned int max_threads;
    char *faults; /* the fault= rules, one per line */
    char *fault_seed;
    char *backing;
};

struct gfsemu {
    struct options opt;
    double entry_timeout;
    double attr_timeout;
    double negative_timeout;
    uint64_t latency_ns;
    uint64_t bandwidth;
    uint64_t burst;
    struct creds_map map;

    struct node root;
    char root_path[PATH_MAX];   /* the backing root as /proc shows it */
    size_t root_len;

    pthread_mutex_t nodes_lock;
    struct node **nodes;
    size_t nbuckets;            /* a power of two */
    size_t nnodes;

    struct stats *stats;
    struct throttle throttle;
    uint64_t latency_ops;       /* atomic */
    uint64_t latency_wait_ns;   /* atomic */
    uint64_t resets;            /* atomic */
    uint64_t start_ns;
    struct gauge readers;       /* files open for reading */
    struct gauge writers;       /* files open for writing */
    struct fault_ctl *faults;
    struct fault_rules *fault_rules; /* of the options, until started */
    uint64_t fault_seed;
    struct fuse_session *se;
};

static void gauge_up (struct gauge *g)
{
    uint64_t n = __atomic_add_fetch (&g->now, 1, __ATOMIC_RELAXED);
    uint64_t peak = __atomic_load_n (&g->peak, __ATOMIC_RELAXED);

    while (n > peak && !__atomic_compare_exchange_n (&g->peak, &peak, n,
                                                     false, __ATOMIC_RELAXED,
                                                     __ATOMIC_RELAXED))
        ;
}

static void gauge_down (struct gauge *g)
{
    __atomic_sub_fetch (&g->now, 1, __ATOMIC_RELAXED);
}

/* A reset starts the peak again from what is open now. */
static void gauge_reset (struct gauge *g)
{
    __atomic_store_n (&g->peak, __atomic_load_n (&g->now, __ATOMIC_RELAXED),
                      __ATOMIC_RELAXED);
}

/* Count a new handle by its access mode. */
static void handle_count (struct gfsemu *gx, struct handle *h, int flags)
{
    int acc = flags & O_ACCMODE;

    h->reader = acc == O_RDONLY || acc == O_RDWR;
    h->writer = acc == O_WRONLY || acc == O_RDWR;
    if (h->reader)
        gauge_up (&gx->readers);
    if (h->writer)
        gauge_up (&gx->writers);
}

static void handle_uncount (struct gfsemu *gx, struct handle *h)
{
    if (h->reader)
        gauge_down (&gx->readers);
    if (h->writer)
        gauge_down (&gx->writers);
    h->reader = h->writer = false;
}

static pthread_key_t buf_key;

/*
 * Nodes.
 */

static struct node *node_of (struct gfsemu *gx, fuse_ino_t ino)
{
    if (ino == FUSE_ROOT_ID)
        return &gx->root;
    return (struct node *)(uintptr_t)ino;
}

static fuse_ino_t ino_of (struct gfsemu *gx, struct node *n)
{
    if (n == &gx->root)
        return FUSE_ROOT_ID;
    return (fuse_ino_t)(uintptr_t)n;
}

static int is_ctl (fuse_ino_t ino)
{
    return ino == CTL_DIR || ino == CTL_STATS || ino == CTL_RESET
           || ino == CTL_FAULT;
}

static size_t node_hash (struct gfsemu *gx, dev_t dev, ino_t ino)
{
    uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

    return (size_t)(h ^ (h >> 29)) & (gx->nbuckets - 1);
}

static void nodes_grow (struct gfsemu *gx)
{
    size_t old = gx->nbuckets;
    struct node **oldv = gx->nodes;
    struct node **v, *n, *next;
    size_t i;

    if (!(v = calloc (old * 2, sizeof (v[0]))))
        return;     /* longer chains, still correct */
    gx->nodes = v;
    gx->nbuckets = old * 2;
    for (i = 0; i < old; i++) {
        for (n = oldv[i]; n; n = next) {
            size_t b = node_hash (gx, n->dev, n->ino);

            next = n->next;
            n->next = v[b];
            v[b] = n;
        }
    }
    free (oldv);
}

/* Take one lookup reference on the node of (st_dev, st_ino), creating it
 * with fd, or closing fd when the node exists.  Returns NULL on ENOMEM
 * (fd closed).
 */
static struct node *node_get (struct gfsemu *gx, int fd,
                              const struct stat *st)
{
    struct node *n;
    size_t b;

    pthread_mutex_lock (&gx->nodes_lock);
    b = node_hash (gx, st->st_dev, st->st_ino);
    for (n = gx->nodes[b]; n; n = n->next) {
        if (n->dev == st->st_dev && n->ino == st->st_ino) {
            n->nlookup++;
            pthread_mutex_unlock (&gx->nodes_lock);
            close (fd);
            return n;
        }
    }
    if (!(n = calloc (1, sizeof (*n)))) {
        pthread_mutex_unlock (&gx->nodes_lock);
        close (fd);
        errno = ENOMEM;
        return NULL;
    }
    n->fd = fd;
    n->dev = st->st_dev;
    n->ino = st->st_ino;
    n->type = st->st_mode & S_IFMT;
    n->nlookup = 1;
    n->next = gx->nodes[b];
    gx->nodes[b] = n;
    if (++gx->nnodes > 2 * gx->nbuckets)
        nodes_grow (gx);
    pthread_mutex_unlock (&gx->nodes_lock);
    return n;
}

static void node_forget (struct gfsemu *gx, struct node *n, uint64_t count)
{
    struct node **p;

    if (n == &gx->root)
        return;
    pthread_mutex_lock (&gx->nodes_lock);
    if (n->nlookup > count) {
        n->nlookup -= count;
        pthread_mutex_unlock (&gx->nodes_lock);
        return;
    }
    p = &gx->nodes[node_hash (gx, n->dev, n->ino)];
    while (*p && *p != n)
        p = &(*p)->next;
    if (*p)
        *p = n->next;
    gx->nnodes--;
    pthread_mutex_unlock (&gx->nodes_lock);
    close (n->fd);
    free (n);
}

/* "/proc/self/fd/N": opening it reopens the O_PATH descriptor with new
 * flags, and path calls on it act on the file itself. */
static const char *fd_path (int fd, char *buf, size_t size)
{
    snprintf (buf, size, "/proc/self/fd/%d", fd);
    return buf;
}

/* The path of n relative to the backing root ("." for the root), as the
 * kernel's dentry of its descriptor says now (renames included).
 */
static const char *node_path (struct gfsemu *gx, struct node *n, char *buf,
                              size_t size)
{
    static const char deleted[] = " (deleted)";
    char link[64];
    ssize_t len;
    size_t dl = sizeof (deleted) - 1;
    struct stat st;

    if (n == &gx->root)
        return ".";
    len = readlink (fd_path (n->fd, link, sizeof (link)), buf, size - 1);
    if (len < 0)
        return "?";
    buf[len] = '\0';
    if ((size_t)len > dl && !strcmp (buf + len - dl, deleted)
        && fstat (n->fd, &st) == 0 && st.st_nlink == 0)
        buf[len - dl] = '\0';
    if (gx->root_len == 1 && buf[0] == '/')
        return buf[1] ? buf + 1 : ".";
    if (!strncmp (buf, gx->root_path, gx->root_len)) {
        if (buf[gx->root_len] == '/')
            return buf + gx->root_len + 1;
        if (buf[gx->root_len] == '\0')
            return ".";
    }
    return buf;     /* moved out of the backing tree behind our back */
}

/* The path of name in directory parent. */
static const char *child_path (struct gfsemu *gx, struct node *parent,
                               const char *name, char *buf, size_t size)
{
    char tmp[PATH_MAX];
    const char *dir = node_path (gx, parent, tmp, sizeof (tmp));

    if (!strcmp (dir, "."))
        snprintf (buf, size, "%s", name);
    else
        snprintf (buf, size, "%s/%s", dir, name);
    return buf;
}

/*
 * Accounting, delays, identity.
 */

/* The per-request latency. */
static void op_delay (struct gfsemu *gx)
{
    if (gx->latency_ns == 0)
        return;
    __atomic_fetch_add (&gx->latency_ops, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add (&gx->latency_wait_ns, gx->latency_ns,
                        __ATOMIC_RELAXED);
    throttle_sleep_until (throttle_now () + gx->latency_ns);
}

/* The request a counter counts, as fault rules name it. */
static enum fault_op fault_op_of (enum stats_field field)
{
    switch (field) {
        case STATS_LOOKUP:
            return FAULT_LOOKUP;
        case STATS_GETATTR:
            return FAULT_GETATTR;
        case STATS_SETATTR:
            return FAULT_SETATTR;
        case STATS_OPEN:
            return FAULT_OPEN;
        case STATS_CREATE:
            return FAULT_CREATE;
        case STATS_OPENDIR:
            return FAULT_OPENDIR;
        case STATS_READDIR:
            return FAULT_READDIR;
        case STATS_READ:
            return FAULT_READ;
        case STATS_WRITE:
            return FAULT_WRITE;
        case STATS_FLUSH:
            return FAULT_FLUSH;
        case STATS_RELEASE:
            return FAULT_RELEASE;
        case STATS_FSYNC:
            return FAULT_FSYNC;
        case STATS_MKDIR:
            return FAULT_MKDIR;
        case STATS_MKNOD:
            return FAULT_MKNOD;
        case STATS_SYMLINK:
            return FAULT_SYMLINK;
        case STATS_READLINK:
            return FAULT_READLINK;
        case STATS_LINK:
            return FAULT_LINK;
        case STATS_UNLINK:
            return FAULT_UNLINK;
        case STATS_RMDIR:
            return FAULT_RMDIR;
        case STATS_RENAME:
            return FAULT_RENAME;
        case STATS_STATFS:
            return FAULT_STATFS;
        default:
            return FAULT_NOPS;
    }
}

static int session_ended (void *arg)
{
    return fuse_session_exited (arg);
}

/* The fault rules on one request of type field on path (counted already):
 * 0 to go on, or the errno value to answer with.  A hang holds this
 * worker thread (and no lock) until the rules are set again or the
 * session ends, then answers EIO; a delay holds it for its milliseconds,
 * then lets it go on.  *shortp (reads and writes) is set
 * for a short transfer.
 */
static int op_fault (struct gfsemu *gx, const char *path,
                     enum stats_field field, int *shortp)
{
    int err = 0;

    switch (fault_ctl_check (gx->faults, path, fault_op_of (field), &err)) {
        case FAULT_ERROR:
            return err;
        case FAULT_HANG:
            (void) fault_ctl_hang (gx->faults, session_ended, gx->se);
            return EIO;
        case FAULT_DELAY: /* err ms, in steps that notice the end */
            for (int left = err; left > 0 && !session_ended (gx->se);
                 left -= 100) {
                struct timespec ts = { 0,
                                       (left < 100 ? left : 100) * 1000000L };
                (void) nanosleep (&ts, NULL);
            }
            return 0;
        case FAULT_SHORT:
            if (shortp)
                *shortp = 1;
            return 0;
        default:
            return 0;
    }
}

/* The path of a data request: the one its file was opened as. */
static const char *entry_path (struct stats_entry *e)
{
    return e ? e->path : "?";
}

/* Count one request of type field on path, apply the latency, then the
 * fault rules: returns 0 to go on, or the errno value to answer with.
 * *ep is the entry of path (NULL on ENOMEM: totals only). */
static int op_start (struct gfsemu *gx, const char *path,
                     enum stats_field field, struct stats_entry **ep)
{
    struct stats_entry *e = stats_get (gx->stats, path);

    stats_add (gx->stats, e, field, 1);
    op_delay (gx);
    *ep = e;
    return op_fault (gx, path, field, NULL);
}

/* Hold a data transfer of n bytes back to the bandwidth cap. */
static void op_transfer (struct gfsemu *gx, uint64_t n)
{
    uint64_t now, wait;

    if (gx->bandwidth == 0 || n == 0)
        return;
    now = throttle_now ();
    if ((wait = throttle_take (&gx->throttle, n, now)) > 0)
        throttle_sleep_until (now + wait);
}

static void reply_err (struct gfsemu *gx, fuse_req_t req,
                       struct stats_entry *e, int err)
{
    if (err)
        stats_add (gx->stats, e, STATS_ERRORS, 1);
    fuse_reply_err (req, err);
}

/* Act as the caller of req in this thread until creds_restore ().
 *
 * The kernel sends no supplementary groups, and reading them from
 * /proc/TID/task/TID/status costs about 40 us, more than the request
 * itself.  So the first try (pass 0) sets fsuid and fsgid only, and only
 * a try that failed with EACCES or EPERM is repeated with the groups
 * (pass 1; see caller_retry).  Fewer groups can only deny more, except
 * for a mode whose group class has less than "other" (0604 and a member
 * of the group): the kernel has already refused that one, since
 * default_permissions is always on and checks with all groups.
 * Returns 0 or an errno value.
 */
static int caller_begin (struct gfsemu *gx, fuse_req_t req, int pass)
{
    const struct fuse_ctx *ctx = fuse_req_ctx (req);
    struct creds c = { .uid = ctx->uid, .gid = ctx->gid };
    gid_t *big = NULL;
    int n = 0;
    int rc;

    c.groups = c.groups_buf;
    if (ctx->uid != 0 && pass > 0) {
        n = fuse_req_getgroups (req, 32, c.groups_buf);
        if (n > 32 && (big = calloc ((size_t)n, sizeof (gid_t)))) {
            n = fuse_req_getgroups (req, n, big);
            c.groups = big;
        }
        /* A caller whose groups cannot be read (it exited, or lives in
         * another pid namespace) gets none: least privilege. */
        if (n < 0 || (n > 32 && !big))
            n = 0;
    }
    c.ngroups = creds_squash (&gx->map, &c.uid, &c.gid, c.groups, n);
    rc = creds_become (&c);
    free (big);
    return rc < 0 ? errno : 0;
}

/* After a try that ended with err (0 or an errno value): whether to try
 * once more with the caller's supplementary groups.  Root (squashed or
 * not) has none that matter. */
static int caller_retry (fuse_req_t req, int err, int *pass)
{
    if (*pass > 0 || (err != EACCES && err != EPERM)
        || fuse_req_ctx (req)->uid == 0)
        return 0;
    (*pass)++;
    return 1;
}

static void *thread_buf (size_t size)
{
    struct tbuf {
        size_t size;
        char data[];
    } *b = pthread_getspecific (buf_key);

    if (!b || b->size < size) {
        free (b);
        if (!(b = malloc (sizeof (*b) + size))) {
            pthread_setspecific (buf_key, NULL);
            return NULL;
        }
        b->size = size;
        pthread_setspecific (buf_key, b);
    }
    return b->data;
}

/*
 * The control directory.
 */

static void ctl_attr (struct gfsemu *gx, fuse_ino_t ino, struct stat *st)
{
    memset (st, 0, sizeof (*st));
    st->st_ino = 0xffffff00u + (ino_t)ino;
    st->st_uid = 0;
    st->st_gid = 0;
    st->st_nlink = 1;
    st->st_mtime = (time_t)(gx->start_ns / 1000000000ULL);
    switch (ino) {
        case CTL_DIR:
            st->st_mode = S_IFDIR | 0555;
            st->st_nlink = 2;
            break;
        case CTL_STATS:
            st->st_mode = S_IFREG | 0444;
            break;
        case CTL_FAULT:
            st->st_mode = S_IFREG | 0644;
            break;
        default:
            st->st_mode = S_IFREG | 0200;
            break;
    }
}

static void ctl_entry (struct gfsemu *gx, fuse_ino_t ino,
                       struct fuse_entry_param *ep)
{
    memset (ep, 0, sizeof (*ep));
    ep->ino = ino;
    ctl_attr (gx, ino, &ep->attr);
}

static void format_stats (struct gfsemu *gx, FILE *f)
{
    struct throttle_stats ts;
    struct fault_ctl_stats fs;

    throttle_get (&gx->throttle, &ts);
    fault_ctl_get (gx->faults, &fs);
    fprintf (f, "format 1\n");
    fprintf (f, "config.latency_us %" PRIu64 "\n", gx->latency_ns / 1000);
    fprintf (f, "config.bandwidth %" PRIu64 "\n", gx->bandwidth);
    fprintf (f, "config.burst %" PRIu64 "\n", gx->burst);
    fprintf (f, "config.root_squash %d\n", gx->map.root_squash);
    fprintf (f, "config.squash_uid %u\n", (unsigned int)gx->map.squash_uid);
    fprintf (f, "config.squash_gid %u\n", (unsigned int)gx->map.squash_gid);
    fprintf (f, "config.entry_timeout %g\n", gx->entry_timeout);
    fprintf (f, "config.attr_timeout %g\n", gx->attr_timeout);
    fprintf (f, "config.negative_timeout %g\n", gx->negative_timeout);
    fprintf (f, "resets %" PRIu64 "\n",
             __atomic_load_n (&gx->resets, __ATOMIC_RELAXED));
    fprintf (f, "latency.ops %" PRIu64 "\n",
             __atomic_load_n (&gx->latency_ops, __ATOMIC_RELAXED));
    fprintf (f, "latency.wait_ns %" PRIu64 "\n",
             __atomic_load_n (&gx->latency_wait_ns, __ATOMIC_RELAXED));
    fprintf (f, "throttle.bytes %" PRIu64 "\n", ts.bytes);
    fprintf (f, "throttle.ops %" PRIu64 "\n", ts.ops);
    fprintf (f, "throttle.delayed_bytes %" PRIu64 "\n", ts.delayed_bytes);
    fprintf (f, "throttle.delayed_ops %" PRIu64 "\n", ts.delayed_ops);
    fprintf (f, "throttle.wait_ns %" PRIu64 "\n", ts.wait_ns);
    fprintf (f, "throttle.stall_ns %" PRIu64 "\n", ts.stall_ns);
    fprintf (f, "open.readers %" PRIu64 "\n",
             __atomic_load_n (&gx->readers.now, __ATOMIC_RELAXED));
    fprintf (f, "open.readers_peak %" PRIu64 "\n",
             __atomic_load_n (&gx->readers.peak, __ATOMIC_RELAXED));
    fprintf (f, "open.writers %" PRIu64 "\n",
             __atomic_load_n (&gx->writers.now, __ATOMIC_RELAXED));
    fprintf (f, "open.writers_peak %" PRIu64 "\n",
             __atomic_load_n (&gx->writers.peak, __ATOMIC_RELAXED));
    fprintf (f, "fault.rules %" PRIu64 "\n", fs.rules);
    fprintf (f, "fault.hits %" PRIu64 "\n", fs.hits);
    fprintf (f, "fault.hung %" PRIu64 "\n", fs.hung);
    fprintf (f, "fault.seed %" PRIu64 "\n", fs.seed);
    stats_format (gx->stats, f);
}

static void reset_stats (struct gfsemu *gx)
{
    stats_reset (gx->stats);
    throttle_reset (&gx->throttle);
    __atomic_store_n (&gx->latency_ops, 0, __ATOMIC_RELAXED);
    __atomic_store_n (&gx->latency_wait_ns, 0, __ATOMIC_RELAXED);
    gauge_reset (&gx->readers);
    gauge_reset (&gx->writers);
    __atomic_fetch_add (&gx->resets, 1, __ATOMIC_RELAXED);
}

static void ctl_lookup (struct gfsemu *gx, fuse_req_t req, fuse_ino_t parent,
                        const char *name)
{
    struct fuse_entry_param ep;

    if (parent != CTL_DIR) {
        fuse_reply_err (req, ENOTDIR);
        return;
    }
    if (!strcmp (name, "stats"))
        ctl_entry (gx, CTL_STATS, &ep);
    else if (!strcmp (name, "reset"))
        ctl_entry (gx, CTL_RESET, &ep);
    else if (!strcmp (name, "fault"))
        ctl_entry (gx, CTL_FAULT, &ep);
    else {
        fuse_reply_err (req, ENOENT);
        return;
    }
    fuse_reply_entry (req, &ep);
}

/* A snapshot of the stats or the fault rules, for reading. */
static struct ctlhandle *ctl_snapshot (struct gfsemu *gx, fuse_ino_t ino)
{
    struct ctlhandle *h;
    FILE *f;

    if (!(h = calloc (1, sizeof (*h))))
        return NULL;
    if (!(f = open_memstream (&h->buf, &h->len))) {
        free (h);
        return NULL;
    }
    if (ino == CTL_FAULT)
        (void) fault_ctl_format (gx->faults, f);
    else
        format_stats (gx, f);
    if (fclose (f) != 0) {
        free (h->buf);
        free (h);
        return NULL;
    }
    return h;
}

static void ctl_open (struct gfsemu *gx, fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi)
{
    struct ctlhandle *h;
    int acc = fi->flags & O_ACCMODE;

    if (ino == CTL_DIR) {
        fuse_reply_err (req, EISDIR);
        return;
    }
    /* default_permissions lets root past the modes: check here too.  The
     * fault rules are read or written, by root only (squashed or not). */
    if ((ino == CTL_STATS && acc != O_RDONLY)
        || (ino == CTL_RESET && acc == O_RDONLY)
        || (ino == CTL_FAULT && acc != O_RDONLY
            && (acc != O_WRONLY || fuse_req_ctx (req)->uid != 0))) {
        fuse_reply_err (req, EACCES);
        return;
    }
    fi->direct_io = 1;  /* size 0 in getattr: read to EOF regardless */
    fi->keep_cache = 0;
    if (ino == CTL_RESET) {
        reset_stats (gx);
        fi->fh = 0;
        fuse_reply_open (req, fi);
        return;
    }
    if (acc == O_WRONLY) {
        if ((h = calloc (1, sizeof (*h))))
            h->writer = true;
    }
    else
        h = ctl_snapshot (gx, ino);
    if (!h) {
        fuse_reply_err (req, ENOMEM);
        return;
    }
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open (req, fi) == -ENOENT) {
        free (h->buf);
        free (h);
    }
}

/* Rules written to the fault file: each write appends (whatever its
 * offset); the complete lines so far must parse, or the write fails with
 * EINVAL and so does the close.  The rules apply at the close (FLUSH). */
static void ctl_write (struct gfsemu *gx, fuse_req_t req,
                       struct fuse_bufvec *in, struct fuse_file_info *fi)
{
    struct ctlhandle *h = (struct ctlhandle *) (uintptr_t) fi->fh;
    size_t size = fuse_buf_size (in);
    struct fuse_bufvec dst = FUSE_BUFVEC_INIT (size);
    struct fault_rules *rs;
    char msg[256];
    char *nl;
    ssize_t n;

    if (!h || !h->writer) {
        fuse_reply_write (req, size); /* reset: the content is ignored */
        return;
    }
    if (h->bad || h->len + size > 1024 * 1024) {
        fuse_reply_err (req, h->bad ? EINVAL : EFBIG);
        return;
    }
    if (h->len + size + 1 > h->size) {
        size_t want = 2 * (h->len + size + 1);
        char *p = realloc (h->buf, want);

        if (!p) {
            fuse_reply_err (req, ENOMEM);
            return;
        }
        h->buf = p;
        h->size = want;
    }
    dst.buf[0].mem = h->buf + h->len;
    if ((n = fuse_buf_copy (&dst, in, 0)) < 0) {
        fuse_reply_err (req, (int) -n);
        return;
    }
    h->len += (size_t) n;
    h->buf[h->len] = '\0';
    h->written = h->dirty = true;
    if ((nl = strrchr (h->buf, '\n'))) {
        *nl = '\0';
        rs = fault_rules_parse (h->buf, 0, msg, sizeof (msg));
        *nl = '\n';
        if (!rs) {
            h->bad = errno == EINVAL;
            fuse_reply_err (req, errno);
            return;
        }
        fault_rules_destroy (rs);
    }
    fuse_reply_write (req, (size_t) n);
}

/* The close of a control file: written rules take effect.  Not at a
 * close before any write: the shell's `> fault` opens, dups and closes
 * (a FLUSH) before it writes. */
static void ctl_flush (struct gfsemu *gx, fuse_req_t req,
                       struct fuse_file_info *fi)
{
    struct ctlhandle *h = (struct ctlhandle *) (uintptr_t) fi->fh;
    char msg[256];

    if (!h || !h->writer || !h->dirty) {
        fuse_reply_err (req, 0);
        return;
    }
    if (h->bad) {
        fuse_reply_err (req, EINVAL);
        return;
    }
    if (fault_ctl_set (gx->faults, h->buf ? h->buf : "", msg, sizeof (msg))
        < 0) {
        fuse_reply_err (req, errno);
        return;
    }
    h->dirty = false;
    fuse_reply_err (req, 0);
}

static void ctl_read (fuse_req_t req, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    struct ctlhandle *h = (struct ctlhandle *)(uintptr_t)fi->fh;

    if (!h || off < 0 || (size_t)off >= h->len) {
        fuse_reply_buf (req, NULL, 0);
        return;
    }
    if (size > h->len - (size_t)off)
        size = h->len - (size_t)off;
    fuse_reply_buf (req, h->buf + off, size);
}

static void ctl_readdir (fuse_req_t req, size_t size, off_t off)
{
    static const struct {
        const char *name;
        fuse_ino_t ino;
        mode_t mode;
    } ents[] = {
        { ".", CTL_DIR, S_IFDIR },       { "..", FUSE_ROOT_ID, S_IFDIR },
        { "stats", CTL_STATS, S_IFREG }, { "reset", CTL_RESET, S_IFREG },
        { "fault", CTL_FAULT, S_IFREG },
    };
    char buf[512];
    size_t used = 0;
    off_t i;

    if (size > sizeof (buf))
        size = sizeof (buf);
    for (i = off; i >= 0 && (size_t)i < sizeof (ents) / sizeof (ents[0]);
         i++) {
        struct stat st = { .st_ino = ents[i].ino, .st_mode = ents[i].mode };
        size_t n = fuse_add_direntry (req, buf + used, size - used,
                                      ents[i].name, &st, i + 1);
        if (n > size - used)
            break;
        used += n;
    }
    fuse_reply_buf (req, buf, used);
}

/* Names in the root that are the control directory: not in the backing
 * tree, and not to be created, removed or renamed there. */
static int is_ctl_name (fuse_ino_t parent, const char *name)
{
    return parent == FUSE_ROOT_ID && !strcmp (name, CTL_DIRNAME);
}

/*
 * File system operations.
 */

static void gfs_init (void *userdata, struct fuse_conn_info *conn)
{
    struct gfsemu *gx = userdata;

    /* Every open reads from the backing file again (keep_cache 0): no
     * writeback cache.  No auto_inval_data: with attr_timeout 0 it sends
     * a GETATTR before every read () call, counts that say nothing about
     * the application.  No readdirplus: its implicit lookups would not be
     * counted. */
    conn->want &= ~(unsigned int)(FUSE_CAP_WRITEBACK_CACHE
                                  | FUSE_CAP_AUTO_INVAL_DATA
                                  | FUSE_CAP_READDIRPLUS
                                  | FUSE_CAP_READDIRPLUS_AUTO
                                  | FUSE_CAP_EXPORT_SUPPORT);
    /* -o acl: POSIX ACLs, as a real GFS has them: the kernel enforces
     * them (with default_permissions) from the system.posix_acl_*
     * attributes, which are the backing file's (gfs_getxattr) */
    if (gx->opt.acl && (conn->capable & FUSE_CAP_POSIX_ACL))
        conn->want |= FUSE_CAP_POSIX_ACL;
}

/* Fill ep for the O_PATH descriptor fd (consumed), taking a lookup
 * reference.  Returns 0 or -errno. */
static int make_entry (struct gfsemu *gx, int fd, struct fuse_entry_param *ep,
                       struct node **np)
{
    struct stat st;
    struct node *n;
    int err;

    if (fstatat (fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        err = errno;
        close (fd);
        return -err;
    }
    if (!(n = node_get (gx, fd, &st)))
        return -ENOMEM;
    memset (ep, 0, sizeof (*ep));
    ep->ino = ino_of (gx, n);
    ep->attr = st;
    ep->attr_timeout = gx->attr_timeout;
    ep->entry_timeout = gx->entry_timeout;
    *np = n;
    return 0;
}

static void reply_entry (struct gfsemu *gx, fuse_req_t req,
                         struct fuse_entry_param *ep, struct node *n)
{
    if (fuse_reply_entry (req, ep) == -ENOENT)    /* interrupted */
        node_forget (gx, n, 1);
}

static void gfs_lookup (fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *p, *n;
    struct fuse_entry_param ep;
    struct stats_entry *e;
    char path[PATH_MAX];
    int fd = -1, err, pass = 0;

    if (is_ctl_name (parent, name)) {
        ctl_entry (gx, CTL_DIR, &ep);
        fuse_reply_entry (req, &ep);
        return;
    }
    if (is_ctl (parent)) {
        ctl_lookup (gx, req, parent, name);
        return;
    }
    p = node_of (gx, parent);
    err = op_start (gx, child_path (gx, p, name, path, sizeof (path)),
                    STATS_LOOKUP, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if (!strcmp (name, ".") || !strcmp (name, "..")) {
        reply_err (gx, req, e, EINVAL);     /* never sent without export */
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        fd = openat (p->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err == ENOENT) {
        /* Not an error: a miss. */
        stats_add (gx->stats, e, STATS_LOOKUP_MISS, 1);
        if (gx->negative_timeout > 0) {
            memset (&ep, 0, sizeof (ep));
            ep.entry_timeout = gx->negative_timeout;
            fuse_reply_entry (req, &ep);
        }
        else
            fuse_reply_err (req, ENOENT);
        return;
    }
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if ((err = make_entry (gx, fd, &ep, &n)) < 0) {
        reply_err (gx, req, e, -err);
        return;
    }
    reply_entry (gx, req, &ep, n);
}

static void gfs_forget (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct gfsemu *gx = fuse_req_userdata (req);

    if (!is_ctl (ino))
        node_forget (gx, node_of (gx, ino), nlookup);
    fuse_reply_none (req);
}

static void gfs_forget_multi (fuse_req_t req, size_t count,
                              struct fuse_forget_data *forgets)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    size_t i;

    for (i = 0; i < count; i++) {
        if (!is_ctl (forgets[i].ino))
            node_forget (gx, node_of (gx, forgets[i].ino),
                         forgets[i].nlookup);
    }
    fuse_reply_none (req);
}

static void gfs_getattr (fuse_req_t req, fuse_ino_t ino,
                         struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n;
    struct stats_entry *e;
    struct stat st;
    char path[PATH_MAX];
    int err;

    if (is_ctl (ino)) {
        ctl_attr (gx, ino, &st);
        fuse_reply_attr (req, &st, 0);
        return;
    }
    n = node_of (gx, ino);
    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_GETATTR,
                    &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if (fstatat (n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
        reply_err (gx, req, e, errno);
        return;
    }
    fuse_reply_attr (req, &st, gx->attr_timeout);
}

/* Returns 0 or an errno value. */
static int do_setattr (struct node *n, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    char proc[64];
    int fd = -1;

    /* fi->fh is ours only for regular files (a directory's is a
     * dirhandle); elsewhere act through the node's path in /proc. */
    if (fi && n->type == S_IFREG)
        fd = ((struct handle *)(uintptr_t)fi->fh)->fd;
    fd_path (n->fd, proc, sizeof (proc));
    if (to_set & FUSE_SET_ATTR_MODE) {
        if ((fd >= 0 ? fchmod (fd, attr->st_mode & 07777)
                     : chmod (proc, attr->st_mode & 07777)) < 0)
            return errno;
    }
    if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
        gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

        if (fchownat (n->fd, "", uid, gid,
                      AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
            return errno;
    }
    if (to_set & FUSE_SET_ATTR_SIZE) {
        if ((fd >= 0 ? ftruncate (fd, attr->st_size)
                     : truncate (proc, attr->st_size)) < 0)
            return errno;
    }
    if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
        struct timespec tv[2] = {
            { .tv_nsec = UTIME_OMIT },
            { .tv_nsec = UTIME_OMIT },
        };

        if (to_set & FUSE_SET_ATTR_ATIME_NOW)
            tv[0].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_ATIME)
            tv[0] = attr->st_atim;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            tv[1].tv_nsec = UTIME_NOW;
        else if (to_set & FUSE_SET_ATTR_MTIME)
            tv[1] = attr->st_mtim;
        if ((fd >= 0 ? futimens (fd, tv)
                     : utimensat (AT_FDCWD, proc, tv, 0)) < 0)
            return errno;
    }
    return 0;
}

static void gfs_setattr (fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                         int to_set, struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n;
    struct stats_entry *e;
    struct stat st;
    char path[PATH_MAX];
    int err, pass = 0;

    if (is_ctl (ino)) {
        /* Only the truncation of `> reset` (or `> fault`) is accepted. */
        if ((ino != CTL_RESET && ino != CTL_FAULT)
            || (to_set & ~FUSE_SET_ATTR_SIZE)) {
            fuse_reply_err (req, EPERM);
            return;
        }
        ctl_attr (gx, ino, &st);
        fuse_reply_attr (req, &st, 0);
        return;
    }
    n = node_of (gx, ino);
    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_SETATTR,
                    &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        err = do_setattr (n, attr, to_set, fi);     /* idempotent */
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err == 0
        && fstatat (n->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = errno;
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    fuse_reply_attr (req, &st, gx->attr_timeout);
}

static void gfs_readlink (fuse_req_t req, fuse_ino_t ino)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n;
    struct stats_entry *e;
    char path[PATH_MAX];
    int err;
    char buf[PATH_MAX];
    ssize_t len;

    if (is_ctl (ino)) {
        fuse_reply_err (req, EINVAL);
        return;
    }
    n = node_of (gx, ino);
    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_READLINK,
                    &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if ((len = readlinkat (n->fd, "", buf, sizeof (buf) - 1)) < 0) {
        reply_err (gx, req, e, errno);
        return;
    }
    buf[len] = '\0';
    fuse_reply_readlink (req, buf);
}

/* mknod, mkdir and symlink: make name in parent as the caller, then reply
 * with its entry. */
enum make_kind {
    MAKE_NOD,
    MAKE_DIR,
    MAKE_SYMLINK,
};

static void make_node (fuse_req_t req, fuse_ino_t parent, const char *name,
                       enum make_kind kind, mode_t mode, dev_t rdev,
                       const char *target)
{
    static const enum stats_field fields[] = {
        [MAKE_NOD] = STATS_MKNOD,
        [MAKE_DIR] = STATS_MKDIR,
        [MAKE_SYMLINK] = STATS_SYMLINK,
    };
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *p, *n;
    struct fuse_entry_param ep;
    struct stats_entry *e;
    char path[PATH_MAX];
    int fd = -1, rc, err, pass = 0;

    if (is_ctl (parent) || is_ctl_name (parent, name)) {
        fuse_reply_err (req, is_ctl (parent) ? EPERM : EEXIST);
        return;
    }
    p = node_of (gx, parent);
    err = op_start (gx, child_path (gx, p, name, path, sizeof (path)),
                    fields[kind], &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        if (kind == MAKE_DIR)
            rc = mkdirat (p->fd, name, mode);
        else if (kind == MAKE_SYMLINK)
            rc = symlinkat (target, p->fd, name);
        else
            rc = mknodat (p->fd, name, mode, rdev);
        if (rc == 0)
            fd = openat (p->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if ((err = make_entry (gx, fd, &ep, &n)) < 0) {
        reply_err (gx, req, e, -err);
        return;
    }
    reply_entry (gx, req, &ep, n);
}

static void gfs_mknod (fuse_req_t req, fuse_ino_t parent, const char *name,
                       mode_t mode, dev_t rdev)
{
    make_node (req, parent, name, MAKE_NOD, mode, rdev, NULL);
}

static void gfs_mkdir (fuse_req_t req, fuse_ino_t parent, const char *name,
                       mode_t mode)
{
    make_node (req, parent, name, MAKE_DIR, mode, 0, NULL);
}

static void gfs_symlink (fuse_req_t req, const char *link, fuse_ino_t parent,
                         const char *name)
{
    make_node (req, parent, name, MAKE_SYMLINK, 0, 0, link);
}

static void remove_name (fuse_req_t req, fuse_ino_t parent, const char *name,
                         int flags)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *p;
    struct stats_entry *e;
    char path[PATH_MAX];
    int rc, err, pass = 0;

    if (is_ctl (parent) || is_ctl_name (parent, name)) {
        fuse_reply_err (req, EPERM);
        return;
    }
    p = node_of (gx, parent);
    err = op_start (gx, child_path (gx, p, name, path, sizeof (path)),
                    flags ? STATS_RMDIR : STATS_UNLINK, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        rc = unlinkat (p->fd, name, flags);
        err = rc < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    reply_err (gx, req, e, err);
}

static void gfs_unlink (fuse_req_t req, fuse_ino_t parent, const char *name)
{
    remove_name (req, parent, name, 0);
}

static void gfs_rmdir (fuse_req_t req, fuse_ino_t parent, const char *name)
{
    remove_name (req, parent, name, AT_REMOVEDIR);
}

static void gfs_rename (fuse_req_t req, fuse_ino_t parent, const char *name,
                        fuse_ino_t newparent, const char *newname,
                        unsigned int flags)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *p, *np;
    struct stats_entry *e;
    char path[PATH_MAX];
    int rc, err, pass = 0;

    if (is_ctl (parent) || is_ctl (newparent) || is_ctl_name (parent, name)
        || is_ctl_name (newparent, newname)) {
        fuse_reply_err (req, EPERM);
        return;
    }
    p = node_of (gx, parent);
    np = node_of (gx, newparent);
    err = op_start (gx, child_path (gx, p, name, path, sizeof (path)),
                    STATS_RENAME, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        if (flags)
            rc = renameat2 (p->fd, name, np->fd, newname, flags);
        else
            rc = renameat (p->fd, name, np->fd, newname);
        err = rc < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    reply_err (gx, req, e, err);
}

static void gfs_link (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                      const char *newname)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n, *np, *nn;
    struct fuse_entry_param ep;
    struct stats_entry *e;
    char path[PATH_MAX];
    char proc[64];
    int fd = -1, err, pass = 0;

    if (is_ctl (ino) || is_ctl (newparent)
        || is_ctl_name (newparent, newname)) {
        fuse_reply_err (req, EPERM);
        return;
    }
    n = node_of (gx, ino);
    np = node_of (gx, newparent);
    err = op_start (gx, child_path (gx, np, newname, path, sizeof (path)),
                    STATS_LINK, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    /* linkat (fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which a
     * non-root fsuid lacks; the /proc path does not. */
    fd_path (n->fd, proc, sizeof (proc));
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        if (linkat (AT_FDCWD, proc, np->fd, newname, AT_SYMLINK_FOLLOW) == 0)
            fd = openat (np->fd, newname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if ((err = make_entry (gx, fd, &ep, &nn)) < 0) {
        reply_err (gx, req, e, -err);
        return;
    }
    reply_entry (gx, req, &ep, nn);
}

static void open_reply (struct gfsemu *gx, fuse_req_t req,
                        struct fuse_file_info *fi, struct handle *h)
{
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->keep_cache = 0;     /* every open reads the backing file again */
    fi->direct_io = 0;      /* direct_io breaks shared mmap */
    handle_count (gx, h, fi->flags);
    if (fuse_reply_open (req, fi) == -ENOENT) {
        handle_uncount (gx, h);
        close (h->fd);
        free (h);
    }
}

static void gfs_open (fuse_req_t req, fuse_ino_t ino,
                      struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n;
    struct handle *h;
    struct stats_entry *e;
    char path[PATH_MAX];
    char proc[64];
    int fd = -1, flags, err, pass = 0;

    if (is_ctl (ino)) {
        ctl_open (gx, req, ino, fi);
        return;
    }
    n = node_of (gx, ino);
    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_OPEN, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    /* Reopening the O_PATH descriptor checks access as the caller. */
    fd_path (n->fd, proc, sizeof (proc));
    flags = (fi->flags & ~(O_NOFOLLOW | O_CREAT | O_EXCL | O_NOCTTY))
            | O_CLOEXEC;
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        fd = open (proc, flags);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if (!(h = malloc (sizeof (*h)))) {
        close (fd);
        reply_err (gx, req, e, ENOMEM);
        return;
    }
    h->fd = fd;
    h->st = e;
    open_reply (gx, req, fi, h);
}

static void gfs_create (fuse_req_t req, fuse_ino_t parent, const char *name,
                        mode_t mode, struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *p, *n;
    struct handle *h;
    struct fuse_entry_param ep;
    struct stats_entry *e;
    char path[PATH_MAX];
    char proc[64];
    int fd = -1, pfd = -1, err, pass = 0;

    if (is_ctl (parent) || is_ctl_name (parent, name)) {
        fuse_reply_err (req, is_ctl (parent) ? EPERM : EEXIST);
        return;
    }
    p = node_of (gx, parent);
    err = op_start (gx, child_path (gx, p, name, path, sizeof (path)),
                    STATS_CREATE, &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        fd = openat (p->fd, name, fi->flags | O_CREAT | O_CLOEXEC, mode);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    /* The node: an O_PATH descriptor of exactly the file created. */
    pfd = open (fd_path (fd, proc, sizeof (proc)), O_PATH | O_CLOEXEC);
    if (pfd < 0 || (err = make_entry (gx, pfd, &ep, &n)) < 0) {
        err = pfd < 0 ? errno : -err;
        close (fd);
        reply_err (gx, req, e, err);
        return;
    }
    if (!(h = malloc (sizeof (*h)))) {
        close (fd);
        node_forget (gx, n, 1);
        reply_err (gx, req, e, ENOMEM);
        return;
    }
    h->fd = fd;
    h->st = e;
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->keep_cache = 0;
    fi->direct_io = 0;
    handle_count (gx, h, fi->flags);
    if (fuse_reply_create (req, &ep, fi) == -ENOENT) {
        handle_uncount (gx, h);
        close (h->fd);
        free (h);
        node_forget (gx, n, 1);
    }
}

static void gfs_read (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                      struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct handle *h = (struct handle *)(uintptr_t)fi->fh;
    char *buf;
    size_t got = 0;
    ssize_t n;
    int err, shrt = 0;

    if (is_ctl (ino)) {
        ctl_read (req, size, off, fi);
        return;
    }
    stats_add (gx->stats, h->st, STATS_READ, 1);
    op_delay (gx);
    if ((err = op_fault (gx, entry_path (h->st), STATS_READ, &shrt)) != 0) {
        reply_err (gx, req, h->st, err);
        return;
    }
    if (!(buf = thread_buf (size))) {
        reply_err (gx, req, h->st, ENOMEM);
        return;
    }
    while (got < size) {
        n = pread (h->fd, buf + got, size - got, off + (off_t)got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (got == 0) {
                reply_err (gx, req, h->st, errno);
                return;
            }
            break;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (shrt && got > 1)
        got /= 2; /* the kernel takes it for the end of the file */
    stats_add (gx->stats, h->st, STATS_READ_BYTES, got);
    op_transfer (gx, got);
    fuse_reply_buf (req, buf, got);
}

static void gfs_write_buf (fuse_req_t req, fuse_ino_t ino,
                           struct fuse_bufvec *in, off_t off,
                           struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct handle *h = (struct handle *)(uintptr_t)fi->fh;
    size_t size = fuse_buf_size (in);
    struct fuse_bufvec out = FUSE_BUFVEC_INIT (size);
    ssize_t n;
    int err, shrt = 0;

    if (is_ctl (ino)) {
        ctl_write (gx, req, in, fi);
        return;
    }
    stats_add (gx->stats, h->st, STATS_WRITE, 1);
    op_delay (gx);
    if ((err = op_fault (gx, entry_path (h->st), STATS_WRITE, &shrt)) != 0) {
        reply_err (gx, req, h->st, err);
        return;
    }
    if (shrt && size > 1)
        out.buf[0].size = size /= 2; /* what fuse_buf_copy copies */
    op_transfer (gx, size);
    out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    out.buf[0].fd = h->fd;
    out.buf[0].pos = off;
    if ((n = fuse_buf_copy (&out, in, 0)) < 0) {
        reply_err (gx, req, h->st, (int)-n);
        return;
    }
    stats_add (gx->stats, h->st, STATS_WRITE_BYTES, (uint64_t)n);
    fuse_reply_write (req, (size_t)n);
}

static void gfs_flush (fuse_req_t req, fuse_ino_t ino,
                       struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct handle *h = (struct handle *)(uintptr_t)fi->fh;
    int fd, err;

    if (is_ctl (ino)) {
        ctl_flush (gx, req, fi);
        return;
    }
    stats_add (gx->stats, h->st, STATS_FLUSH, 1);
    if ((err = op_fault (gx, entry_path (h->st), STATS_FLUSH, NULL)) != 0) {
        reply_err (gx, req, h->st, err);
        return;
    }
    /* What close () of the caller's descriptor would report (NFS-style
     * write-back errors). */
    if ((fd = dup (h->fd)) < 0 || close (fd) < 0) {
        reply_err (gx, req, h->st, errno);
        return;
    }
    fuse_reply_err (req, 0);
}

static void gfs_release (fuse_req_t req, fuse_ino_t ino,
                         struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    int err = 0;

    if (is_ctl (ino)) {
        struct ctlhandle *ch = (struct ctlhandle *)(uintptr_t)fi->fh;

        /* Opened for writing and closed unwritten (`: > fault`): no
         * rules, at the release (shortly after the close). */
        if (ch && ch->writer && !ch->written)
            (void) fault_ctl_set (gx->faults, "", NULL, 0);
        if (ch) {
            free (ch->buf);
            free (ch);
        }
    }
    else {
        struct handle *h = (struct handle *)(uintptr_t)fi->fh;

        handle_uncount (gx, h);         /* first: the close is done */
        stats_add (gx->stats, h->st, STATS_RELEASE, 1);
        /* A faulted release still closes (the kernel ignores errors). */
        if ((err = op_fault (gx, entry_path (h->st), STATS_RELEASE, NULL)))
            stats_add (gx->stats, h->st, STATS_ERRORS, 1);
        close (h->fd);
        free (h);
    }
    fuse_reply_err (req, err);
}

static void gfs_fsync (fuse_req_t req, fuse_ino_t ino, int datasync,
                       struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct handle *h = (struct handle *)(uintptr_t)fi->fh;
    int rc, err;

    if (is_ctl (ino)) {
        fuse_reply_err (req, 0);
        return;
    }
    stats_add (gx->stats, h->st, STATS_FSYNC, 1);
    op_delay (gx);
    if ((err = op_fault (gx, entry_path (h->st), STATS_FSYNC, NULL)) != 0) {
        reply_err (gx, req, h->st, err);
        return;
    }
    rc = datasync ? fdatasync (h->fd) : fsync (h->fd);
    reply_err (gx, req, h->st, rc < 0 ? errno : 0);
}

static void gfs_opendir (fuse_req_t req, fuse_ino_t ino,
                         struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n;
    struct dirhandle *d;
    struct stats_entry *e;
    char path[PATH_MAX];
    char proc[64];
    int fd = -1, err, pass = 0;

    if (is_ctl (ino)) {
        if (ino != CTL_DIR) {
            fuse_reply_err (req, ENOTDIR);
            return;
        }
        fi->fh = 0;
        fuse_reply_open (req, fi);
        return;
    }
    n = node_of (gx, ino);
    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_OPENDIR,
                    &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    fd_path (n->fd, proc, sizeof (proc));
    do {
        if ((err = caller_begin (gx, req, pass)) != 0)
            break;
        fd = open (proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        err = fd < 0 ? errno : 0;
        creds_restore ();
    } while (caller_retry (req, err, &pass));
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if (!(d = calloc (1, sizeof (*d))) || !(d->dp = fdopendir (fd))) {
        err = errno;
        close (fd);
        free (d);
        reply_err (gx, req, e, err);
        return;
    }
    d->st = e;
    d->is_root = n == &gx->root;
    fi->fh = (uint64_t)(uintptr_t)d;
    fi->cache_readdir = 0;
    if (fuse_reply_open (req, fi) == -ENOENT) {
        closedir (d->dp);
        free (d);
    }
}

static void gfs_readdir (fuse_req_t req, fuse_ino_t ino, size_t size,
                         off_t off, struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;
    char *buf;
    size_t used = 0;
    int err;

    if (is_ctl (ino)) {
        ctl_readdir (req, size, off);
        return;
    }
    stats_add (gx->stats, d->st, STATS_READDIR, 1);
    op_delay (gx);
    if ((err = op_fault (gx, entry_path (d->st), STATS_READDIR, NULL)) != 0) {
        reply_err (gx, req, d->st, err);
        return;
    }
    if (!(buf = thread_buf (size))) {
        reply_err (gx, req, d->st, ENOMEM);
        return;
    }
    if (off != d->off) {
        seekdir (d->dp, off);
        d->entry = NULL;
        d->off = off;
    }
    for (;;) {
        struct dirent *de;
        struct stat st;
        size_t n;

        if (!d->entry) {
            errno = 0;
            if (!(d->entry = readdir (d->dp))) {
                if (errno && used == 0) {
                    reply_err (gx, req, d->st, errno);
                    return;
                }
                break;
            }
        }
        de = d->entry;
        if (d->is_root && !strcmp (de->d_name, CTL_DIRNAME)) {
            d->off = de->d_off;     /* shadowed by the control directory */
            d->entry = NULL;
            continue;
        }
        memset (&st, 0, sizeof (st));
        st.st_ino = de->d_ino;
        st.st_mode = DTTOIF (de->d_type);
        n = fuse_add_direntry (req, buf + used, size - used, de->d_name, &st,
                               de->d_off);
        if (n > size - used)
            break;      /* keep d->entry for the next request */
        used += n;
        d->off = de->d_off;
        d->entry = NULL;
    }
    fuse_reply_buf (req, buf, used);
}

static void gfs_releasedir (fuse_req_t req, fuse_ino_t ino,
                            struct fuse_file_info *fi)
{
    struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;

    if (!is_ctl (ino) && d) {
        closedir (d->dp);
        free (d);
    }
    fuse_reply_err (req, 0);
}

static void gfs_fsyncdir (fuse_req_t req, fuse_ino_t ino, int datasync,
                          struct fuse_file_info *fi)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct dirhandle *d = (struct dirhandle *)(uintptr_t)fi->fh;
    int rc, err;

    if (is_ctl (ino)) {
        fuse_reply_err (req, 0);
        return;
    }
    stats_add (gx->stats, d->st, STATS_FSYNC, 1);
    op_delay (gx);
    if ((err = op_fault (gx, entry_path (d->st), STATS_FSYNC, NULL)) != 0) {
        reply_err (gx, req, d->st, err);
        return;
    }
    rc = datasync ? fdatasync (dirfd (d->dp)) : fsync (dirfd (d->dp));
    reply_err (gx, req, d->st, rc < 0 ? errno : 0);
}

static void gfs_statfs (fuse_req_t req, fuse_ino_t ino)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    struct node *n = is_ctl (ino) ? &gx->root : node_of (gx, ino);
    struct stats_entry *e;
    struct statvfs sv;
    char path[PATH_MAX];
    int err;

    err = op_start (gx, node_path (gx, n, path, sizeof (path)), STATS_STATFS,
                    &e);
    if (err) {
        reply_err (gx, req, e, err);
        return;
    }
    if (fstatvfs (n->fd, &sv) < 0) {
        reply_err (gx, req, e, errno);
        return;
    }
    fuse_reply_statfs (req, &sv);
}

/* Extended attributes: the POSIX ACLs alone (system.posix_acl_access
 * and _default), the backing file's, so that ACLs work as on a real GFS;
 * others are not supported.  The kernel checked who may set them.  The
 * node's /proc path is followed to the node itself (a symlink has no
 * ACL). */
static bool acl_name (const char *name)
{
    return !strcmp (name, "system.posix_acl_access")
           || !strcmp (name, "system.posix_acl_default");
}

/* The node's path in /proc for ino, or NULL (ENOTSUP: no -o acl, or not
 * a file or directory of the GFS). */
static const char *xattr_path (struct gfsemu *gx, fuse_ino_t ino, char *buf,
                               size_t size)
{
    struct node *n;

    if (!gx->opt.acl || is_ctl (ino) || !(n = node_of (gx, ino))
        || n->type == S_IFLNK)
        return NULL;
    return fd_path (n->fd, buf, size);
}

static void reply_size_or_buf (fuse_req_t req, size_t size, const char *buf,
                               size_t len)
{
    if (size == 0)
        fuse_reply_xattr (req, len);
    else if (len > size)
        fuse_reply_err (req, ERANGE);
    else
        fuse_reply_buf (req, buf, len);
}

static void gfs_getxattr (fuse_req_t req, fuse_ino_t ino, const char *name,
                          size_t size)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    char proc[64], buf[4096];
    const char *p = xattr_path (gx, ino, proc, sizeof (proc));
    ssize_t n;

    if (!p || !acl_name (name))
        fuse_reply_err (req, p ? ENODATA : ENOTSUP);
    else if ((n = getxattr (p, name, buf, sizeof (buf))) < 0)
        fuse_reply_err (req, errno);
    else
        reply_size_or_buf (req, size, buf, (size_t) n);
}

static void gfs_setxattr (fuse_req_t req, fuse_ino_t ino, const char *name,
                          const char *value, size_t size, int flags)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    char proc[64];
    const char *p = xattr_path (gx, ino, proc, sizeof (proc));

    if (!p || !acl_name (name))
        fuse_reply_err (req, ENOTSUP);
    else
        fuse_reply_err (req,
                        setxattr (p, name, value, size, flags) < 0 ? errno : 0);
}

static void gfs_listxattr (fuse_req_t req, fuse_ino_t ino, size_t size)
{
    static const char *const names[] = { "system.posix_acl_access",
                                         "system.posix_acl_default" };
    struct gfsemu *gx = fuse_req_userdata (req);
    char proc[64], out[64];
    const char *p = xattr_path (gx, ino, proc, sizeof (proc));
    size_t len = 0;

    for (size_t i = 0; p && i < 2; i++)
        if (getxattr (p, names[i], NULL, 0) >= 0) {
            memcpy (out + len, names[i], strlen (names[i]) + 1);
            len += strlen (names[i]) + 1;
        }
    reply_size_or_buf (req, size, out, len);
}

static void gfs_removexattr (fuse_req_t req, fuse_ino_t ino, const char *name)
{
    struct gfsemu *gx = fuse_req_userdata (req);
    char proc[64];
    const char *p = xattr_path (gx, ino, proc, sizeof (proc));

    if (!p || !acl_name (name))
        fuse_reply_err (req, p ? ENODATA : ENOTSUP);
    else
        fuse_reply_err (req, removexattr (p, name) < 0 ? errno : 0);
}

static const struct fuse_lowlevel_ops gfs_ops = {
    .init = gfs_init,
    .lookup = gfs_lookup,
    .forget = gfs_forget,
    .forget_multi = gfs_forget_multi,
    .getattr = gfs_getattr,
    .setattr = gfs_setattr,
    .readlink = gfs_readlink,
    .mknod = gfs_mknod,
    .mkdir = gfs_mkdir,
    .symlink = gfs_symlink,
    .unlink = gfs_unlink,
    .rmdir = gfs_rmdir,
    .rename = gfs_rename,
    .link = gfs_link,
    .open = gfs_open,
    .create = gfs_create,
    .read = gfs_read,
    .write_buf = gfs_write_buf,
    .flush = gfs_flush,
    .release = gfs_release,
    .fsync = gfs_fsync,
    .opendir = gfs_opendir,
    .readdir = gfs_readdir,
    .releasedir = gfs_releasedir,
    .fsyncdir = gfs_fsyncdir,
    .statfs = gfs_statfs,
    .getxattr = gfs_getxattr,
    .setxattr = gfs_setxattr,
    .listxattr = gfs_listxattr,
    .removexattr = gfs_removexattr,
};

/*
 * Options and main.
 */

#define OPT(t, m) { t, offsetof (struct options, m), 1 }

enum {
    KEY_FAULT = 1, /* fault=RULE, repeatable */
};

static const struct fuse_opt opt_spec[] = {
    OPT ("latency=%s", latency),
    OPT ("bandwidth=%s", bandwidth),
    OPT ("burst=%s", burst),
    OPT ("timeout=%s", timeout),
    OPT ("entry_timeout=%s", entry_timeout),
    OPT ("attr_timeout=%s", attr_timeout),
    OPT ("negative_timeout=%s", negative_timeout),
    OPT ("root_squash", root_squash),
    OPT ("acl", acl),
    OPT ("squash_uid=%u", squash_uid),
    OPT ("squash_gid=%u", squash_gid),
    OPT ("max_threads=%u", max_threads),
    OPT ("fault_seed=%s", fault_seed),
    FUSE_OPT_KEY ("fault=", KEY_FAULT),
    FUSE_OPT_END
};

static void usage (FILE *f)
{
    fprintf (
        f,
        "Usage: gfsemu BACKING MOUNTPOINT [-f] [-s] [-d] [-o "
        "OPTION[,OPTION...]]\n"
        "Serve BACKING at MOUNTPOINT, counting and throttling every request\n"
        "(run as root; allow_other,default_permissions are always on).\n"
        "\n"
        "gfsemu options:\n"
        "    -o latency=USEC          sleep USEC before every request (0)\n"
        "    -o bandwidth=BYTES       cap reads+writes of all clients at "
        "BYTES/s;\n"
        "                             K, M, G suffixes are powers of 1024 (no "
        "cap)\n"
        "    -o burst=BYTES           token bucket size (bandwidth/100, >= "
        "128K)\n"
        "    -o timeout=SECS          entry, attribute and negative timeouts "
        "(0)\n"
        "    -o entry_timeout=SECS, attr_timeout=SECS, negative_timeout=SECS\n"
        "    -o root_squash           requests of uid 0 act as nobody (65534)\n"
        "    -o acl                   POSIX ACLs, enforced by the kernel\n"
        "    -o squash_uid=N, squash_gid=N   the ids root is squashed to\n"
        "    -o max_threads=N         worker threads (64)\n"
        "    -o fault=PATTERN:OP:ERROR[:WHEN]   inject a fault (repeatable; "
        "rules\n"
        "                             separated by ';' too): PATTERN an "
        "fnmatch glob\n"
        "                             of the path, OP a request or any, ERROR "
        "EIO,\n"
        "                             ENOSPC, EACCES, EDQUOT, EROFS, ..., "
        "short or\n"
        "                             hang, WHEN N, N+ or pP (default every "
        "call)\n"
        "    -o fault_seed=S          seed of the pP rules (0)\n"
        "\n"
        "Counters: cat MOUNTPOINT/.gfsemu/stats; reset: : > "
        "MOUNTPOINT/.gfsemu/reset\n"
        "Faults: cat MOUNTPOINT/.gfsemu/fault; set: echo RULES > .../fault\n"
        "\n");
}

static int opt_proc (void *data, const char *arg, int key,
                     struct fuse_args *outargs)
{
    struct options *o = data;

    if (key == KEY_FAULT) {
        const char *rule = arg + strlen ("fault=");
        size_t old = o->faults ? strlen (o->faults) : 0;
        char *p = realloc (o->faults, old + strlen (rule) + 2);

        if (!p)
            return -1;
        o->faults = p;
        snprintf (p + old, strlen (rule) + 2, "%s%s", old ? "\n" : "", rule);
        return 0;
    }
    if (key == FUSE_OPT_KEY_NONOPT && !o->backing) {
        if (!(o->backing = strdup (arg)))
            return -1;
        return 0;       /* consumed: the mount point is fuse's */
    }
    return 1;
}

static int parse_seconds (const char *s, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod (s, &end);
    if (errno || end == s || *end || !(v >= 0)) {
        errno = EINVAL;
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_options (struct gfsemu *gx)
{
    struct options *o = &gx->opt;
    char msg[256];
    uint64_t v;
    char *end;

    gx->map.root_squash = o->root_squash;
    gx->map.squash_uid = o->squash_uid;
    gx->map.squash_gid = o->squash_gid;
    if (o->timeout) {
        if (parse_seconds (o->timeout, &gx->entry_timeout) < 0)
            goto bad_timeout;
        gx->attr_timeout = gx->negative_timeout = gx->entry_timeout;
    }
    if ((o->entry_timeout
         && parse_seconds (o->entry_timeout, &gx->entry_timeout) < 0)
        || (o->attr_timeout
            && parse_seconds (o->attr_timeout, &gx->attr_timeout) < 0)
        || (o->negative_timeout
            && parse_seconds (o->negative_timeout, &gx->negative_timeout)
                   < 0))
        goto bad_timeout;
    if (o->latency) {
        errno = 0;
        v = strtoull (o->latency, &end, 10);
        if (errno || end == o->latency || *end || v > UINT64_MAX / 1000) {
            tier_log (LOG_ERR, "latency=%s: expected microseconds",
                      o->latency);
            return -1;
        }
        gx->latency_ns = v * 1000;
    }
    if (o->bandwidth && tier_size_parse (o->bandwidth, &gx->bandwidth) < 0) {
        tier_log (LOG_ERR, "bandwidth=%s: expected bytes per second",
                  o->bandwidth);
        return -1;
    }
    gx->burst = gx->bandwidth / 100;
    if (gx->burst < 128 * 1024)
        gx->burst = 128 * 1024;
    if (o->burst && tier_size_parse (o->burst, &gx->burst) < 0) {
        tier_log (LOG_ERR, "burst=%s: expected bytes", o->burst);
        return -1;
    }
    if (!gx->bandwidth)
        gx->burst = 0;
    if (o->fault_seed) {
        errno = 0;
        gx->fault_seed = strtoull (o->fault_seed, &end, 10);
        if (errno || end == o->fault_seed || *end || *o->fault_seed == '-') {
            tier_log (LOG_ERR, "fault_seed=%s: expected a number",
                      o->fault_seed);
            return -1;
        }
    }
    if (!(gx->fault_rules = fault_rules_parse (o->faults, gx->fault_seed, msg,
                                               sizeof (msg)))) {
        tier_log (LOG_ERR, "fault: %s", msg);
        return -1;
    }
    return 0;
bad_timeout:
    tier_log (LOG_ERR, "timeouts are seconds >= 0");
    return -1;
}

/* The fault rules of the options in force.  A hang holds a worker
 * thread: keep two for everything else (with -s none can hang, and hang
 * rules answer EIO at once). */
static int start_faults (struct gfsemu *gx, int singlethread)
{
    unsigned int hang_max = gx->opt.max_threads - 2;

    if (singlethread || gx->opt.max_threads < 3)
        hang_max = 0;
    if (!(gx->faults = fault_ctl_create (gx->fault_rules, gx->fault_seed,
                                         hang_max))) {
        tier_log_error ("startup");
        return -1;
    }
    gx->fault_rules = NULL;
    return 0;
}

static void free_options (struct options *o)
{
    free (o->latency);
    free (o->bandwidth);
    free (o->burst);
    free (o->timeout);
    free (o->entry_timeout);
    free (o->attr_timeout);
    free (o->negative_timeout);
    free (o->faults);
    free (o->fault_seed);
    free (o->backing);
}

/* Open the backing root (before mounting: it may be the mount point). */
static int open_root (struct gfsemu *gx)
{
    char proc[64];
    struct stat st;
    ssize_t len;

    gx->root.fd = open (gx->opt.backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (gx->root.fd < 0 || fstat (gx->root.fd, &st) < 0) {
        tier_log_error ("%s", gx->opt.backing);
        return -1;
    }
    len = readlink (fd_path (gx->root.fd, proc, sizeof (proc)),
                    gx->root_path, sizeof (gx->root_path) - 1);
    if (len < 0) {
        tier_log_error ("readlink %s", proc);
        return -1;
    }
    gx->root_path[len] = '\0';
    gx->root_len = (size_t)len;
    gx->root.dev = st.st_dev;
    gx->root.ino = st.st_ino;
    gx->root.type = S_IFDIR;
    gx->root.nlookup = 1;
    /* In the table too, so that a lookup reaching the root (a bind mount
     * of it inside itself) finds node 1. */
    gx->root.next = gx->nodes[node_hash (gx, st.st_dev, st.st_ino)];
    gx->nodes[node_hash (gx, st.st_dev, st.st_ino)] = &gx->root;
    gx->nnodes = 1;
    return 0;
}

static void raise_nofile (void)
{
    struct rlimit rl;

    /* One descriptor per inode the kernel caches: a tree of 150,000
     * files walked once holds 150,000.  Root may raise the hard limit
     * up to fs.nr_open; else the soft limit goes up to the hard one. */
    struct rlimit big = { 1U << 20, 1U << 20 };

    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < big.rlim_max
        && setrlimit (RLIMIT_NOFILE, &big) == 0)
        return;
    if (getrlimit (RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit (RLIMIT_NOFILE, &rl);
    }
}

static void free_nodes (struct gfsemu *gx)
{
    struct node *n, *next;
    size_t i;

    for (i = 0; i < gx->nbuckets; i++) {
        for (n = gx->nodes[i]; n; n = next) {
            next = n->next;
            if (n != &gx->root) {
                close (n->fd);
                free (n);
            }
        }
    }
    free (gx->nodes);
    if (gx->root.fd >= 0)
        close (gx->root.fd);
}

int main (int argc, char **argv)
{
    struct fuse_args args = FUSE_ARGS_INIT (argc, argv);
    struct fuse_cmdline_opts opts = { 0 };
    struct fuse_loop_config *cfg = NULL;
    struct fuse_session *se = NULL;
    struct gfsemu gx = { 0 };
    int throttle_ready = 0;
    int rc = 1;

    tier_log_init ("gfsemu", TIER_LOG_STDERR, NULL, LOG_INFO);
    gx.opt.squash_uid = CREDS_NOBODY;
    gx.opt.squash_gid = CREDS_NOBODY;
    gx.opt.max_threads = 64;
    gx.root.fd = -1;
    if (fuse_opt_parse (&args, &gx.opt, opt_spec, opt_proc) < 0)
        goto done;
    if (fuse_parse_cmdline (&args, &opts) < 0)
        goto done;
    if (opts.show_help) {
        usage (stdout);
        fuse_cmdline_help ();
        fuse_lowlevel_help ();
        rc = 0;
        goto done;
    }
    if (opts.show_version) {
        printf ("gfsemu %s, libfuse %s\n", PACKAGE_VERSION,
                fuse_pkgversion ());
        rc = 0;
        goto done;
    }
    if (!gx.opt.backing || !opts.mountpoint) {
        usage (stderr);
        goto done;
    }
    if (parse_options (&gx) < 0)
        goto done;
    if (start_faults (&gx, opts.singlethread) < 0)
        goto done;
    throttle_init (&gx.throttle, gx.bandwidth, gx.burst, throttle_now ());
    throttle_ready = 1;
    if (geteuid () != 0) {
        tier_log (LOG_ERR, "must run as root (allow_other, setfsuid)");
        goto done;
    }
    if (fuse_opt_add_arg (&args, "-oallow_other,default_permissions,"
                                 "subtype=" CTL_NAME ",fsname=" CTL_NAME)
        < 0)
        goto done;

    /* Process-wide, before any thread exists: the caller's umask was
     * applied by the kernel already, and threads start with no groups. */
    umask (0);
    if (setgroups (0, NULL) < 0) {
        tier_log_error ("setgroups");
        goto done;
    }
    raise_nofile ();
    pthread_mutex_init (&gx.nodes_lock, NULL);
    gx.nbuckets = 4096;
    if (!(gx.nodes = calloc (gx.nbuckets, sizeof (gx.nodes[0])))
        || !(gx.stats = stats_create ())
        || pthread_key_create (&buf_key, free) != 0) {
        tier_log_error ("startup");
        goto done;
    }
    if (open_root (&gx) < 0)
        goto done;
    gx.start_ns = throttle_now ();

    if (!(se = fuse_session_new (&args, &gfs_ops, sizeof (gfs_ops), &gx)))
        goto done;
    gx.se = se;
    if (fuse_set_signal_handlers (se) < 0)
        goto done;
    if (fuse_session_mount (se, opts.mountpoint) < 0)
        goto signals;
    fuse_daemonize (opts.foreground);
    if (opts.singlethread)
        rc = fuse_session_loop (se);
    else {
        if (!(cfg = fuse_loop_cfg_create ())) {
            fuse_session_unmount (se);
            goto signals;
        }
        fuse_loop_cfg_set_clone_fd (cfg, (unsigned int)opts.clone_fd);
        if (opts.max_idle_threads != UINT_MAX)    /* UINT_MAX: unset */
            fuse_loop_cfg_set_idle_threads (cfg, opts.max_idle_threads);
        fuse_loop_cfg_set_max_threads (cfg, gx.opt.max_threads);
        rc = fuse_session_loop_mt (se, cfg);
        fuse_loop_cfg_destroy (cfg);
    }
    rc = rc != 0;
    fuse_session_unmount (se);
signals:
    fuse_remove_signal_handlers (se);
done:
    if (se)
        fuse_session_destroy (se);
    if (throttle_ready)
        throttle_fini (&gx.throttle);
    stats_destroy (gx.stats);
    fault_ctl_destroy (gx.faults);
    fault_rules_destroy (gx.fault_rules);
    if (gx.nodes)
        free_nodes (&gx);
    free (opts.mountpoint);
    fuse_opt_free_args (&args);
    free_options (&gx.opt);
    tier_log_fini ();
    return rc;
}

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
 * replica's descriptor (O_PATH, SCM_RIGHTS), which the interposer
 * reopens through /proc/self/fd with the program's flags.  A user never
 * opens a replica by name: what a user may read is decided at each
 * request, with the source's descriptor, so a user whose access to the
 * source is revoked gets no replica of it afterwards.  Layout on the BB
 * (shared by the nodes):
 *
 *   BBDir/                      root 0711
 *   BBDir/replicas/             root 0700: only root opens a replica by
 *                               name; a task gets a descriptor
 *   BBDir/replicas/uUID/        root 0700: uid's replicas
 *   BBDir/replicas/uUID/KEY     a replica: root-owned, 0444, immutable
 *   BBDir/replicas/uUID/KEY.lock  its fetch lock (root 0600)
 *   BBDir/replicas/world/       root 0700 (site policies with share=world)
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
 *
 * The modules of the cache are listed in replica.h.  This one owns the
 * RPCs, the checks of a request's descriptor, serving a request (a hit,
 * a wait for a copy in flight, or a new fetch), the replies, the status,
 * the directories on the BB (through lib/trust.h) and start and stop.
 * It calls the other replica modules, policy.c, peer.c (the caller's
 * job) and ctr.c.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/paths.h"
#include "lib/trust.h"
#include "peer.h"
#include "policy.h"
#include "policy_msg.h"
#include "replica.h"

/* ------------------------------------------------------- directories */

/* A directory tier made: root's (lib/trust.h's ROOT_DIR), never a
 * symlink, with mode. */
static int own_dir (const char *path, mode_t mode, tier_error_t *error)
{
    /* made if missing; in directories nobody else may change, each
     * opened without following a symlink (lib/trust.h) */
    const struct tier_trust t = { .kind = TIER_TRUST_ROOT_DIR, .create = mode };
    struct stat st;
    int fd, e;

    if ((fd = tier_trust_open (path, &t, error)) < 0)
        return -1;
    if ((fstat (fd, &st) < 0 || (st.st_mode & 07777) != mode)
        && fchmod (fd, mode) < 0) {
        tier_errprintf (error, "%s: %s", path, strerror (errno));
        goto error;
    }
    close (fd);
    return 0;
error:
    e = errno;
    close (fd);
    errno = e;
    return -1;
}

/* The directory of a scope (uUID, or world: every user's): root 0700,
 * made once per run.  Nobody but root opens a replica by name: the
 * interposer gets a descriptor (replica.open), so a user whose access to
 * a source is revoked cannot open its replica later.  An ACL that an
 * older tier set (user:UID:--x) is removed. */
static int scope_dir (struct replicas *r, const char *scope,
                      tier_error_t *error)
{
    const struct tier_trust t = { .kind = TIER_TRUST_ROOT_DIR };
    char path[PATH_MAX];
    struct stat st;
    int fd, rc;

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
    if ((rc = tier_trust_check (fd, path, &t, error)) == 0) {
        if (fremovexattr (fd, "system.posix_acl_access") < 0 && errno != ENODATA
            && errno != ENOTSUP)
            rc = tier_errprintf (error, "%s: cannot remove its ACL: %s", path,
                                 strerror (errno));
        else if ((fstat (fd, &st) < 0 || (st.st_mode & 07777) != 0700)
                 && fchmod (fd, 0700) < 0)
            rc = tier_errprintf (error, "%s: %s", path, strerror (errno));
    }
    close (fd);
    if (rc < 0)
        return -1;
    if (r->nscopes_ok < REPLICA_SCOPES_MAX)
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

/* ------------------------------------------------------------ replies */

char *replica_reply (struct replicas *r, const char *id, uint64_t size,
                     int revalidate, bool hit)
{
    char file[PATH_MAX];
    json_t *o;
    char *s;

    replica_index_file (r, id, file, sizeof (file));
    o = json_pack ("{s:s s:i s:I s:b}", "replica", file, "revalidate",
                   revalidate, "size", (json_int_t) size, "hit", hit);
    s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    return s;
}

int replica_open_published (struct replicas *r, const char *id, uint64_t size)
{
    char file[PATH_MAX];
    struct stat st;
    int fd;

    replica_index_file (r, id, file, sizeof (file));
    if ((fd = open (file, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return -1;
    if (fstat (fd, &st) < 0 || !S_ISREG (st.st_mode)
        || (uint64_t) st.st_size != size) {
        close (fd);
        return -1;
    }
    return fd;
}

json_t *replica_fallthrough (struct agent *a, const struct store_job *job,
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

void replica_count_hit (struct agent *a, const struct store_job *job,
                        uint64_t size)
{
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_HITS, 1);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, size);
    ctr_add (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_AVOIDED, size);
}

/* ----------------------------------------------------------- requests */

/* An access ACL with entries beyond the mode's three (named users or
 * groups, a mask), or one that cannot be read: it may deny someone.
 * path is a name, or /proc/self/fd/N for a descriptor (O_PATH too). */
static bool has_acl (const char *path, bool follow)
{
    ssize_t n = follow ? getxattr (path, "system.posix_acl_access", NULL, 0)
                       : lgetxattr (path, "system.posix_acl_access", NULL, 0);

    if (n < 0)
        return errno != ENODATA && errno != ENOTSUP;
    return n > 4 + 3 * 8; /* the header and three entries of 8 bytes */
}

/* share = world: only for sources every user may read -- x for owner,
 * group and others on every ancestor, r for all three on the file (a
 * group without it is denied though others may read), and no ACL beyond
 * the mode on any of them (it may deny a user) -- matched with the
 * descriptor's identity.  Anything else stays per user: a world replica
 * is readable by every user who can compute its name.
 *
 * This runs on the loop, and a user may have mounted a file system of
 * their own (FUSE: never answering) over a directory on the way, after
 * opening the file beneath it.  So only the AllowedRoots directory and
 * its ancestors (the site's paths) are looked at by name; below it the
 * path is opened one component at a time (O_PATH), never across a
 * mount point (EXDEV before the mounted file system is asked anything),
 * and each component is checked through its descriptor.  A source below
 * a mount inside the root is not shared.
 */
#define ALL_X (S_IXUSR | S_IXGRP | S_IXOTH)
#define ALL_R (S_IRUSR | S_IRGRP | S_IROTH)
/* The longest AllowedRoots directory path is under, or NULL. */
static const char *allowed_root (struct agent *a, const char *path)
{
    const char *root = NULL;

    for (int i = 0; i < a->conf->allowed_roots_count; i++) {
        const char *r = a->conf->allowed_roots[i];
        if (tier_path_under (path, r) && (!root || strlen (r) > strlen (root)))
            root = r;
    }
    return root;
}

static bool fd_has_acl (int fd)
{
    char p[64];

    (void) snprintf (p, sizeof (p), "/proc/self/fd/%d", fd);
    return has_acl (p, true);
}

static bool world_readable (struct agent *a, const char *path,
                            const struct stat *st)
{
    const char *root = allowed_root (a, path), *rel;
    size_t rootlen = root ? strlen (root) : 0;
    char buf[PATH_MAX];
    bool file = false;
    struct stat s;
    int dfd;

    if (!root || rootlen >= sizeof (buf))
        return false;
    /* the root and its ancestors, by name ("/" itself is not asked) */
    memcpy (buf, root, rootlen + 1);
    for (char *p = buf + 1; p <= buf + rootlen; p++) {
        char c = *p;
        bool ok;

        if (c != '/' && c != '\0')
            continue;
        if (p == buf + 1 && c == '\0')
            break; /* root "/" */
        *p = '\0';
        ok = lstat (buf, &s) == 0 && S_ISDIR (s.st_mode)
             && (s.st_mode & ALL_X) == ALL_X && !has_acl (buf, false);
        *p = c;
        if (!ok)
            return false;
    }
    /* below it, through descriptors, on the root's own mount */
    if ((dfd = open (root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return false;
    for (rel = path + rootlen; *rel == '/'; rel++)
        ;
    while (*rel) {
        const char *end = strchr (rel, '/');
        size_t n = end ? (size_t) (end - rel) : strlen (rel);
        char comp[NAME_MAX + 1];
        int fd;

        if (n == 0 || n > NAME_MAX)
            break;
        memcpy (comp, rel, n);
        comp[n] = '\0';
        fd = tier_path_open_beneath (dfd, comp,
                                     O_PATH | O_NOFOLLOW
                                         | (end ? O_DIRECTORY : 0),
                                     0,
                                     TIER_BENEATH_NO_SYMLINKS
                                         | TIER_BENEATH_NO_XDEV);
        close (dfd);
        dfd = fd;
        if (fd < 0 || fstat (fd, &s) < 0 || fd_has_acl (fd))
            break;
        if (end) {
            if (!S_ISDIR (s.st_mode) || (s.st_mode & ALL_X) != ALL_X)
                break;
            rel = end + 1;
            continue;
        }
        file = S_ISREG (s.st_mode) && (s.st_mode & ALL_R) == ALL_R
               && s.st_dev == st->st_dev && s.st_ino == st->st_ino;
        break;
    }
    if (dfd >= 0)
        close (dfd);
    return file;
}

/* The request's one descriptor: the server let it in only on a mount of
 * the site's (rxfd.c), so it may be stat'ed, read and closed here. */
static int take_fd (struct conn *c, const char *op, tier_error_t *error)
{
    int fd;

    if (c->req_nfds != 1 || c->req_fds[0] < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s needs one descriptor", op);
    }
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
    bool want_fd; /* answer with the replica's descriptor */
    /* serve's */
    int revalidate;
    char scope[24], key[REPLICA_KEY_MAX], id[REPLICA_ID_MAX];
};

/* The replica of rq is published (by this node or another): a hit, or
 * NULL if it is not.  For the interposer the reply carries the replica's
 * descriptor (c->reply_fd). */
static json_t *serve_published (struct agent *a, struct conn *c,
                                struct replica_req *rq)
{
    struct replicas *r = a->replicas;
    uint64_t size = (uint64_t) rq->st.st_size;
    char file[PATH_MAX], *s;
    struct replica *x;
    struct stat st;
    json_t *o;
    int fd = -1;

    replica_index_file (r, rq->id, file, sizeof (file));
    if (rq->want_fd) {
        if ((fd = replica_open_published (r, rq->id, size)) < 0)
            return NULL;
    }
    else if (lstat (file, &st) < 0 || !S_ISREG (st.st_mode)
             || (uint64_t) st.st_size != size)
        return NULL;
    close (rq->fd);
    if (!(x = replica_index_find (r, rq->id))
        && (x = replica_index_add (r, rq->id))) {
        x->path = strdup (rq->path);
        x->uid = rq->uid;
        x->size = size;
        x->fetched = time (NULL);
        x->expires = rq->pol->ttl ? x->fetched + (int64_t) rq->pol->ttl : 0;
    }
    if (x) {
        x->used = time (NULL);
        x->batch = rq->job ? rq->job->batch_id : 0;
        x->opens++;
        x->dirty = true;
    }
    replica_count_hit (a, rq->job, size);
    s = replica_reply (r, rq->id, size, rq->revalidate, true);
    o = s ? json_loads (s, 0, NULL) : NULL;
    free (s);
    if (o && fd >= 0) {
        if (c->reply_fd >= 0)
            close (c->reply_fd);
        c->reply_fd = fd;
    }
    else if (fd >= 0)
        close (fd);
    return o;
}

/* A new fetch for rq (it takes rq->fd), or NULL. */
static struct fetch *fetch_new (const struct replica_req *rq)
{
    struct fetch *f;

    if (!(f = calloc (1, sizeof (*f))) || !(f->path = strdup (rq->path))) {
        free (f);
        return NULL;
    }
    (void) snprintf (f->id, sizeof (f->id), "%s", rq->id);
    (void) snprintf (f->scope, sizeof (f->scope), "%s", rq->scope);
    (void) snprintf (f->key, sizeof (f->key), "%s", rq->key);
    f->uid = rq->uid;
    f->size = (uint64_t) rq->st.st_size;
    f->ttl = rq->pol->ttl;
    f->batch = rq->job ? rq->job->batch_id : 0;
    /* read-only for everyone who can reach it; executables stay so (a
     * bound mirror runs them) */
    f->mode = (rq->st.st_mode & 0111) ? 0555 : 0444;
    f->st = rq->st;
    f->srcfd = rq->fd;
    return f;
}

static struct waiter *waiter_new (struct conn *c, const struct replica_req *rq)
{
    struct waiter *w = calloc (1, sizeof (*w));

    if (!w)
        return NULL;
    w->c = c;
    w->msgid = c->req_id;
    w->revalidate = rq->revalidate;
    w->want_fd = rq->want_fd;
    if (rq->job) {
        w->has_job = true;
        w->job = *rq->job;
    }
    return w;
}

static json_t *out_of_memory (int fd, tier_error_t *error)
{
    close (fd);
    errno = ENOMEM;
    tier_errprintf (error, "out of memory");
    return NULL;
}

/* The fetches of uid queued (not yet running). */
static unsigned queued_of (const struct replicas *r, uid_t uid)
{
    unsigned n = 0;

    for (const struct fetch *f = r->fetches; f; f = f->next)
        n += !f->child && !f->done && f->uid == uid;
    return n;
}

/* Serve a checked request: a hit, a wait for a copy in flight, or a new
 * fetch.  Consumes rq->fd.
 */
static json_t *serve (struct agent *a, struct conn *c, struct replica_req *rq,
                      tier_error_t *error)
{
    struct replicas *r = a->replicas;
    bool world = rq->pol->share == TIER_PSHARE_WORLD
                 && world_readable (a, rq->path, &rq->st);
    char why[256];
    struct replica *x;
    struct fetch *f;
    struct waiter *w;
    json_t *o;

    rq->revalidate = rq->pol->set & TIER_PA_REVALIDATE
                         ? (int) rq->pol->revalidate
                         : TIER_POLICY_REVALIDATE_DEFAULT;
    if (world)
        (void) snprintf (rq->scope, sizeof (rq->scope), "world");
    else
        (void) snprintf (rq->scope, sizeof (rq->scope), "u%u",
                         (unsigned) rq->uid);
    replica_key (&rq->st, rq->key, sizeof (rq->key));
    (void) snprintf (rq->id, sizeof (rq->id), "%s/%s", rq->scope, rq->key);
    if (scope_dir (r, rq->scope, error) < 0) {
        close (rq->fd);
        tier_log (LOG_ERR, "%s", error->text);
        return replica_fallthrough (a, rq->job, "%s", error->text);
    }
    if ((o = serve_published (a, c, rq)))
        return o;
    if ((x = replica_index_find (r, rq->id)))
        replica_index_forget (a, x); /* its file is gone */
    if (!(w = waiter_new (c, rq)))
        return out_of_memory (rq->fd, error);
    if ((f = replica_fetch_find (r, rq->id))) {
        /* a copy is in flight: wait for it (a hit when it lands) */
        close (rq->fd);
        w->next = f->waiters;
        f->waiters = w;
        c->waiting++;
        return RPC_DEFERRED;
    }
    if (queued_of (r, rq->uid) >= a->conf->fetches_per_user) {
        /* each queued fetch holds its source's descriptor: a user
         * asking for ever more (and leaving) must not exhaust the
         * agent's; the user's other fetches still land */
        close (rq->fd);
        free (w);
        (void) snprintf (why, sizeof (why),
                         "%u of uid %u's fetches are queued on node %s "
                         "(FetchesPerUser)",
                         a->conf->fetches_per_user, (unsigned) rq->uid,
                         a->node);
        if (!rq->job) {
            errno = EAGAIN;
            tier_errprintf (error, "%s: try again later", why);
            return NULL;
        }
        tier_log_limited (&r->log_queue, LOG_WARNING,
                          "replica of %s not "
                          "made now: %s (read from the GFS)",
                          rq->path, why);
        return replica_fallthrough (a, rq->job, "%s", why);
    }
    if (replica_evict_make_room (a, rq->uid, (uint64_t) rq->st.st_size, why,
                                 sizeof (why))
        < 0) {
        close (rq->fd);
        free (w);
        tier_log_limited (&r->log_full, LOG_WARNING, "replica of %s not "
                          "made: %s (read from the GFS)", rq->path, why);
        return replica_fallthrough (a, rq->job, "%s", why);
    }
    if (!(f = fetch_new (rq))) {
        free (w);
        return out_of_memory (rq->fd, error);
    }
    replica_fetch_queue (a, f, w);
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
    return allowed_root (a, path) != NULL;
}

/* Opens served from the interposer's own cache since its last report:
 * the client's word, so they count for its own job and batch only
 * (ctr_add_reported), and no open is counted larger than the BB (no
 * replica is).
 */
static void cached_opens (struct agent *a, const struct store_job *job,
                          json_t *req)
{
    json_int_t n = 0, bytes = 0;
    uint64_t max, bound;
    char what[160];

    if (json_unpack (req, "{s?I s?I}", "cached", &n, "cached_bytes",
                     &bytes) < 0 || n <= 0 || bytes < 0
        || n > (1LL << 40) || bytes > (1LL << 50))
        return;
    max = (uint64_t) bytes;
    bound = replica_evict_size_bound (a, what, sizeof (what));
    if (max / (uint64_t) n > bound)
        max = (uint64_t) n * bound; /* < bytes: cannot wrap */
    ctr_add_reported (a, job, TIER_ROLE_BATCH, TIER_CTR_OPS, (uint64_t) n);
    ctr_add_reported (a, job, TIER_ROLE_BATCH, TIER_CTR_HITS, (uint64_t) n);
    ctr_add_reported (a, job, TIER_ROLE_BATCH, TIER_CTR_BYTES_BB, max);
    ctr_add_reported (a, job, TIER_ROLE_BATCH, TIER_CTR_GFS_BYTES_AVOIDED, max);
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
    int fd = take_fd (c, "replica.open", error);

    if (fd < 0)
        return NULL;
    if (get_path (req, path, sizeof (path), error) < 0
        || rpc_caller_job (a, c, &job, &pj, error) < 0) {
        close (fd);
        return NULL;
    }
    cached_opens (a, &job, req);
    ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_OPS, 1);
    ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_GFS_META_OPS, 1);
    max = replica_evict_size_bound (a, what, sizeof (what));
    if (check_source (fd, path, &rq.st, max, what, error) < 0) {
        close (fd);
        if (errno == EFBIG) {
            if (r)
                tier_log_limited (&r->log_big, LOG_WARNING, "replica not "
                                  "made: %s (read from the GFS)",
                                  error->text);
            return replica_fallthrough (a, &job, "%s", error->text);
        }
        ctr_add (a, &job, TIER_ROLE_BATCH, TIER_CTR_FAILURES, 1);
        return NULL;
    }
    if (!r || !r->enabled) {
        close (fd);
        return replica_fallthrough (a, &job,
                                    "no replica cache on node %s: "
                                    "%s",
                                    a->node, r ? r->why : "no BBDir");
    }
    if (!under_allowed (a, path)
        || policy_job_resolve (a, &job, path, &pol) < 0
        || pol.role != TIER_POLICY_BATCH) {
        close (fd);
        return replica_fallthrough (a, &job,
                                    "%s is not in a batch directory "
                                    "of job %u",
                                    path, job.job_id);
    }
    rq.uid = job.uid;
    rq.pol = &pol;
    rq.path = path;
    rq.fd = fd;
    rq.want_fd = true;
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

int replica_caller_policy (struct agent *a, struct conn *c, const char *path,
                           struct store_job *job, bool *in_job,
                           struct tier_policy *pol, tier_error_t *error)
{
    const struct user_pols *up = c->upol;
    struct tier_policy_set *set;
    struct tier_policy_match m;
    struct peer_job pj;
    tier_error_t e;

    memset (pol, 0, sizeof (*pol));
    if ((*in_job = rpc_caller_job (a, c, job, &pj, &e) == 0)) {
        if (policy_job_resolve (a, job, path, pol) < 0)
            pol->role = TIER_POLICY_NONE;
        return 0;
    }
    if (!up || up->kind == POLMSG_ERROR) {
        errno = EIO;
        return tier_errprintf (error,
                               "cannot read the policies of uid %u: "
                               "%s",
                               (unsigned) c->cred.uid,
                               up && up->text ? up->text : "not read");
    }
    if (!(set = policy_user_set (a, c->cred.uid, up->user, up->kind,
                                 up->text))) {
        errno = EIO;
        return tier_errprintf (error, "cannot load the policies of uid %u",
                               (unsigned) c->cred.uid);
    }
    if (tier_policy_resolve (set, path, &m) == 0 && m.policy) {
        *pol = *m.policy;
        pol->dir = pol->comment = pol->source = NULL;
    }
    tier_policy_set_destroy (set);
    return 0;
}

/* replica.prefetch {path} + descriptor: make the replica now (tierctl
 * prefetch), by the policies of the caller's job when it runs in one,
 * else by the site and user policies its next job would follow.
 */
json_t *op_replica_prefetch (struct agent *a, struct conn *c, json_t *req,
                             tier_error_t *error)
{
    struct replicas *r = a->replicas;
    struct store_job job;
    struct tier_policy pol;
    struct replica_req rq;
    char path[PATH_MAX], what[160];
    bool in_job;
    int fd;

    if (c->req_nfds != 1 || c->req_fds[0] < 0) {
        errno = EINVAL;
        tier_errprintf (error, "replica.prefetch needs one descriptor");
        return NULL;
    }
    if (!c->upol) /* first the caller's policies, off the loop */
        return userpol_call (a, c, op_replica_prefetch, req, error);
    if ((fd = take_fd (c, "replica.prefetch", error)) < 0)
        return NULL;
    memset (&rq, 0, sizeof (rq));
    if (get_path (req, path, sizeof (path), error) < 0
        || check_source (fd, path, &rq.st,
                         replica_evict_size_bound (a, what, sizeof (what)),
                         what, error)
               < 0) {
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
    if (replica_caller_policy (a, c, path, &job, &in_job, &pol, error) < 0) {
        close (fd);
        return NULL;
    }
    if (!under_allowed (a, path) || pol.role != TIER_POLICY_BATCH) {
        close (fd);
        errno = EPERM;
        tier_errprintf (error, "%s is not in a batch directory (set one "
                        "with: tierctl set policy DIR batch)", path);
        return NULL;
    }
    rq.job = in_job ? &job : NULL;
    rq.uid = c->cred.uid;
    rq.pol = &pol;
    rq.path = path;
    rq.fd = fd;
    if (rq.job)
        ctr_add (a, rq.job, TIER_ROLE_BATCH, TIER_CTR_GFS_META_OPS, 1);
    return serve (a, c, &rq, error);
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
        for (int i = 0; i < REPLICA_BUCKETS; i++) {
            struct replica *x = r->tab[i], *next;
            for (; x; x = next) {
                next = x->next;
                if (!x->path || !tier_path_under (x->path, path)
                    || !mine (a, c, x))
                    continue;
                files++;
                bytes += (json_int_t) x->size;
                replica_evict_one (a, x, "tierctl evict");
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

    (void) error;
    if (!arr)
        return NULL;
    (void) json_unpack (req, "{s?s}", "path", &under);
    if (r)
        for (int i = 0; i < REPLICA_BUCKETS; i++)
            for (struct replica *x = r->tab[i]; x; x = x->next) {
                json_t *o;
                if (!mine (a, c, x) || (under && (!x->path
                    || !tier_path_under (x->path, under))))
                    continue;
                if ((o = replica_index_json (x)))
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
        if (!f->child && !f->done)
            queued++;
    return json_pack ("{s:b s:s s:s s:I s:I s:I s:I s:I s:i s:i s:I s:I}",
                      "enabled", r->enabled, "why", r->why, "path", r->bb,
                      "files", (json_int_t) r->owned_files, "bytes",
                      (json_int_t) r->owned_bytes, "known",
                      (json_int_t) r->known_files, "budget",
                      (json_int_t) a->conf->bb_capacity, "free",
                      (json_int_t) (r->enabled ? replica_evict_bb_free (r) : 0),
                      "fetching", r->running, "queued", queued, "fetched_bytes",
                      (json_int_t) r->fetched_bytes, "fallthroughs",
                      (json_int_t) r->fallthroughs);
}

/* --------------------------------------------------------- start, stop */

/* The boot id tells a previous boot's locks of this node. */
static void read_boot_id (struct replicas *r)
{
    int fd = open ("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
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

/* BBDir, BBDir/replicas, BBDir/.tmp and (emptied) BBDir/.tmp/NODE; else
 * r->why says why not. */
static int make_dirs (struct agent *a, struct replicas *r)
{
    char path[PATH_MAX];
    tier_error_t e;
    int dfd;

    (void) snprintf (path, sizeof (path), "%.2048s/replicas", r->bb);
    if (own_dir (r->bb, 0711, &e) < 0 || own_dir (path, 0700, &e) < 0) {
        (void) snprintf (r->why, sizeof (r->why),
                         "%s (BBDir must be a "
                         "directory of root's)",
                         e.text);
        return -1;
    }
    (void) snprintf (path, sizeof (path), "%.2048s/.tmp", r->bb);
    if (own_dir (path, 0700, &e) < 0)
        goto error;
    /* copies of this node's previous life are garbage */
    if ((dfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        >= 0) {
        (void) rm_tree_at (dfd, a->node);
        close (dfd);
    }
    (void) snprintf (path, sizeof (path), "%.2048s/.tmp/%.64s", r->bb, a->node);
    if (own_dir (path, 0700, &e) < 0)
        goto error;
    return 0;
error:
    (void) snprintf (r->why, sizeof (r->why), "%s", e.text);
    return -1;
}

int replica_init (struct agent *a)
{
    struct replicas *r = calloc (1, sizeof (*r));

    if (!r)
        return -1;
    a->replicas = r;
    if (!a->conf->bb_dir[0]) {
        (void) snprintf (r->why, sizeof (r->why), "no BBDir is configured");
        return 0;
    }
    if (strlen (a->conf->bb_dir) >= sizeof (r->bb)) {
        (void) snprintf (r->why, sizeof (r->why), "BBDir is too long");
        return 0;
    }
    (void) snprintf (r->bb, sizeof (r->bb), "%s", a->conf->bb_dir);
    read_boot_id (r);
    r->retry = true;
    replica_enable (a);
    return 0;
}

void replica_enable (struct agent *a)
{
    struct replicas *r = a->replicas;
    bool again = r->why[0] != '\0';

    if (make_dirs (a, r) < 0) {
        /* a BB that is full, or not mounted yet: tried again every
         * REPLICA_RETRY_S (replica_tick), logged once */
        if (!again)
            tier_log (LOG_ERR,
                      "replica cache disabled: %s (tried again "
                      "every %d s)",
                      r->why, REPLICA_RETRY_S);
        return;
    }
    r->why[0] = '\0';
    r->retry = false;
    replica_index_load (a);
    r->enabled = true;
    tier_log (LOG_INFO,
              "replica cache in %s%s: %llu replicas of this node, "
              "%llu bytes (budget %llu)",
              r->bb, again ? " (enabled again)" : "",
              (unsigned long long) r->owned_files,
              (unsigned long long) r->owned_bytes,
              (unsigned long long) a->conf->bb_capacity);
}

void replica_fini (struct agent *a)
{
    struct replicas *r = a->replicas;

    if (!r)
        return;
    (void) replica_flush (a);
    replica_fetch_fini (a);
    for (int i = 0; i < REPLICA_BUCKETS; i++)
        while (r->tab[i])
            replica_index_unlink (r, r->tab[i]);
    free (r);
    a->replicas = NULL;
}

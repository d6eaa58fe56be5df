/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage.c - stage-in: copy a job's endpoint inputs to the node's fast tier
 *
 * The plugin asks (job.stage_in, root only) as early as it can: from the
 * prolog (with PrologFlags=Alloc at allocation, on every node), else when
 * the first step registers.  The agent forks a stager per job (root, its
 * own process group, so that scancel can stop it), which prepares
 *
 *     NvdimmDir/JOBID/stage/K/        owned by the user, 0700, inside the
 *                                     root 0700 job directory
 *
 * and forks a copier that drops to the user's credentials for good before
 * it opens any input (a user path is never read with root's rights; a
 * root-squashing GFS works), resolves each input beneath its allowed root
 * and copies it with the copy engine.  The stager writes the progress and
 * the outcome to NamespaceDir/JOBID/stage.status (root-owned, atomically
 * replaced), which the plugin polls before the tasks start and then binds
 * each copy read-only over its GFS path inside the job's namespace.  A
 * snapshot: later changes on the GFS are not seen by the job.
 *
 * An item URL=PATH (s3://, https://, http://) is fetched by the copier
 * too, with the endpoint library (lib/endpoint.h), after it dropped to
 * the user: S3 credentials come from the user's own file in the shared
 * state directory (SharedStateDir/users/USER/credentials, mode 0600),
 * read as the user, never logged; TLS is verified against
 * EndpointCAFile.  The object lands under a temporary name in
 * stage/K/ and is renamed to PATH's last component; the plugin binds it
 * over PATH.  When PATH does not exist the copier, as the user, creates
 * an empty file there (O_EXCL, 0600) as the mount point and the stager
 * records it in NamespaceDir/JOBID/stage.made; at job end the agent, as
 * the user again, removes it if it still is that empty file.  URLs skip
 * the node's stage cache (the library exposes no ETag to key it by).
 *
 * Each GFS input is one of the node's GFS streams (streams.c): the copier
 * checks its inputs at once (O_PATH) and opens each for reading once its
 * stream is granted, through the user's bandwidth (UserBandwidth).
 *
 * A job's items come in parts: those of the first request (the prolog's
 * or the first step's), then what a later one adds (endpoint policies
 * with stage = in, known once the first step registered).  Each part has
 * its own stager and files (stage.status, stage.1.status, ...);
 * NamespaceDir/JOBID/stage.items lists every item in the order of the
 * stage directories.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/endpoint.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "lib/url.h"
#include "agent.h"
#include "streams.h"

#define STAGE_ITEMS_MAX 64
#define GROUPS_MAX 256

struct stage_req {
    uint32_t job_id;
    uid_t uid;
    gid_t gid;
    char user[64];
    gid_t groups[GROUPS_MAX];
    int ngroups;
    int nitems;
    char items[STAGE_ITEMS_MAX][PATH_MAX];  /* the GFS path (URL: target) */
    char urls[STAGE_ITEMS_MAX][PATH_MAX];   /* the URL, or "" */
    int streamfd;               /* the copier's GFS stream channel, or -1 */
    struct tier_copy_limit *limit;      /* the user's bandwidth (shared) */
    int part;                   /* which part of the job's stage-in */
    int base;                   /* the stage directory of items[0] */
};

/* The stager's copier waits for a GFS stream (streams.c). */
static bool stager_queued;
static uint64_t stager_meta;        /* GFS metadata operations of the copy */

/* A job's stage-in comes in parts: the items the first request named
 * (the prolog's, or the first step's), then what a later request adds
 * (the endpoint policies' inputs, known once the first step registered).
 * Part 0 keeps the plain names (stage.status, stage.pid, stage.made);
 * part P is stage.P.status and so on.  The stager (its own process)
 * writes its own part's. */
static int stager_part;

/* stage.status, replaced atomically. */
static void write_status (const struct tier_conf *conf, uint32_t job,
                          const char *state, uint64_t done, uint64_t total,
                          uint64_t files, uint64_t gfs, int64_t ms,
                          const char *err)
{
    json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:s s:b}", "state",
                           state, "done", (json_int_t) done,
                           "total", (json_int_t) total,
                           "files", (json_int_t) files,
                           "gfs", (json_int_t) gfs,
                           "ms", (json_int_t) ms, "error", err ? err : "",
                           "queued", stager_queued);
    if (o)
        (void) json_object_set_new (o, "meta", json_integer ((json_int_t)
                                                              stager_meta));
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;

    char name[48];

    json_decref (o);
    if (!s)
        return;
    tier_ns_part_name (stager_part, TIER_NS_STAGE_STATUS, name, sizeof (name));
    (void) tier_ns_write (conf->namespace_dir, job, name, s);
    free (s);
}

struct progress {
    int fd;
    uint64_t base;
    int64_t last_ms;
};

static void on_progress (uint64_t done, uint64_t total, void *arg)
{
    struct progress *p = arg;
    char line[64];
    int64_t t = tier_now_ms ();
    int n;

    if (t - p->last_ms < 200 && done < total)
        return;
    p->last_ms = t;
    n = snprintf (line, sizeof (line), "P %llu\n",
                  (unsigned long long) (p->base + done));
    if (write (p->fd, line, n) < 0) {
        /* the stager is gone: it will see us exit */
    }
}

/* Bytes of a tree (regular files), as the user. */
static uint64_t tree_bytes (int dirfd, int depth)
{
    struct dirent *de;
    uint64_t sum = 0;
    DIR *d;
    int fd = dup (dirfd);

    if (fd < 0 || depth > 64 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return 0;
    }
    while ((de = readdir (d))) {
        struct stat st;
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        if (fstatat (dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG (st.st_mode))
            sum += st.st_size;
        else if (S_ISDIR (st.st_mode)) {
            int sub = openat (dirfd, de->d_name, O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                sum += tree_bytes (sub, depth + 1);
                close (sub);
            }
        }
    }
    closedir (d);
    return sum;
}

/* The copier: the user's credentials only.  Reports on fd:
 *   T total | P done | Q 1/0 (queued for a GFS stream, or no longer) |
 *   D files bytes gfs | E message | M K DEV INO REF
 */
static int copier_fd = -1;

static void on_queued (void *arg, bool on)
{
    char line[8];
    int n = snprintf (line, sizeof (line), "Q %d\n", on ? 1 : 0);

    if (write (copier_fd, line, (size_t) n) < 0) {
        /* the stager is gone: it will see us exit */
    }
}

/* One file from the GFS: the source was opened O_PATH (no GFS stream
 * yet: nothing is read), so take one of the node's GFS streams, open it
 * for reading (through /proc/self/fd: the very file that was checked),
 * copy it and give the stream back.  expect: the version the copy must
 * be of (a stage cache key), or NULL. */
static int gfs_copy (int srcfd, const struct stat *expect, int dstfd,
                     const char *base, const struct tier_copy_opts *opts,
                     struct tier_copy_result *res, tier_error_t *error)
{
    struct tier_copy_opts o = *opts;
    char proc[64];
    int fd, rc, e;

    o.expect = expect;
    (void) streams_take (on_queued, NULL);
    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", srcfd);
    if ((fd = open (proc, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0) {
        e = errno;
        streams_give ();
        errno = e;
        return tier_errprintf (error, "%s", strerror (e));
    }
    rc = tier_copy_fd (fd, dstfd, base, &o, res, error);
    e = errno;
    close (fd);                         /* before the stream is given back */
    streams_give ();
    errno = e;
    return rc;
}

/* A file input through the node's stage cache: NvdimmDir/.stagecache/UID/
 * keyed by the source's version (inode, size, mtime, ctime).  Tasks of a
 * batch staging the same file on a node copy it once (the others wait on
 * the key's lock, then hard-link the copy into their own stage directory).
 * The copy must be of the version its key names: a source that changed
 * since it was looked at is looked at again (a few times).
 */
static int cached_copy (int cachefd, int srcfd, const struct stat *st0,
                        int dstfd, const char *base,
                        const struct tier_copy_opts *opts,
                        struct tier_copy_result *res, bool *hit,
                        tier_error_t *error)
{
    char key[160], lock[170];
    struct stat st = *st0;
    int lfd, rc;

    *hit = false;
    if (cachefd < 0)
        return gfs_copy (srcfd, NULL, dstfd, base, opts, res, error);
    for (int tries = 0;; tries++) {
        (void) snprintf (key, sizeof (key), "%llx-%llx-%lld.%09ld-%lld.%09ld",
                         (unsigned long long) st.st_ino,
                         (unsigned long long) st.st_size,
                         (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                         (long long) st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        (void) snprintf (lock, sizeof (lock), "%s.lock", key);
        if ((lfd = openat (cachefd, lock, O_RDWR | O_CREAT | O_CLOEXEC
                           | O_NOFOLLOW, 0600)) < 0
            || flock (lfd, LOCK_EX) < 0) {
            if (lfd >= 0)
                close (lfd);
            return gfs_copy (srcfd, NULL, dstfd, base, opts, res, error);
        }
        if (linkat (cachefd, key, dstfd, base, 0) == 0) {
            *hit = true;
            res->files = 1;
            res->bytes = (uint64_t) st.st_size;
            rc = 0;
        }
        else if ((rc = gfs_copy (srcfd, &st, dstfd, base, opts, res,
                                 error)) == 0)
            (void) linkat (dstfd, base, cachefd, key, 0);
        close (lfd);
        if (rc == 0 || errno != ESTALE || tries >= 3
            || fstat (srcfd, &st) < 0)
            return rc;
        memset (res, 0, sizeof (*res));
    }
}


/* One line to the stager; returns -1 (for "return say (...)" on
 * failures). */
static int say (int fd, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static int say (int fd, const char *fmt, ...)
{
    char line[PATH_MAX + 600];
    va_list ap;
    int n;

    va_start (ap, fmt);
    n = vsnprintf (line, sizeof (line), fmt, ap);
    va_end (ap);
    if (n >= (int) sizeof (line)) {
        n = (int) sizeof (line) - 1;
        line[n - 1] = '\n';
    }
    if (n > 0 && write (fd, line, (size_t) n) < 0) {
        /* the stager is gone: it will see us exit */
    }
    return -1;
}

static const char *allowed_root (const struct tier_conf *conf,
                                 const char *path)
{
    for (int i = 0; i < conf->allowed_roots_count; i++)
        if (tier_path_under (path, conf->allowed_roots[i]))
            return conf->allowed_roots[i];
    return NULL;
}

/* rel's directory (beneath rootfd; "" is the root) as an O_PATH
 * descriptor, and its last component in *base. */
static int open_parent (int rootfd, const char *rel, const char **base)
{
    const char *slash = strrchr (rel, '/');
    char parent[PATH_MAX];

    if (!slash) {
        *base = rel;
        parent[0] = '\0';
    }
    else {
        *base = slash + 1;
        (void) snprintf (parent, sizeof (parent), "%.*s",
                         (int) (slash - rel), rel);
    }
    return tier_path_open_beneath (rootfd, parent, O_PATH | O_DIRECTORY, 0,
                                   0);
}

static const char *open_error (int e)
{
    return e == EXDEV || e == ELOOP ? "a symlink or '..' leads out of its "
                                      "root"
                                    : strerror (e);
}

/* Which jobs show a URL at a mount point file tier made: each holds a
 * hard link to it in the user's SharedStateDir/users/USER/stage-refs/,
 * named JOBID-NODE-K, so the file's link count says whether another job
 * (on any node) still uses it.  The link is made from the descriptor
 * (/proc/self/fd), so it is the file that was checked.  ref is "" when
 * there can be none (no such directory, or another file system).
 */
static void add_ref (const struct tier_conf *conf, const struct stage_req *r,
                     int k, int refsfd, int filefd, const struct stat *st,
                     char *ref, size_t size)
{
    char proc[64];
    struct stat rst;

    ref[0] = '\0';
    if (refsfd < 0)
        return;
    (void) snprintf (ref, size, "%u-%s-%d", r->job_id, conf->node, k);
    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", filefd);
    (void) unlinkat (refsfd, ref, 0);           /* a requeued job's */
    if (linkat (AT_FDCWD, proc, refsfd, ref, AT_SYMLINK_FOLLOW) < 0) {
        ref[0] = '\0';
        return;
    }
    if (fstatat (refsfd, ref, &rst, AT_SYMLINK_NOFOLLOW) < 0
        || rst.st_ino != st->st_ino || rst.st_dev != st->st_dev) {
        (void) unlinkat (refsfd, ref, 0);
        ref[0] = '\0';
    }
}

/* Is st (empty, linked elsewhere too) a mount point file that tier made
 * for another job: does a reference in stage-refs link to it? */
static bool is_mount_file (int refsfd, const struct stat *st)
{
    struct dirent *de;
    bool found = false;
    DIR *d;
    int dfd;

    if (refsfd < 0 || st->st_size != 0 || st->st_nlink < 2
        || (dfd = dup (refsfd)) < 0)
        return false;
    if (!(d = fdopendir (dfd))) {
        close (dfd);
        return false;
    }
    while (!found && (de = readdir (d))) {
        struct stat rst;
        if (de->d_name[0] == '.')
            continue;
        found = fstatat (refsfd, de->d_name, &rst, AT_SYMLINK_NOFOLLOW) == 0
                && rst.st_ino == st->st_ino && rst.st_dev == st->st_dev;
    }
    closedir (d);
    return found;
}

/* The target PATH of item k (URL=PATH), as the user, beneath its allowed
 * root.  A regular file there (one the user owns or may write: the job
 * will see the object in its place) is bound over.  Where there is none,
 * an empty file is made as the mount point; it, and one another job of
 * the user made (is_mount_file), is reported ("M K DEV INO REF"), so that
 * the agent removes it at job end once no job uses it.  *mode: the
 * permission bits of the copy (the existing file's, else 0644).  Returns
 * 0, or -1 after an "E" line.
 */
static int url_target (const struct tier_conf *conf,
                       const struct stage_req *r, int k, int refsfd, int fd,
                       mode_t *mode)
{
    const char *p = r->items[k], *root, *rel, *base;
    char shown[256], ref[128];
    struct stat st;
    bool mount_file = false;
    int rootfd, tfd, pfd, nfd, e;

    tier_url_shown (r->urls[k], shown, sizeof (shown));
    if (!(root = allowed_root (conf, p)))
        return say (fd, "E %s: outside the directories tier may act on "
                    "(AllowedRoots)\n", p);
    rel = tier_path_strip (p, root);
    if (!*rel)
        return say (fd, "E %s: an allowed root cannot show %s\n", p, shown);
    if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return say (fd, "E %s: %s\n", root, strerror (errno));
    for (int tries = 0;; tries++) {
        if ((tfd = tier_path_open_beneath (rootfd, rel, O_PATH, 0, 0)) >= 0) {
            close (rootfd);
            e = fstat (tfd, &st) < 0 ? errno : 0;
            if (!e && S_ISREG (st.st_mode) && st.st_uid != r->uid
                && syscall (SYS_faccessat2, tfd, "", W_OK,
                            AT_EMPTY_PATH | AT_EACCESS) < 0)
                e = errno;
            if (!e && S_ISREG (st.st_mode)
                && (mount_file = is_mount_file (refsfd, &st))) {
                add_ref (conf, r, k, refsfd, tfd, &st, ref, sizeof (ref));
                if (ref[0])
                    (void) say (fd, "M %d %llu %llu %s\n", k,
                                (unsigned long long) st.st_dev,
                                (unsigned long long) st.st_ino, ref);
            }
            close (tfd);
            if (e == EACCES || e == EPERM || e == EROFS)
                return say (fd, "E %s: you neither own nor may write this "
                            "file, so %s cannot be shown in its place\n", p,
                            shown);
            if (e)
                return say (fd, "E %s: %s\n", p, strerror (e));
            if (!S_ISREG (st.st_mode))
                return say (fd, "E %s: not a regular file (%s is fetched "
                            "as one file)\n", p, shown);
            *mode = mount_file ? 0644 : st.st_mode & 0777;
            return 0;
        }
        if (errno != ENOENT || tries > 0)
            break;
        /* none: an empty file as the mount point, in an existing
         * directory the user may write */
        if ((pfd = open_parent (rootfd, rel, &base)) < 0) {
            e = errno;
            close (rootfd);
            if (e == ENOENT)
                return say (fd, "E %s: its directory does not exist (it "
                            "must, to show %s there)\n", p, shown);
            return say (fd, "E %s: %s\n", p, open_error (e));
        }
        nfd = openat (pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                      | O_NOCTTY | O_CLOEXEC, 0600);
        e = errno;
        if (nfd >= 0 && fstat (nfd, &st) == 0) {
            add_ref (conf, r, k, refsfd, nfd, &st, ref, sizeof (ref));
            close (nfd);
            close (pfd);
            close (rootfd);
            (void) say (fd, "M %d %llu %llu %s\n", k,
                        (unsigned long long) st.st_dev,
                        (unsigned long long) st.st_ino, ref[0] ? ref : "-");
            *mode = 0644;
            return 0;
        }
        if (nfd >= 0) {
            e = errno;
            (void) unlinkat (pfd, base, 0);
            close (nfd);
        }
        close (pfd);
        if (e != EEXIST) {
            close (rootfd);
            return say (fd, "E %s: cannot create an empty file there to "
                        "show %s: %s\n", p, shown, strerror (e));
        }
        /* made meanwhile (another job, or node, of the user): look again */
    }
    e = errno;
    close (rootfd);
    return say (fd, "E %s: %s\n", p, open_error (e));
}

/* S3 credentials, read as the user from SharedStateDir/users/USER/
 * credentials: the profile named like the bucket, else [default].
 * NULL after an "E" line. */
static struct tier_creds *url_creds (const struct tier_conf *conf,
                                     const struct stage_req *r,
                                     const struct tier_url *u, int fd)
{
    char path[PATH_MAX];
    struct tier_creds *c;
    struct stat st;
    tier_error_t e;

    if (!conf->shared_state_dir[0]) {
        (void) say (fd, "E %s: no S3 credentials: SharedStateDir is not "
                    "set in tier.conf\n", u->display);
        return NULL;
    }
    if (tier_creds_path (conf->shared_state_dir, r->user, path,
                         sizeof (path)) < 0) {
        (void) say (fd, "E %s: no S3 credentials: %s\n", u->display,
                    strerror (errno));
        return NULL;
    }
    if (lstat (path, &st) < 0) {
        (void) say (fd, "E %s: no S3 credentials: %s: %s (see "
                    "doc/staging.md)\n", u->display, path, strerror (errno));
        return NULL;
    }
    if ((c = tier_creds_load (path, u->bucket, r->uid, &e)))
        return c;
    if (errno == ENOENT && (c = tier_creds_load (path, "default", r->uid,
                                                 &e)))
        return c;
    if (errno == ENOENT)
        (void) say (fd, "E %s: %s: no [%s] or [default] profile\n",
                    u->display, path, u->bucket);
    else
        (void) say (fd, "E %s: %s\n", u->display, e.text);
    return NULL;
}

struct url_progress {
    struct progress *prog;
    uint64_t *total;
    bool counted;
};

/* The object's size joins the total once the server has said it. */
static void on_url_progress (uint64_t done, uint64_t total, void *arg)
{
    struct url_progress *u = arg;

    if (total && !u->counted) {
        u->counted = true;
        *u->total += total;
        (void) say (u->prog->fd, "T %llu\n", (unsigned long long) *u->total);
    }
    on_progress (done, total, u->prog);
}

/* GET the object into dstfd/name: a temporary first, then renamed.
 * *bytes: the object's size.  -1 with the library's message (it names
 * the URL, without secrets). */
static int url_fetch (const struct tier_conf *conf, const struct tier_url *u,
                      const struct tier_creds *creds, int dstfd,
                      const char *name, mode_t mode, struct progress *prog,
                      uint64_t *total, uint64_t *bytes, tier_error_t *error)
{
    static const char tmp[] = ".tier-fetch.part";
    struct url_progress up = { .prog = prog, .total = total };
    struct tier_endpoint_opts opts = {
        .creds = creds,
        .ca_file = conf->endpoint_ca_file[0] ? conf->endpoint_ca_file : NULL,
        .progress = on_url_progress, .progress_arg = &up,
    };
    struct tier_endpoint_result res;
    struct tier_endpoint *ep;
    int fd, rc = -1;

    if (!(ep = tier_endpoint_create (u, &opts, error)))
        return -1;
    if ((fd = openat (dstfd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW
                      | O_CLOEXEC, 0600)) < 0) {
        tier_errprintf (error, "%s: %s", u->display, strerror (errno));
        goto out;
    }
    if (tier_endpoint_get (ep, fd, 0, &res, error) < 0)
        goto out;
    if (fchmod (fd, mode) < 0 || renameat (dstfd, tmp, dstfd, name) < 0) {
        tier_errprintf (error, "%s: %s", u->display, strerror (errno));
        goto out;
    }
    *bytes = res.size;
    rc = 0;
out:
    if (fd >= 0) {
        close (fd);
        if (rc < 0)
            (void) unlinkat (dstfd, tmp, 0);
    }
    tier_endpoint_destroy (ep);
    return rc;
}

static void copier (const struct tier_conf *conf, const struct stage_req *r,
                    const int *dstfds, int cachefd, int userfd, int fd)
{
    int srcfds[STAGE_ITEMS_MAX];
    struct stat sts[STAGE_ITEMS_MAX];
    struct tier_url *urls[STAGE_ITEMS_MAX] = { 0 };
    struct tier_creds *creds[STAGE_ITEMS_MAX] = { 0 };
    mode_t modes[STAGE_ITEMS_MAX];
    uint64_t total = 0, files = 0, bytes = 0, gfs = 0, meta = 0;
    struct progress prog = { .fd = fd };
    bool any_url = false;
    char line[PATH_MAX + 128];
    int n, refsfd = -1;

    if (setgroups ((size_t) r->ngroups, r->groups) < 0
        || setresgid (r->gid, r->gid, r->gid) < 0
        || setresuid (r->uid, r->uid, r->uid) < 0) {
        n = snprintf (line, sizeof (line), "E cannot take uid %u\n",
                      (unsigned) r->uid);
        (void) write (fd, line, n);
        _exit (1);
    }
    (void) signal (SIGPIPE, SIG_IGN);
    copier_fd = fd;
    streams_worker_init (r->streamfd, r->limit);
    if (userfd >= 0) {
        /* the user's references to mount point files (add_ref) */
        (void) mkdirat (userfd, "stage-refs", 0700);
        refsfd = openat (userfd, "stage-refs", O_RDONLY | O_DIRECTORY
                         | O_NOFOLLOW | O_CLOEXEC);
        close (userfd);
    }
    for (int k = 0; k < r->nitems; k++) {
        const char *p = r->items[k], *root = NULL, *rel;
        int rootfd;

        srcfds[k] = -1;
        if (r->urls[k][0]) {
            /* URL=PATH: where it goes (checked and, if need be, made
             * before anything is fetched), and S3's credentials */
            tier_error_t e;

            any_url = true;
            if (!(urls[k] = tier_url_parse_input (r->urls[k], &e))) {
                (void) say (fd, "E %s\n", e.text);
                _exit (1);
            }
            if (url_target (conf, r, k, refsfd, fd, &modes[k]) < 0)
                _exit (1);
            if (urls[k]->scheme == TIER_URL_S3
                && !(creds[k] = url_creds (conf, r, urls[k], fd)))
                _exit (1);
            continue;
        }
        root = allowed_root (conf, p);
        if (!root) {
            n = snprintf (line, sizeof (line), "E %s: outside the "
                          "directories tier may act on (AllowedRoots)\n", p);
            (void) write (fd, line, n);
            _exit (1);
        }
        rel = tier_path_strip (p, root);
        /* O_PATH: checked now (a missing or unreadable input fails the
         * job at once), read only once a GFS stream is granted */
        if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
            srcfds[k] = tier_path_open_beneath (rootfd, rel, O_PATH, 0, 0);
            close (rootfd);
        }
        if (srcfds[k] < 0 || fstat (srcfds[k], &sts[k]) < 0) {
            n = snprintf (line, sizeof (line), "E %s: %s\n", p,
                          open_error (errno));
            (void) write (fd, line, n);
            _exit (1);
        }
        if (S_ISREG (sts[k].st_mode)
            && syscall (SYS_faccessat2, srcfds[k], "", R_OK,
                        AT_EMPTY_PATH | AT_EACCESS) < 0) {
            (void) say (fd, "E %s: %s\n", p, strerror (errno));
            _exit (1);
        }
        if (S_ISDIR (sts[k].st_mode)) {
            /* a tree is listed now (metadata only) */
            int dfd = openat (srcfds[k], ".", O_RDONLY | O_DIRECTORY
                              | O_CLOEXEC);
            if (dfd < 0) {
                (void) say (fd, "E %s: %s\n", p, strerror (errno));
                _exit (1);
            }
            close (srcfds[k]);
            srcfds[k] = dfd;
        }
        if (S_ISREG (sts[k].st_mode))
            total += sts[k].st_size;
        else if (S_ISDIR (sts[k].st_mode))
            total += tree_bytes (srcfds[k], 0);
        else {
            n = snprintf (line, sizeof (line), "E %s: not a file or a "
                          "directory\n", p);
            (void) write (fd, line, n);
            _exit (1);
        }
    }
    if (any_url) {
        /* curl_global_init: this process is single-threaded (forked) */
        tier_error_t e;
        if (tier_endpoint_init (&e) < 0) {
            (void) say (fd, "E %s\n", e.text);
            _exit (1);
        }
    }
    n = snprintf (line, sizeof (line), "T %llu\n", (unsigned long long) total);
    (void) write (fd, line, n);
    for (int k = 0; k < r->nitems; k++) {
        struct tier_copy_opts opts = {
            .flags = TIER_COPY_NOSYNC | TIER_COPY_NOREPLACE,
            .progress = on_progress, .progress_arg = &prog,
            /* one GFS stream is one reader (and the user's bandwidth) */
            .threads = 1,
            .limit = streams_worker_limit (),
        };
        struct tier_copy_result res;
        tier_error_t error;
        const char *base = strrchr (r->items[k], '/') + 1;
        bool hit = false;
        int rc;

        memset (&res, 0, sizeof (res));
        prog.base = bytes;
        if (urls[k]) {
            /* an object: not from the GFS, and not through the stage
             * cache (there is no version to key it by) */
            uint64_t size = 0;

            rc = url_fetch (conf, urls[k], creds[k], dstfds[k], base,
                            modes[k], &prog, &total, &size, &error);
            tier_creds_destroy (creds[k]);
            creds[k] = NULL;
            if (rc < 0) {
                (void) say (fd, "E %s\n", error.text);
                _exit (1);
            }
            files++;
            bytes += size;
            continue;
        }
        if (S_ISREG (sts[k].st_mode))
            rc = cached_copy (cachefd, srcfds[k], &sts[k], dstfds[k], base,
                              &opts, &res, &hit, &error);
        else {
            (void) streams_take (on_queued, NULL);
            rc = tier_copy_tree (srcfds[k], dstfds[k], &opts, &res, &error);
            streams_give ();
        }
        if (rc < 0) {
            n = snprintf (line, sizeof (line), "E %s: %s\n", r->items[k],
                          error.text);
            (void) write (fd, line, n);
            _exit (1);
        }
        files += res.files;
        bytes += res.bytes + res.hole_bytes;
        if (!hit)
            gfs += res.bytes + res.hole_bytes;
        /* on the GFS: a file's open (a cached copy too: the source is
         * opened to know its version); a tree's opens and directory
         * reads, one per entry */
        meta += S_ISREG (sts[k].st_mode) ? 1
                : res.files + res.dirs + res.symlinks;
    }
    n = snprintf (line, sizeof (line), "D %llu %llu %llu %llu\n",
                  (unsigned long long) files, (unsigned long long) bytes,
                  (unsigned long long) gfs, (unsigned long long) meta);
    (void) write (fd, line, n);
    _exit (0);
}

/* "K DEV INO REF": item K's path is an empty file tier made as its mount
 * point (for this job, or for another that still holds a reference REF,
 * "-" for none).  Kept in NamespaceDir/JOBID/stage.made (root's) for the
 * agent to remove at job end. */
static void record_made (const struct tier_conf *conf,
                         const struct stage_req *r, json_t *made,
                         const char *line)
{
    unsigned long long dev, ino;
    char ref[128], name[48], *text;
    int k;

    if (!made || sscanf (line, "%d %llu %llu %127s", &k, &dev, &ino, ref) != 4
        || k < 0 || k >= r->nitems || strchr (ref, '/'))
        return;
    if (json_array_append_new (made, json_pack ("{s:s s:I s:I s:s}", "path",
                                                r->items[k], "dev",
                                                (json_int_t) dev, "ino",
                                                (json_int_t) ino, "ref",
                                                strcmp (ref, "-") ? ref
                                                                  : "")) < 0
        || !(text = json_dumps (made, JSON_COMPACT)))
        return;
    tier_ns_part_name (r->part, TIER_NS_STAGE_MADE, name, sizeof (name));
    (void) tier_ns_write (conf->namespace_dir, r->job_id, name, text);
    free (text);
}

/* The stager: root, its own process group. */
static void stager (const struct tier_conf *conf, struct stage_req *r)
{
    int dstfds[STAGE_ITEMS_MAX], p[2], rootfd, jobfd, stfd, cachefd, userfd;
    char name[32], buf[8192], err[PATH_MAX + 128] = "";
    uint64_t total = 0, done = 0, files = 0, gfs = 0;
    json_t *made = json_array ();
    size_t got = 0;
    int64_t t0 = tier_now_ms ();
    bool ok = false;
    tier_error_t error;
    pid_t pid;
    int status;

    (void) setpgid (0, 0);
    stager_part = r->part;
    write_status (conf, r->job_id, "copying", 0, 0, 0, 0, 0, NULL);
    if ((rootfd = tier_root_open (conf->nvdimm_dir, &error)) < 0) {
        tier_log (LOG_ERR, "job %u: stage-in: %s", r->job_id, error.text);
        write_status (conf, r->job_id, "failed", 0, 0, 0, 0, 0,
                      "the node's NVDIMM tier is not available");
        _exit (1);
    }
    (void) snprintf (name, sizeof (name), "%u", r->job_id);
    (void) mkdirat (rootfd, name, 0700);
    jobfd = openat (rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                    | O_CLOEXEC);
    (void) mkdirat (jobfd, "stage", 0700);
    stfd = openat (jobfd, "stage", O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                   | O_CLOEXEC);
    for (int k = 0; k < r->nitems; k++) {
        (void) snprintf (name, sizeof (name), "%d", r->base + k);
        (void) mkdirat (stfd, name, 0700);
        if ((dstfds[k] = openat (stfd, name, O_RDONLY | O_DIRECTORY
                                 | O_NOFOLLOW | O_CLOEXEC)) < 0
            || fchown (dstfds[k], r->uid, r->gid) < 0) {
            write_status (conf, r->job_id, "failed", 0, 0, 0, 0, 0,
                          "cannot prepare the stage directory");
            _exit (1);
        }
    }
    {
        /* the node's stage cache for this user */
        char uidname[32];
        int cfd;
        (void) mkdirat (rootfd, ".stagecache", 0700);
        cachefd = -1;
        if ((cfd = openat (rootfd, ".stagecache", O_RDONLY | O_DIRECTORY
                           | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
            struct stat cst;
            (void) snprintf (uidname, sizeof (uidname), "%u",
                             (unsigned) r->uid);
            if (mkdirat (cfd, uidname, 0700) == 0)
                (void) fchownat (cfd, uidname, r->uid, r->gid,
                                 AT_SYMLINK_NOFOLLOW);
            cachefd = openat (cfd, uidname, O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC);
            if (cachefd >= 0 && (fstat (cachefd, &cst) < 0
                                 || cst.st_uid != r->uid)) {
                close (cachefd);
                cachefd = -1;
            }
            close (cfd);
        }
    }
    /* URL inputs: the user's directory in the shared state, for the
     * references to mount point files */
    userfd = -1;
    for (int k = 0; k < r->nitems && userfd < 0; k++) {
        int sfd;
        if (!r->urls[k][0] || !conf->shared_state_dir[0])
            continue;
        if ((sfd = tier_state_open_root (conf->shared_state_dir,
                                         &error)) >= 0) {
            userfd = tier_state_user_dir (sfd, r->user, r->uid, r->gid,
                                          &error);
            close (sfd);
        }
        if (userfd < 0)
            tier_log (LOG_WARNING, "job %u: stage-in: %s", r->job_id,
                      error.text);
        break;
    }
    if (pipe2 (p, O_CLOEXEC) < 0 || (pid = fork ()) < 0) {
        write_status (conf, r->job_id, "failed", 0, 0, 0, 0, 0, "fork failed");
        _exit (1);
    }
    if (pid == 0) {
        close (p[0]);
        close (rootfd);
        copier (conf, r, dstfds, cachefd, userfd, p[1]);
    }
    if (r->streamfd >= 0)
        close (r->streamfd);            /* the copier's alone */
    if (userfd >= 0)
        close (userfd);
    close (p[1]);
    for (;;) {
        ssize_t n = read (p[0], buf + got, sizeof (buf) - 1 - got);
        char *nl;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
        buf[got] = '\0';
        while ((nl = strchr (buf, '\n'))) {
            *nl = '\0';
            if (buf[0] == 'T')
                total = strtoull (buf + 2, NULL, 10);
            else if (buf[0] == 'P')
                done = strtoull (buf + 2, NULL, 10);
            else if (buf[0] == 'D') {
                char *end;
                files = strtoull (buf + 2, &end, 10);
                done = strtoull (end, &end, 10);
                gfs = strtoull (end, &end, 10);
                stager_meta = strtoull (end, NULL, 10);
                ok = true;
            }
            else if (buf[0] == 'E')
                (void) snprintf (err, sizeof (err), "%.4000s", buf + 2);
            else if (buf[0] == 'M')
                record_made (conf, r, made, buf + 2);
            else if (buf[0] == 'Q')
                stager_queued = buf[2] == '1';
            if (buf[0] != 'D' && buf[0] != 'E')
                write_status (conf, r->job_id, "copying", done, total, files,
                              gfs, tier_now_ms () - t0, NULL);
            got -= (nl + 1 - buf);
            memmove (buf, nl + 1, got + 1);
        }
    }
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    ok = ok && WIFEXITED (status) && WEXITSTATUS (status) == 0;
    json_decref (made);
    if (!ok && !err[0])
        (void) snprintf (err, sizeof (err), "the copy was interrupted");
    write_status (conf, r->job_id, ok ? "done" : "failed", done, total, files,
                  gfs, tier_now_ms () - t0, ok ? NULL : err);
    _exit (ok ? 0 : 1);
}

/* NamespaceDir/JOBID/stage.items: {"items": [...], "parts": N}, every
 * item of the job's stage-in in the order of its stage directories
 * (stage/K/ holds item K), and how many parts started. */
static json_t *plan_load (const struct tier_conf *conf, uint32_t job)
{
    static char buf[STAGE_ITEMS_MAX * (2 * PATH_MAX + 8) + 64];
    json_error_t jerr;
    json_t *o;

    if (tier_ns_read (conf->namespace_dir, job, TIER_NS_STAGE_ITEMS, buf,
                      sizeof (buf)) < 0
        || !(o = json_loads (buf, 0, &jerr)))
        return NULL;
    if (!json_is_array (json_object_get (o, "items"))
        || !json_is_integer (json_object_get (o, "parts"))) {
        json_decref (o);
        return NULL;
    }
    return o;
}

/* Which of the request's items (parsed into r, in the order of the
 * request's array items) are staged already: the reply's index (the
 * stage directory of each); r keeps only the new ones, which go to
 * directories after the known ones (r->base) as part r->part. */
static json_t *stage_plan (const struct tier_conf *conf,
                           struct stage_req *r, json_t *items,
                           tier_error_t *error)
{
    json_t *plan = plan_load (conf, r->job_id), *known, *index;
    size_t nknown, i;
    int n = 0, fresh = 0;
    char buf[64], name[TIER_NS_NAME_MAX];
    bool legacy;

    known = plan ? json_object_get (plan, "items") : NULL;
    nknown = known ? json_array_size (known) : 0;
    r->part = plan ? (int) json_integer_value (json_object_get (plan,
                                                                "parts"))
                   : 0;
    /* a stage-in without a plan: an older agent's, items unknown (as
     * before: once per job, the items in request order) */
    tier_ns_part_name (0, TIER_NS_STAGE_STATUS, name, sizeof (name));
    legacy = !plan && tier_ns_read (conf->namespace_dir, r->job_id, name,
                                    buf, sizeof (buf)) == 0;
    r->base = (int) nknown;
    if (!(index = json_array ())) {
        json_decref (plan);
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    for (i = 0; i < json_array_size (items); i++) {
        const char *s = json_string_value (json_array_get (items, i));
        json_int_t k = legacy ? (json_int_t) i : -1;
        size_t j;
        json_t *v;

        json_array_foreach (known, j, v)
            if (json_is_string (v) && !strcmp (json_string_value (v), s))
                k = (json_int_t) j;
        /* the same item twice in one request: one directory */
        for (size_t m = 0; k < 0 && m < i; m++)
            if (!strcmp (json_string_value (json_array_get (items, m)), s))
                k = json_integer_value (json_array_get (index, m));
        if (k < 0) {
            k = (json_int_t) (nknown + (size_t) fresh);
            if (n != (int) i) {
                memmove (r->items[n], r->items[i], PATH_MAX);
                memmove (r->urls[n], r->urls[i], PATH_MAX);
            }
            n++;
            fresh++;
        }
        if (json_array_append_new (index, json_integer (k)) < 0) {
            json_decref (plan);
            json_decref (index);
            errno = ENOMEM;
            tier_errprintf (error, "out of memory");
            return NULL;
        }
    }
    if (nknown + (size_t) fresh > STAGE_ITEMS_MAX) {
        json_decref (plan);
        json_decref (index);
        errno = E2BIG;
        tier_errprintf (error, "a job stages at most %d items",
                        STAGE_ITEMS_MAX);
        return NULL;
    }
    r->nitems = n;
    if (legacy)
        r->part = 1;
    json_decref (plan);
    return index;
}

/* Record the new part before its stager starts. */
static int stage_plan_commit (const struct tier_conf *conf,
                              const struct stage_req *r, json_t *items,
                              json_t *index, tier_error_t *error)
{
    json_t *plan = plan_load (conf, r->job_id), *all;
    char *text;
    size_t i;

    all = plan ? json_incref (json_object_get (plan, "items")) : json_array ();
    json_decref (plan);
    if (!all)
        goto nomem;
    for (i = 0; i < json_array_size (items); i++) {
        json_int_t k = json_integer_value (json_array_get (index, i));
        if ((size_t) k == json_array_size (all)
            && json_array_append (all, json_array_get (items, i)) < 0) {
            json_decref (all);
            goto nomem;
        }
    }
    plan = json_pack ("{s:o s:i}", "items", all, "parts", r->part + 1);
    if (!plan || !(text = json_dumps (plan, JSON_COMPACT))) {
        json_decref (plan);
        goto nomem;
    }
    json_decref (plan);
    (void) tier_ns_write (conf->namespace_dir, r->job_id, TIER_NS_STAGE_ITEMS,
                          text);
    free (text);
    return 0;
nomem:
    errno = ENOMEM;
    return tier_errprintf (error, "out of memory");
}

json_t *op_stage_in (struct agent *a, struct conn *c, json_t *req,
                     tier_error_t *error)
{
    static struct stage_req r;
    json_int_t job_id = 0, uid = -1, gid = -1;
    const char *user = NULL;
    json_t *items = NULL, *it, *index;
    struct passwd *pw;
    char path[PATH_MAX], pidbuf[32];
    size_t i;
    pid_t pid;

    memset (&r, 0, sizeof (r));
    if (json_unpack (req, "{s:I s:I s:I s:s s:o}", "job_id", &job_id, "uid",
                     &uid, "gid", &gid, "user", &user, "items", &items) < 0
        || job_id <= 0 || job_id > 0xfffffff0LL || uid < 0 || gid < 0
        || !json_is_array (items) || json_array_size (items) == 0
        || json_array_size (items) > STAGE_ITEMS_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "job.stage_in needs job_id, uid, gid, user "
                        "and 1..%d items", STAGE_ITEMS_MAX);
        return NULL;
    }
    r.job_id = (uint32_t) job_id;
    r.uid = (uid_t) uid;
    r.gid = (gid_t) gid;
    json_array_foreach (items, i, it) {
        const char *s = json_string_value (it);
        char target[PATH_MAX];

        /* URL=PATH: the URL an input's (one object, no secrets in it),
         * PATH as any other */
        if (s && tier_url_item_is_url (s)) {
            struct tier_url *u;
            tier_error_t e;

            if (tier_url_item_split (s, r.urls[r.nitems], PATH_MAX, target,
                                     sizeof (target)) < 0) {
                errno = EINVAL;
                tier_errprintf (error, "stage-in item %zu is not URL=PATH",
                                i);
                return NULL;
            }
            if (!(u = tier_url_parse_input (r.urls[r.nitems], &e))) {
                errno = EINVAL;
                tier_errprintf (error, "stage-in item %zu: %s", i, e.text);
                return NULL;
            }
            tier_url_destroy (u);
            s = target;
        }
        if (!s || s[0] != '/' || tier_path_has_dotdot (s)
            || tier_path_normalize (s, r.items[r.nitems], PATH_MAX) < 0
            || !strcmp (r.items[r.nitems], "/")) {
            errno = EINVAL;
            tier_errprintf (error, "stage-in item %zu is not an absolute "
                            "path", i);
            return NULL;
        }
        r.nitems++;
    }
    /* once per job and item: a later request (another step, the prolog
     * and then the first step) finds what is staged already; what it
     * adds (the endpoint policies' inputs) is a part of its own */
    if (!(index = stage_plan (a->conf, &r, items, error)))
        return NULL;
    if (r.nitems == 0)
        return json_pack ("{s:I s:b s:o s:i}", "job_id", job_id, "started",
                          0, "index", index, "parts", r.part);
    if (!(pw = getpwuid (r.uid)) || strcmp (pw->pw_name, user)
        || strlen (user) >= sizeof (r.user)) {
        errno = EINVAL;
        tier_errprintf (error, "uid %u is not %s", (unsigned) r.uid, user);
        json_decref (index);
        return NULL;
    }
    (void) snprintf (r.user, sizeof (r.user), "%s", user);
    r.ngroups = GROUPS_MAX;
    if (getgrouplist (pw->pw_name, r.gid, r.groups, &r.ngroups) < 0) {
        errno = E2BIG;
        tier_errprintf (error, "too many groups for %s", user);
        json_decref (index);
        return NULL;
    }
    (void) snprintf (path, sizeof (path), "%s/%u", a->conf->namespace_dir,
                     r.job_id);
    (void) mkdir (path, 0700);
    if (stage_plan_commit (a->conf, &r, items, index, error) < 0) {
        json_decref (index);
        return NULL;
    }
    stager_part = r.part;               /* the agent's own write below */
    write_status (a->conf, r.job_id, "queued", 0, 0, 0, 0, 0, NULL);
    /* its copies take GFS streams and the user's bandwidth (streams.c):
     * the channel and the bucket exist before the stager is forked */
    {
        char what[64];
        (void) snprintf (what, sizeof (what), "stage-in of job %u",
                         r.job_id);
        r.limit = streams_limit (a, r.uid, r.user);
        r.streamfd = streams_client (a, r.uid, r.user, STREAMS_STAGE_IN,
                                     what);
    }
    if ((pid = fork ()) < 0) {
        tier_errprintf (error, "fork: %s", strerror (errno));
        if (r.streamfd >= 0)
            close (r.streamfd);
        write_status (a->conf, r.job_id, "failed", 0, 0, 0, 0, 0,
                      "fork failed");
        json_decref (index);
        return NULL;
    }
    if (pid == 0) {
        streams_close_agent_ends (a);
        stager (a->conf, &r);
    }
    if (r.streamfd >= 0)
        close (r.streamfd);
    (void) snprintf (pidbuf, sizeof (pidbuf), "%d", (int) pid);
    {
        char name[48];
        tier_ns_part_name (r.part, TIER_NS_STAGE_PID, name, sizeof (name));
        (void) tier_ns_write (a->conf->namespace_dir, r.job_id, name,
                              pidbuf);
    }
    tier_log (LOG_INFO, "job %u: staging in %d item(s)%s", r.job_id,
              r.nitems, r.part ? " more" : "");
    return json_pack ("{s:I s:b s:o s:i}", "job_id", job_id, "started", 1,
                      "index", index, "parts", r.part + 1);
}

struct uid_ctx {
    uid_t uid;
    uint32_t except;
    bool found;
};

static int uid_cb (const struct store_job *j, void *arg)
{
    struct uid_ctx *uc = arg;

    if (j->state == STORE_JOB_RUNNING && j->uid == uc->uid
        && j->job_id != uc->except) {
        uc->found = true;
        return 1;
    }
    return 0;
}

/* The user's stage cache goes when their last job on the node ends (the
 * jobs' own stage directories hold their hard links until then). */
static void drop_cache (struct agent *a, const struct store_job *job)
{
    struct uid_ctx uc = { .uid = job->uid, .except = job->job_id };
    tier_error_t error;
    char path[PATH_MAX], name[32];
    int fd;

    if (!a->conf->nvdimm_dir[0]
        || store_job_foreach (a->store, uid_cb, &uc, &error) < 0 || uc.found)
        return;
    (void) snprintf (path, sizeof (path), "%s/.stagecache",
                     a->conf->nvdimm_dir);
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
        < 0)
        return;
    (void) snprintf (name, sizeof (name), "%u", (unsigned) job->uid);
    (void) tier_rmtree_at (fd, name, &error);
    close (fd);
}

/* In a child with the user's credentials: drop this job's reference to
 * each mount point file of made, then remove the file if no other job
 * holds one (one link left) and it still is the empty regular file tier
 * made (same device and inode).  Returns how many went, or -1. */
static int unmake_as_user (const struct tier_conf *conf,
                           const struct store_job *job, json_t *made)
{
    gid_t groups[GROUPS_MAX];
    int ngroups = GROUPS_MAX, removed = 0, refsfd = -1;
    char refs[PATH_MAX];
    size_t i;
    json_t *o;

    if (getgrouplist (job->user, job->gid, groups, &ngroups) < 0)
        ngroups = 0;
    if (setgroups ((size_t) ngroups, groups) < 0
        || setresgid (job->gid, job->gid, job->gid) < 0
        || setresuid (job->uid, job->uid, job->uid) < 0)
        return -1;
    if (conf->shared_state_dir[0]
        && snprintf (refs, sizeof (refs), "%s/users/%s/stage-refs",
                     conf->shared_state_dir, job->user) < (int) sizeof (refs))
        refsfd = open (refs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    json_array_foreach (made, i, o) {
        const char *path = json_string_value (json_object_get (o, "path"));
        const char *ref = json_string_value (json_object_get (o, "ref"));
        json_int_t dev = json_integer_value (json_object_get (o, "dev"));
        json_int_t ino = json_integer_value (json_object_get (o, "ino"));
        const char *root, *base;
        struct stat st;
        int rootfd, pfd;

        if (ref && ref[0] && !strchr (ref, '/') && refsfd >= 0)
            (void) unlinkat (refsfd, ref, 0);
        if (!path || !(root = allowed_root (conf, path))
            || (rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
            continue;
        pfd = open_parent (rootfd, tier_path_strip (path, root), &base);
        close (rootfd);
        if (pfd < 0)
            continue;
        if (fstatat (pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0
            && S_ISREG (st.st_mode) && st.st_size == 0 && st.st_nlink == 1
            && st.st_dev == (dev_t) dev && st.st_ino == (ino_t) ino
            && unlinkat (pfd, base, 0) == 0)
            removed++;
        close (pfd);
    }
    if (refsfd >= 0)
        close (refsfd);
    return removed;
}

/* The empty files made as mount points for URL inputs go at job end. */
static void drop_made (struct agent *a, const struct store_job *job,
                       int part)
{
    static char buf[STAGE_ITEMS_MAX * (PATH_MAX + 96)];
    char path[PATH_MAX], name[48];
    json_error_t jerr;
    json_t *made;
    pid_t pid;
    int status = 0;

    tier_ns_part_name (part, TIER_NS_STAGE_MADE, name, sizeof (name));
    if (tier_ns_read (a->conf->namespace_dir, job->job_id, name, buf,
                      sizeof (buf)) < 0)
        return;
    if (!(made = json_loads (buf, 0, &jerr)) || !json_is_array (made)
        || json_array_size (made) == 0)
        goto out;
    if ((pid = fork ()) == 0) {
        int n = unmake_as_user (a->conf, job, made);
        _exit (n < 0 ? 255 : n);
    }
    if (pid > 0 && agent_child_wait (pid, &status, 5000) < 0)
        status = 255 << 8;              /* the GFS did not answer in 5 s */
    if (pid < 0 || !WIFEXITED (status) || WEXITSTATUS (status) == 255)
        tier_log (LOG_WARNING, "job %u: the empty files made as mount points "
                  "for URL inputs could not be removed", job->job_id);
    else if ((size_t) WEXITSTATUS (status) < json_array_size (made))
        tier_log (LOG_INFO, "job %u: %zu of the empty file(s) made as mount "
                  "points for URL inputs kept (used by another job, changed "
                  "or gone)",
                  job->job_id,
                  json_array_size (made) - (size_t) WEXITSTATUS (status));
    else
        tier_log (LOG_INFO, "job %u: removed the %d empty file(s) made as "
                  "mount points for URL inputs", job->job_id,
                  WEXITSTATUS (status));
out:
    json_decref (made);
    (void) snprintf (path, sizeof (path), "%s/%u/%s",
                     a->conf->namespace_dir, job->job_id, name);
    (void) unlink (path);
}

/* At job end, each part of the stage-in: stop it if it still runs
 * (scancel), count it; false if there is no such part. */
static bool part_end (struct agent *a, const struct store_job *job, int part)
{
    char buf[1024], name[48];
    json_error_t jerr;
    const char *state;
    json_t *o;

    tier_ns_part_name (part, TIER_NS_STAGE_STATUS, name, sizeof (name));
    if (tier_ns_read (a->conf->namespace_dir, job->job_id, name, buf,
                      sizeof (buf)) < 0)
        return false;
    if (!(o = json_loads (buf, 0, &jerr)))
        return true;
    state = json_string_value (json_object_get (o, "state"));
    if (!state || (strcmp (state, "done") && strcmp (state, "failed"))) {
        char pidbuf[32];
        tier_ns_part_name (part, TIER_NS_STAGE_PID, name, sizeof (name));
        if (tier_ns_read (a->conf->namespace_dir, job->job_id, name,
                          pidbuf, sizeof (pidbuf)) == 0) {
            pid_t pid = (pid_t) atoi (pidbuf);
            if (pid > 1 && kill (-pid, SIGKILL) == 0)
                tier_log (LOG_NOTICE, "job %u ended during stage-in: copies "
                          "stopped", job->job_id);
        }
    }
    drop_made (a, job, part);
    if (state && !strcmp (state, "done")) {
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_IN_FILES,
                 json_integer_value (json_object_get (o, "files")));
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_IN_BYTES,
                 json_integer_value (json_object_get (o, "done")));
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_STAGE_IN_MS,
                 json_integer_value (json_object_get (o, "ms")));
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_GFS_BYTES_READ,
                 json_integer_value (json_object_get (o, "gfs")));
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_OPS,
                 json_integer_value (json_object_get (o, "files")));
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_GFS_META_OPS,
                 json_integer_value (json_object_get (o, "meta")));
    }
    else
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_FAILURES, 1);
    json_decref (o);
    return true;
}

/* At job end: stop a stage-in still running (scancel), and count it. */
void stage_job_end (struct agent *a, const struct store_job *job)
{
    int part = 0;

    while (part < STAGE_ITEMS_MAX && part_end (a, job, part))
        part++;
    if (part > 0)
        drop_cache (a, job);
}

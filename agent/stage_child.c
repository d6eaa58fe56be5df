/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage_child.c - stage-in's stager and its copier
 *
 * The stager (root, its own process group, so that scancel's end of the
 * job can stop the part as a whole: stage_job_end) prepares
 *
 *     NvdimmDir/JOBID/stage/K/        owned by the user, 0700, inside the
 *                                     root 0700 job directory
 *
 * and the node's stage cache for the user (NvdimmDir/.stagecache/UID/,
 * lib/trust.h's USER_PRIVATE), starts the copier (agent/child.h's
 * child_spawn: the job's credentials, TIER_CRED_DATA, taken for good
 * before any input is opened: a user path is never read with root's
 * rights, and a root-squashing GFS works), writes what the copier tells
 * it (stage_msg.h) to NamespaceDir/JOBID/stage[.P].status, which the
 * plugin polls, and the mount point files it made to stage[.P].made.
 *
 * The copier opens its stage directories while still root (as_root:
 * the job directory is root's 0700), checks every input at once (O_PATH:
 * a missing or unreadable input fails the job before anything is
 * copied), and copies each with the copy engine -- a file through the
 * stage cache, a tree as a whole, a URL through stage_url.c -- each GFS
 * input on one of the node's GFS streams (streams.c) within the user's
 * bandwidth.
 *
 * A copier its user stops (it runs as them; a stopped one would hold a
 * GFS stream for nothing) is killed within STOP_CHECK_MS, and one killed
 * by anyone but its stager ends the stager without an outcome: the
 * tasks waiting ask the agent to start the part again (stage.c).
 *
 * The stall watchdog: the copier tells the stager of every chunk it
 * copies (progress, at most every 200 ms).  One that tells nothing for
 * StallTimeout, and is not waiting for a GFS stream, is stuck -- most
 * likely in a GFS read that is never answered, where even SIGKILL waits.
 * The stager kills it by its pidfd, gives it a second to end, and if it
 * does not, abandons it: the part fails at once, its stage.status naming
 * the stuck input (the file the copier has open for reading, from
 * /proc/PID/fd: the very one inside a tree), the job's tasks fail with
 * that message, and the stager exits without waiting; the agent then
 * revokes the copier's GFS stream (stage.c) and, as the subreaper,
 * reaps the copier whenever it ends.
 *
 * Owns the stager's and the copier's processes and the files named above.
 * Calls lib/ (copy, jobns, trust, state, url, endpoint), streams.c's
 * worker side, stage_url.c and stage_msg.c.  A child has no log: the
 * stager sends its lines to the agent (STAGEMSG_LOG).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/endpoint.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/units.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "lib/trust.h"
#include "lib/url.h"
#include "child.h"
#include "procfd.h"
#include "stage_msg.h"
#include "streams.h"
#include "stage.h"

#define STATUS_ERROR_MAX 4000 /* of an error in stage.status */
#define STAGER_EXIT_AGAIN 3   /* no outcome: the copier was killed */
#define STOP_CHECK_MS 1000    /* how often a silent copier is looked at */
#define MSG_TIMEOUT_MS 10000  /* the rest of a message that began */
#define KILL_GRACE_MS \
    1000 /* a killed copier that is not gone by then
                               * is stuck in the kernel: abandoned */

void stage_status_write (const struct tier_conf *conf, uint32_t job, int part,
                         const struct stage_status *st)
{
    json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:s s:b s:I}", "state",
                           st->state, "done", (json_int_t) st->done, "total",
                           (json_int_t) st->total, "files",
                           (json_int_t) st->files, "gfs", (json_int_t) st->gfs,
                           "ms", (json_int_t) st->ms, "error",
                           st->error ? st->error : "", "queued", st->queued,
                           "meta", (json_int_t) st->meta);
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    char name[TIER_NS_NAME_MAX];

    json_decref (o);
    if (!s)
        return;
    tier_ns_part_name (part, TIER_NS_STAGE_STATUS, name, sizeof (name));
    (void) tier_ns_write (conf->namespace_dir, job, name, s);
    free (s);
}

/* ------------------------------------------------------- the copier */

struct copier {
    const struct stage_req *r;
    int stfd;    /* NvdimmDir/JOBID/stage (until as_root) */
    int cachefd; /* the user's stage cache, or -1 */
    int dstfds[STAGE_ITEMS_MAX];
    int srcfds[STAGE_ITEMS_MAX];
    struct stat sts[STAGE_ITEMS_MAX];
    struct tier_url *urls[STAGE_ITEMS_MAX];
    struct tier_creds *creds[STAGE_ITEMS_MAX];
    mode_t modes[STAGE_ITEMS_MAX];
    int refsfd; /* the user's stage-refs, or -1 */
    bool any_url;
    int chan;
};

int stage_say (int chan, const char *fmt, ...)
{
    struct stagemsg m = { .type = STAGEMSG_ERROR };
    char text[PATH_MAX + 600];
    va_list ap;

    va_start (ap, fmt);
    (void) vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    m.error = text;
    (void) stagemsg_send (chan, &m); /* the stager sees us exit */
    return -1;
}

void stage_on_progress (uint64_t done, uint64_t total, void *arg)
{
    struct stage_progress *p = arg;
    struct stagemsg m = { .type = STAGEMSG_PROGRESS };
    int64_t t = tier_now_ms ();

    if (t - p->last_ms < 200 && done < total)
        return;
    p->last_ms = t;
    m.done = p->base + done;
    (void) stagemsg_send (p->chan, &m);
}

static void on_queued (void *arg, bool on)
{
    struct stagemsg m = { .type = STAGEMSG_QUEUED, .on = on };

    (void) stagemsg_send (*(int *) arg, &m);
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
            int sub = openat (dirfd, de->d_name,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                sum += tree_bytes (sub, depth + 1);
                close (sub);
            }
        }
    }
    closedir (d);
    return sum;
}

/* One file from the GFS: the source was opened O_PATH (no GFS stream
 * yet: nothing is read), so take one of the node's GFS streams, open it
 * for reading (through /proc/self/fd: the very file that was checked),
 * copy it and give the stream back.  expect: the version the copy must
 * be of (a stage cache key), or NULL. */
static int gfs_copy (int chan, int srcfd, const struct stat *expect, int dstfd,
                     const char *base, const struct tier_copy_opts *opts,
                     struct tier_copy_result *res, tier_error_t *error)
{
    struct tier_copy_opts o = *opts;
    char proc[64];
    int fd, rc, e;

    o.expect = expect;
    (void) streams_take (on_queued, &chan);
    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", srcfd);
    if ((fd = open (proc, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0) {
        e = errno;
        streams_give ();
        errno = e;
        return tier_errprintf (error, "%s", strerror (e));
    }
    rc = tier_copy_fd (fd, dstfd, base, &o, res, error);
    e = errno;
    close (fd); /* before the stream is given back */
    streams_give ();
    errno = e;
    return rc;
}

/* The stage cache key's lock: another job of the user may be copying
 * this version now.  Wait for it, telling the stager that this copier is
 * alive, but for at most half of StallTimeout: a holder that slow, or
 * stuck, is not waited for longer, the file is copied past the cache.
 * 0: held; -1: go without the cache. */
static int key_lock (int lfd, const struct stage_req *r,
                     struct stage_progress *prog)
{
    int64_t limit = (int64_t) r->conf->stall_timeout * 500;
    int64_t t0 = tier_now_ms ();

    if (r->conf->stall_timeout == 0)
        return flock (lfd, LOCK_EX);
    for (;;) {
        if (flock (lfd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (tier_now_ms () - t0 >= limit)
            return -1;
        if (prog)
            stage_on_progress (0, 1, prog); /* alive: nothing copied */
        (void) usleep (100000);
    }
}

/* A file input through the node's stage cache: NvdimmDir/.stagecache/UID/
 * keyed by the source's version (inode, size, mtime, ctime).  Tasks of a
 * batch staging the same file on a node copy it once (the others wait on
 * the key's lock, then hard-link the copy into their own stage directory).
 * The copy must be of the version its key names: a source that changed
 * since it was looked at is looked at again (a few times).
 */
static int cached_copy (struct copier *cp, int k, const char *base,
                        const struct tier_copy_opts *opts,
                        struct tier_copy_result *res, bool *hit,
                        tier_error_t *error)
{
    int cachefd = cp->cachefd, srcfd = cp->srcfds[k], dstfd = cp->dstfds[k];
    char key[160], lock[170];
    struct stat st = cp->sts[k];
    int lfd, rc;

    *hit = false;
    if (cachefd < 0)
        return gfs_copy (cp->chan, srcfd, NULL, dstfd, base, opts, res, error);
    for (int tries = 0;; tries++) {
        (void) snprintf (key, sizeof (key), "%llx-%llx-%lld.%09ld-%lld.%09ld",
                         (unsigned long long) st.st_ino,
                         (unsigned long long) st.st_size,
                         (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
                         (long long) st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
        (void) snprintf (lock, sizeof (lock), "%s.lock", key);
        if ((lfd = openat (cachefd, lock,
                           O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600))
                < 0
            || key_lock (lfd, cp->r, opts->progress_arg) < 0) {
            if (lfd >= 0)
                close (lfd);
            return gfs_copy (cp->chan, srcfd, NULL, dstfd, base, opts, res,
                             error);
        }
        if (linkat (cachefd, key, dstfd, base, 0) == 0) {
            *hit = true;
            res->files = 1;
            res->bytes = (uint64_t) st.st_size;
            rc = 0;
        }
        else if ((rc = gfs_copy (cp->chan, srcfd, &st, dstfd, base, opts, res,
                                 error))
                 == 0)
            (void) linkat (dstfd, base, cachefd, key, 0);
        close (lfd);
        if (rc == 0 || errno != ESTALE || tries >= 3 || fstat (srcfd, &st) < 0)
            return rc;
        memset (res, 0, sizeof (*res));
    }
}

/* URL=PATH item k: where it goes (checked and, if need be, made before
 * anything is fetched), and S3's credentials. */
static int check_url (struct copier *cp, int k)
{
    const struct stage_req *r = cp->r;
    tier_error_t e;

    if (!cp->any_url)
        cp->refsfd = stage_refs_open (r); /* for mount point files */
    cp->any_url = true;
    if (!(cp->urls[k] = tier_url_parse_input (r->urls[k], &e)))
        return stage_say (cp->chan, "%s", e.text);
    if (stage_url_target (r, k, cp->refsfd, cp->chan, &cp->modes[k]) < 0)
        return -1;
    if (cp->urls[k]->scheme == TIER_URL_S3
        && !(cp->creds[k] = stage_url_creds (r, cp->urls[k], cp->chan)))
        return -1;
    return 0;
}

/* GFS item k: opened O_PATH (checked now, read only once a GFS stream is
 * granted), a tree listed (metadata only) for the total. */
static int check_file (struct copier *cp, int k, uint64_t *total)
{
    const char *p = cp->r->items[k], *root, *rel;
    struct stat *st = &cp->sts[k];
    int rootfd, dfd;

    if (!(root = stage_allowed_root (cp->r->conf, p)))
        return stage_say (cp->chan,
                          "%s: outside the directories tier may "
                          "act on (AllowedRoots)",
                          p);
    rel = tier_path_strip (p, root);
    if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        cp->srcfds[k] = tier_path_open_beneath (rootfd, rel, O_PATH, 0, 0);
        close (rootfd);
    }
    if (cp->srcfds[k] < 0 || fstat (cp->srcfds[k], st) < 0)
        return stage_say (cp->chan, "%s: %s", p, stage_open_error (errno));
    if (S_ISREG (st->st_mode)) {
        if (syscall (SYS_faccessat2, cp->srcfds[k], "", R_OK,
                     AT_EMPTY_PATH | AT_EACCESS)
            < 0)
            return stage_say (cp->chan, "%s: %s", p, strerror (errno));
        *total += st->st_size;
        return 0;
    }
    if (!S_ISDIR (st->st_mode))
        return stage_say (cp->chan, "%s: not a file or a directory", p);
    if ((dfd = openat (cp->srcfds[k], ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC))
        < 0)
        return stage_say (cp->chan, "%s: %s", p, strerror (errno));
    close (cp->srcfds[k]);
    cp->srcfds[k] = dfd;
    *total += tree_bytes (dfd, 0);
    return 0;
}

/* GFS item k, opened: where it is, every symlink resolved.  The tasks
 * bind its copy at that path only (spank_plugin/stage.c stage_bind): a
 * symlink the user puts in its place meanwhile cannot move the bind
 * onto another file. */
static int send_source (struct copier *cp, int k)
{
    struct stagemsg m = { .type = STAGEMSG_SOURCE, .k = k };
    char proc[64], path[PATH_MAX];
    const char *deleted = " (deleted)";
    ssize_t n;
    size_t d = strlen (deleted);

    (void) snprintf (proc, sizeof (proc), "/proc/self/fd/%d", cp->srcfds[k]);
    if ((n = readlink (proc, path, sizeof (path))) < 0
        || (size_t) n >= sizeof (path))
        return stage_say (cp->chan, "%s: cannot tell where it is: %s",
                          cp->r->items[k],
                          n < 0 ? strerror (errno) : "path too long");
    path[n] = '\0';
    if (path[0] != '/' || ((size_t) n > d && !strcmp (path + n - d, deleted)))
        return stage_say (cp->chan, "%s: removed while it was staged",
                          cp->r->items[k]);
    m.path = path;
    return stagemsg_send (cp->chan, &m);
}

/* Item k into its stage directory; what it moved into *files, *bytes
 * and (from the GFS) *gfs and *meta. */
static int copy_one (struct copier *cp, int k, struct stage_progress *prog,
                     uint64_t *total, uint64_t *files, uint64_t *bytes,
                     uint64_t *gfs, uint64_t *meta)
{
    const struct stage_req *r = cp->r;
    struct tier_copy_opts opts = {
        .flags = TIER_COPY_NOSYNC | TIER_COPY_NOREPLACE,
        .progress = stage_on_progress,
        .progress_arg = prog,
        /* one GFS stream is one reader (and the user's bandwidth) */
        .threads = 1,
        .limit = streams_worker_limit (),
    };
    const char *base = strrchr (r->items[k], '/') + 1;
    bool file = S_ISREG (cp->sts[k].st_mode), hit = false;
    struct tier_copy_result res;
    tier_error_t error;
    uint64_t size = 0;
    int rc;

    memset (&res, 0, sizeof (res));
    prog->base = *bytes;
    if (cp->urls[k]) {
        /* an object: not from the GFS, and not through the stage cache
         * (there is no version to key it by) */
        rc = stage_url_fetch (r, cp->urls[k], cp->creds[k], cp->dstfds[k], base,
                              cp->modes[k], prog, total, &size, &error);
        tier_creds_destroy (cp->creds[k]);
        cp->creds[k] = NULL;
        if (rc < 0)
            return stage_say (cp->chan, "%s", error.text);
        *files += 1;
        *bytes += size;
        return 0;
    }
    if (file)
        rc = cached_copy (cp, k, base, &opts, &res, &hit, &error);
    else {
        (void) streams_take (on_queued, &cp->chan);
        rc = tier_copy_tree (cp->srcfds[k], cp->dstfds[k], &opts, &res, &error);
        streams_give ();
    }
    if (rc < 0)
        return stage_say (cp->chan, "%s: %s", r->items[k], error.text);
    *files += res.files;
    *bytes += res.bytes + res.hole_bytes;
    if (!hit)
        *gfs += res.bytes + res.hole_bytes;
    /* on the GFS: a file's open (a cached copy too: the source is opened
     * to know its version); a tree's opens and directory reads, one per
     * entry */
    *meta += file ? 1 : res.files + res.dirs + res.symlinks;
    return 0;
}

/* Still root: the stage directories (root's job directory is closed to
 * the user). */
static int copier_as_root (void *arg)
{
    struct copier *cp = arg;
    char name[32];

    for (int k = 0; k < cp->r->nitems; k++) {
        (void) snprintf (name, sizeof (name), "%d", cp->r->base + k);
        if ((cp->dstfds[k] = openat (cp->stfd, name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                                         | O_CLOEXEC))
            < 0)
            return -1;
    }
    close (cp->stfd);
    cp->stfd = -1;
    return 0;
}

void stage_room_text (const struct stage_req *r, uint64_t need, char *buf,
                      size_t size)
{
    char a[32], b[32], c[32], d[32];

    (void) snprintf (buf, size,
                     "%s%s: the stage-in needs %s, and the NVDIMM tier of "
                     "this node has %s left for it (NvdimmCapacity %s, %s "
                     "of it reserved for scratch or holding other "
                     "stage-ins)",
                     r->items[0], r->nitems > 1 ? " (and the others)" : "",
                     tier_size_format (need, a, sizeof (a)),
                     tier_size_format (r->room, b, sizeof (b)),
                     tier_size_format (r->capacity, c, sizeof (c)),
                     tier_size_format (r->taken, d, sizeof (d)));
}

static int stage_room_say (const struct stage_req *r, int chan, uint64_t need)
{
    char text[TIER_ERROR_MAX];

    stage_room_text (r, need, text, sizeof (text));
    return stage_say (chan, "%s", text);
}

/* The job's credentials from here on (child.c took them). */
static int copier_main (void *arg, int chan)
{
    struct copier *cp = arg;
    const struct stage_req *r = cp->r;
    struct stage_progress prog = { .chan = chan };
    struct stagemsg m = { .type = STAGEMSG_TOTAL };
    uint64_t total = 0, files = 0, bytes = 0, gfs = 0, meta = 0;
    tier_error_t e;

    cp->chan = chan;
    cp->refsfd = -1;
    streams_worker_init (r->streamfd, r->limit);
    for (int k = 0; k < r->nitems; k++) {
        cp->srcfds[k] = -1;
        if (r->urls[k][0]
                ? check_url (cp, k) < 0
                : (check_file (cp, k, &total) < 0 || send_source (cp, k) < 0))
            return 1;
    }
    /* curl_global_init: this process is single-threaded (forked) */
    if (cp->any_url && tier_endpoint_init (&e) < 0) {
        (void) stage_say (chan, "%s", e.text);
        return 1;
    }
    if (r->room && total > r->room) {
        (void) stage_room_say (r, chan, total);
        return 1;
    }
    m.total = total;
    (void) stagemsg_send (chan, &m);
    for (int k = 0; k < r->nitems; k++)
        if (copy_one (cp, k, &prog, &total, &files, &bytes, &gfs, &meta) < 0)
            return 1;
    m = (struct stagemsg){
        .type = STAGEMSG_DONE,
        .files = files,
        .bytes = bytes,
        .gfs = gfs,
        .meta = meta,
    };
    return stagemsg_send (chan, &m) < 0 ? 1 : 0;
}

/* ------------------------------------------------------- the stager */

struct stager {
    struct stage_req *r;
    int chan; /* to the agent */
    int stfd, cachefd;
    struct stage_status st;
    char err[STATUS_ERROR_MAX + 1];
    json_t *made; /* stage.made: [{path, dev, ino, ref}] */
    bool ok;
    bool abandoned; /* the copier: stuck, killed, not waited for */
    int stopped;    /* the copier was stopped by this signal: killed */
    int64_t t0;
};

/* A line for the agent's log. */
static void stager_log (const struct stager *s, int level, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void stager_log (const struct stager *s, int level, const char *fmt, ...)
{
    struct stagemsg m = { .type = STAGEMSG_LOG, .level = level };
    char text[TIER_ERROR_MAX + 64];
    va_list ap;

    va_start (ap, fmt);
    (void) vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    m.text = text;
    (void) stagemsg_send (s->chan, &m);
}

static void stager_status (struct stager *s, const char *state, const char *err)
{
    s->st.state = state;
    s->st.error = err;
    s->st.ms = s->t0 ? tier_now_ms () - s->t0 : 0;
    stage_status_write (s->r->conf, s->r->job_id, s->r->part, &s->st);
}

/* The user's stage cache on this node (none if it cannot be had). */
static int open_cache (const struct stage_req *r, int rootfd)
{
    const struct tier_trust dir = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .deny = 077,
    };
    const struct tier_trust own = {
        .kind = TIER_TRUST_USER_PRIVATE,
        .uid = r->uid,
        .gid = r->gid,
        .create = 0700,
        .flags = O_DIRECTORY,
    };
    const char *nv = r->conf->nvdimm_dir;
    char uidname[32];
    int cfd, fd;

    if ((cfd = tier_trust_openat (rootfd, nv, ".stagecache", &dir, NULL)) < 0)
        return -1;
    (void) snprintf (uidname, sizeof (uidname), "%u", (unsigned) r->uid);
    fd = tier_trust_openat (cfd, ".stagecache", uidname, &own, NULL);
    close (cfd);
    return fd;
}

/* NvdimmDir/JOBID/stage/K/ for each item (the user's), and the cache. */
static int prepare (struct stager *s)
{
    const struct tier_trust priv = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .deny = 077,
    };
    const struct stage_req *r = s->r;
    char name[32];
    tier_error_t error;
    int rootfd, jobfd;

    if ((rootfd = tier_root_open (r->conf->nvdimm_dir, &error)) < 0) {
        stager_log (s, LOG_ERR, "job %u: stage-in: %s", r->job_id, error.text);
        stager_status (s, "failed",
                       "the node's NVDIMM tier is not "
                       "available");
        return -1;
    }
    (void) snprintf (name, sizeof (name), "%u", r->job_id);
    if ((jobfd = tier_trust_openat (rootfd, r->conf->nvdimm_dir, name, &priv,
                                    &error))
        >= 0) {
        s->stfd = tier_trust_openat (jobfd, name, "stage", &priv, &error);
        close (jobfd);
    }
    for (int k = 0; s->stfd >= 0 && k < r->nitems; k++) {
        int fd;
        (void) snprintf (name, sizeof (name), "%d", r->base + k);
        /* a stager started again (stage.c's op_stage_restart) begins
         * afresh: what an earlier one copied is not trusted */
        (void) tier_rmtree_at (s->stfd, name, &error);
        (void) mkdirat (s->stfd, name, 0700);
        {
            char src[40];
            (void) snprintf (src, sizeof (src), "%s.src", name);
            (void) unlinkat (s->stfd, src, 0);
        }
        if ((fd = openat (s->stfd, name,
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
                < 0
            || fchown (fd, r->uid, r->gid) < 0) {
            if (fd >= 0)
                close (fd);
            close (s->stfd);
            s->stfd = -1;
        }
        else
            close (fd);
    }
    if (s->stfd < 0) {
        close (rootfd);
        stager_status (s, "failed", "cannot prepare the stage directory");
        return -1;
    }
    s->cachefd = open_cache (r, rootfd);
    close (rootfd);
    return 0;
}

/* URL inputs: the user's directory in the shared state (made by root if
 * missing), where the copier keeps its references to mount point
 * files. */
static void ensure_user_dir (const struct stager *s)
{
    const struct stage_req *r = s->r;
    tier_error_t error;
    int rootfd, fd = -1;
    bool any = false;

    for (int k = 0; k < r->nitems && !any; k++)
        any = r->urls[k][0] != '\0';
    if (!any || !r->conf->shared_state_dir[0])
        return;
    if ((rootfd = tier_state_open_root (r->conf->shared_state_dir, &error))
        >= 0) {
        fd = tier_state_user_dir (rootfd, r->user, r->uid, r->gid, &error);
        close (rootfd);
    }
    if (fd < 0)
        stager_log (s, LOG_WARNING, "job %u: stage-in: %s", r->job_id,
                    error.text);
    else
        close (fd);
}

/* Item k's path is an empty file tier made as its mount point (for this
 * job, or for another that still holds a reference): kept in
 * NamespaceDir/JOBID/stage[.P].made (root's) for the agent to remove at
 * job end. */
static void record_made (struct stager *s, const struct stagemsg *m)
{
    const struct stage_req *r = s->r;
    char name[TIER_NS_NAME_MAX], *text;
    size_t i;
    json_t *v;

    /* one entry a file: a copier of an earlier try reported it already */
    json_array_foreach (s->made, i, v)
    {
        const char *path = json_string_value (json_object_get (v, "path"));
        if (m->k < r->nitems && path && !strcmp (path, r->items[m->k]))
            return;
    }
    if (!s->made || m->k >= r->nitems
        || json_array_append_new (s->made,
                                  json_pack ("{s:s s:I s:I s:s}", "path",
                                             r->items[m->k], "dev",
                                             (json_int_t) m->dev, "ino",
                                             (json_int_t) m->ino, "ref",
                                             m->ref))
               < 0
        || !(text = json_dumps (s->made, JSON_COMPACT)))
        return;
    tier_ns_part_name (r->part, TIER_NS_STAGE_MADE, name, sizeof (name));
    (void) tier_ns_write (r->conf->namespace_dir, r->job_id, name, text);
    free (text);
}

/* Item k's source path, as its copier found it: stage/INDEX.src, where
 * the tasks read it before they bind the copy (root's directory). */
static void record_source (struct stager *s, const struct stagemsg *m)
{
    char name[32];
    size_t n = strlen (m->path);
    int fd;

    if (m->k >= s->r->nitems)
        return;
    (void) snprintf (name, sizeof (name), "%d.src", s->r->base + m->k);
    if ((fd = openat (s->stfd, name,
                      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                      0600))
        < 0)
        return; /* the tasks refuse to bind without it */
    if (write (fd, m->path, n) != (ssize_t) n)
        (void) ftruncate (fd, 0);
    close (fd);
}

/* The mount point files an earlier stager of this part made (it was
 * killed: op_stage_restart started this one): still this part's to
 * remove at job end. */
static void load_made (struct stager *s)
{
    static char buf[STAGE_ITEMS_MAX * (PATH_MAX + 96)];
    char name[TIER_NS_NAME_MAX];
    json_error_t jerr;
    json_t *made;

    tier_ns_part_name (s->r->part, TIER_NS_STAGE_MADE, name, sizeof (name));
    if (!s->made
        || tier_ns_read (s->r->conf->namespace_dir, s->r->job_id, name, buf,
                         sizeof (buf))
               < 0
        || !(made = json_loads (buf, 0, &jerr)))
        return;
    if (json_is_array (made))
        (void) json_array_extend (s->made, made);
    json_decref (made);
}

/* One message of the copier. */
static void on_copier (struct stager *s, const struct stagemsg *m)
{
    switch (m->type) {
        case STAGEMSG_TOTAL:
            s->st.total = m->total;
            break;
        case STAGEMSG_PROGRESS:
            s->st.done = m->done;
            break;
        case STAGEMSG_QUEUED:
            s->st.queued = m->on;
            break;
        case STAGEMSG_MADE:
            record_made (s, m);
            break;
        case STAGEMSG_SOURCE:
            record_source (s, m);
            return;
        case STAGEMSG_ERROR:
            (void) snprintf (s->err, sizeof (s->err), "%.*s", STATUS_ERROR_MAX,
                             m->error);
            return;
        case STAGEMSG_DONE:
            s->st.files = m->files;
            s->st.done = m->bytes;
            s->st.gfs = m->gfs;
            s->st.meta = m->meta;
            s->ok = true;
            return;
        default:
            return;
    }
    stager_status (s, "copying", NULL);
}

/* Is path items[k] or beneath it? */
static bool under_item (const struct stage_req *r, const char *path)
{
    for (int k = 0; k < r->nitems; k++) {
        size_t n = strlen (r->items[k]);
        if (!strncmp (path, r->items[k], n)
            && (path[n] == '\0' || path[n] == '/'))
            return true;
    }
    return false;
}

/* The input a stuck copier reads: of the descriptors it has open for
 * reading (not O_PATH, not a directory), the deepest path beneath an
 * item (a tree's file rather than the tree).  Only /proc is read: the
 * GFS, which does not answer, is not touched.  false if none. */
struct stuck_in {
    const struct stager *s;
    char *out;
    size_t size, best;
};

static bool stuck_input_fd (const char *target, unsigned long flags, void *arg)
{
    struct stuck_in *si = arg;
    size_t n = strlen (target);

    if ((flags & O_ACCMODE) == O_RDONLY && !(flags & (O_PATH | O_DIRECTORY))
        && under_item (si->s->r, target) && n > si->best) {
        si->best = n;
        (void) snprintf (si->out, si->size, "%s", target);
    }
    return false; /* all of them: the deepest wins */
}

static bool stuck_input (const struct stager *s, pid_t pid, char *out,
                         size_t size)
{
    struct stuck_in si = { .s = s, .out = out, .size = size };

    (void) procfd_each (pid, stuck_input_fd, &si);
    return si.best > 0;
}

/* The copier said nothing for StallTimeout: kill it, and if it does not
 * end within KILL_GRACE_MS, abandon it (it is stuck in the kernel: the
 * stager does not wait for it).  The part fails, naming what is stuck. */
static void copier_stalled (struct stager *s, pid_t pid, int pidfd)
{
    const struct stage_req *r = s->r;
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    char what[PATH_MAX + 64];
    int status;

    if (!stuck_input (s, pid, what, sizeof (what))) {
        if (r->nitems == 1)
            (void) snprintf (what, sizeof (what), "%s", r->items[0]);
        else
            (void) snprintf (what, sizeof (what),
                             "%s (or another of the "
                             "job's %d inputs)",
                             r->items[0], r->nitems);
    }
    if (pidfd < 0
        || syscall (SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0)
        (void) kill (pid, SIGKILL);
    s->abandoned = true;
    if (pidfd >= 0 && poll (&p, 1, KILL_GRACE_MS) == 1
        && waitpid (pid, &status, 0) == pid)
        s->abandoned = false;
    s->ok = false;
    (void) snprintf (s->err, sizeof (s->err),
                     "%.3000s: no progress for %llu s (StallTimeout): the GFS "
                     "does not answer; the copy was %s",
                     what, (unsigned long long) r->conf->stall_timeout,
                     s->abandoned ? "abandoned (stuck in a GFS request)"
                                  : "stopped");
}

/* The copier is stopped (its user may stop it: it runs as them): the
 * signal that stopped it, or 0. */
static int copier_stopped (pid_t pid)
{
    siginfo_t si;

    memset (&si, 0, sizeof (si));
    if (waitid (P_PID, (id_t) pid, &si, WSTOPPED | WNOHANG | WNOWAIT) == 0
        && si.si_pid == pid && si.si_code == CLD_STOPPED)
        return si.si_status;
    return 0;
}

/* Read the copier's messages until it closes its end, says nothing for
 * StallTimeout while not waiting for a GFS stream, or is stopped (looked
 * at every STOP_CHECK_MS): a stopped copier holds the node's GFS stream
 * for nothing, and is killed at once. */
static void listen_copier (struct stager *s, int chan, pid_t pid, int pidfd)
{
    uint64_t stall_s = s->r->conf->stall_timeout;
    int64_t stall_ms = stall_s > INT_MAX / 1000 ? INT_MAX
                                                : (int64_t) stall_s * 1000;
    int64_t last = tier_now_ms ();
    tier_error_t e;
    struct stagemsg m;
    json_t *body;
    int type;

    for (;;) {
        struct pollfd p = { .fd = chan, .events = POLLIN };
        int64_t wait = STOP_CHECK_MS;
        int rc, sig;

        if (!s->st.queued && stall_s) {
            int64_t left = last + stall_ms - tier_now_ms ();
            if (left <= 0) {
                copier_stalled (s, pid, pidfd);
                return;
            }
            if (left < wait)
                wait = left;
        }
        rc = poll (&p, 1, (int) wait);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0) {
            if ((sig = copier_stopped (pid))) {
                if (pidfd < 0
                    || syscall (SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0)
                           < 0)
                    (void) kill (pid, SIGKILL);
                s->stopped = sig;
                return;
            }
            continue;
        }
        if (chmsg_recv (chan, &stagemsg_copier_proto, &type, &body, NULL, NULL,
                        0, MSG_TIMEOUT_MS, &e)
            < 0) {
            if (errno == ECONNRESET || errno == ENODATA)
                return;
            break;
        }
        last = tier_now_ms ();
        if (stagemsg_unpack (type, body, &m, &e) < 0) {
            json_decref (body);
            break;
        }
        on_copier (s, &m);
        json_decref (body);
    }
    /* a message refused: the copier is not trusted any further */
    s->ok = false;
    (void) snprintf (s->err, sizeof (s->err), "the copy failed: %.3900s",
                     e.text);
    (void) kill (pid, SIGKILL);
}

static pid_t start_copier (struct stager *s, struct copier *cp, int *chan)
{
    struct stage_req *r = s->r;
    struct child_spec spec = {
        .name = "tierd-stagecp",
        .cred = &r->cred,
        .mode = TIER_CRED_DATA,
        .keep = { s->stfd, s->cachefd, r->streamfd },
        .nkeep = 3,
        .proto = &stagemsg_copier_proto,
        .as_root = copier_as_root,
        .main = copier_main,
        .arg = cp,
    };
    tier_error_t error;
    pid_t pid;

    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-stagecp job %u "
                     "%s",
                     r->job_id, r->user);
    cp->r = r;
    cp->stfd = s->stfd;
    cp->cachefd = s->cachefd;
    if ((pid = child_spawn (&spec, chan, &error)) < 0)
        stager_log (s, LOG_ERR, "job %u: stage-in: %s", r->job_id, error.text);
    return pid;
}

int stager_main (void *arg, int chan)
{
    static struct copier cp;
    struct stager s = {
        .r = arg,
        .chan = chan,
        .stfd = -1,
        .cachefd = -1,
        .made = json_array (),
    };
    struct stage_req *r = s.r;
    int status = 0, cchan, pidfd;
    pid_t pid;

    load_made (&s);
    stager_status (&s, "copying", NULL);
    s.t0 = tier_now_ms ();
    if (prepare (&s) < 0)
        return 1;
    ensure_user_dir (&s);
    if ((pid = start_copier (&s, &cp, &cchan)) < 0) {
        stager_status (&s, "failed", "fork failed");
        return 1;
    }
    /* the copier's alone (stfd stays: record_source writes there) */
    if (s.cachefd >= 0)
        close (s.cachefd);
    if (r->streamfd >= 0)
        close (r->streamfd);
    /* its own child, not reaped: this pidfd is of that very process */
    pidfd = (int) syscall (SYS_pidfd_open, pid, 0);
    listen_copier (&s, cchan, pid, pidfd);
    close (s.stfd);
    close (cchan);
    if (pidfd >= 0)
        close (pidfd);
    /* one stuck is abandoned: the agent reaps it whenever it ends */
    while (!s.abandoned && waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    s.ok = s.ok && WIFEXITED (status) && WEXITSTATUS (status) == 0;
    json_decref (s.made);
    if (s.stopped) {
        /* its user stopped it (it runs as them): killed at once, the
         * part starts again as after any kill */
        stager_log (&s, LOG_WARNING,
                    "job %u: stage-in: its copier (pid %d) was stopped "
                    "(signal %d, from outside); killed, the part is to "
                    "start again",
                    r->job_id, (int) pid, s.stopped);
        return STAGER_EXIT_AGAIN;
    }
    if (!s.ok && !s.err[0] && !s.abandoned && WIFSIGNALED (status)) {
        /* killed, not by the stager (the OOM killer, an admin): no
         * outcome, the stager ends for a fresh start, which the tasks
         * waiting ask the agent for (stage.c's op_stage_restart) */
        stager_log (&s, LOG_WARNING,
                    "job %u: stage-in: its copier (pid %d) was killed by "
                    "signal %d; the part is to start again",
                    r->job_id, (int) pid, WTERMSIG (status));
        return STAGER_EXIT_AGAIN;
    }
    if (!s.ok && !s.err[0] && WIFEXITED (status)
        && WEXITSTATUS (status) == CHILD_EXIT_SETUP)
        (void) snprintf (s.err, sizeof (s.err), "cannot take uid %u",
                         (unsigned) r->uid);
    else if (!s.ok && !s.err[0])
        (void) snprintf (s.err, sizeof (s.err), "the copy was interrupted");
    if (!s.ok) /* the job's stderr says it too: the node's log as well */
        stager_log (&s, LOG_WARNING, "job %u: stage-in failed: %s", r->job_id,
                    s.err);
    stager_status (&s, s.ok ? "done" : "failed", s.ok ? NULL : s.err);
    return s.ok ? 0 : 1;
}

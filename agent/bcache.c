/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bcache.c - the block cache's side in the agent (issue 18): each job's
 * write log on the node, its drain child, its files
 *
 * blog.open, from a task of a running job, with a descriptor of a GFS
 * file open for writing under a directory of the job's frozen policies
 * that has a window (stage = none): on the job's first such open on the
 * node the log is made -- NvdimmDir/.blog/JOB.RESTART, in a root 0700
 * directory (nobody opens it by name), owned by the job's user, 0600,
 * its ring the policy's window, counted against NvdimmCapacity -- and
 * its drain child started (agent/drain.c: the job's credentials, in the
 * user's cgroups).  The file gets an id (one per inode: the drain writes
 * through one descriptor of it, whichever process wrote), its descriptor
 * goes to the drain, and the answer carries the id and the log's
 * descriptor, which the task maps.
 *
 * The agent keeps a descriptor of every file too: a drain child that
 * died (killed, stopped by its user: child.c kills a stopped child)
 * is started again with them, and the log drains from its tail again
 * (harmless: lib/bdrain.h).  They are closed on the closer threads
 * (rxfd_drop), never on the loop.
 *
 * blog.flush (from the job): tell the drain to drain what is committed
 * now; the answer says what the log holds and the file's failure, if
 * any (the caller watches the log's tail in its map).  blog.sync {job_id,
 * end} (the epilog: root and SlurmUser): wait until the log is empty and
 * the drain ended, or timeout_ms; the log is removed then.
 *
 * Not yet (doc/block-cache.md): a new agent after a crash does not take
 * over a drain child still running (pidfd_getfd), nor replay a log left
 * behind by path; such a log is set aside (renamed JOB.RESTART.orphan)
 * and logged, never reused or removed.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/blog.h"
#include "lib/cred.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/trust.h"
#include "agent.h"
#include "bcache.h"
#include "child.h"
#include "drain.h"
#include "peer.h"
#include "policy.h"
#include "stage.h"

#define BCACHE_FILES_MAX 256            /* inodes one job writes on a node */
#define BCACHE_RESTARTS_MAX 20          /* drain children started for a job */
#define BCACHE_TRICKLE (8 << 20)        /* bytes a second below the watermark */
#define BCACHE_SYNC_MS (10 * 60 * 1000) /* blog.sync's default bound */

struct bfile {
    dev_t dev;
    ino_t ino;
    int fd; /* the agent's copy */
    char *path;
};

struct bwaiter {
    struct conn *c;
    uint32_t msgid;
    int64_t deadline_ms;
    struct bwaiter *next;
};

struct bjob {
    uint32_t job_id, restart;
    uid_t uid;
    gid_t gid;
    char user[64];
    int logfd;
    uint64_t capacity;
    char name[64]; /* in .blog/ */
    struct child *child;
    int starts;
    int64_t restart_ms; /* start a new drain child then (0: none due) */
    bool ending, ended, damaged;
    struct bfile files[BCACHE_FILES_MAX];
    int nfiles;
    uint64_t records, bytes, used, abandoned, refused;
    int fail_errno;
    int64_t fail_file;
    char fail_error[256];
    char damage[256];
    struct bwaiter *waiters;
    struct bjob *next;
};

static struct bjob *bjobs;
static int blog_dirfd = -1;

static struct bjob *bjob_find (uint32_t job_id, uint32_t restart)
{
    for (struct bjob *j = bjobs; j; j = j->next)
        if (j->job_id == job_id && j->restart == restart)
            return j;
    return NULL;
}

uint64_t bcache_held (struct agent *a, uint32_t except)
{
    uint64_t sum = 0;

    (void) a;
    for (struct bjob *j = bjobs; j; j = j->next)
        if (j->job_id != except)
            sum += BLOG_SUPER + j->capacity;
    return sum;
}

/* NvdimmDir/.blog, root's and 0700. */
static int dir_open (struct agent *a, tier_error_t *error)
{
    static const struct tier_trust root_rule = { .kind = TIER_TRUST_ROOT_DIR,
                                                 .deny = 022 };
    static const struct tier_trust rule = { .kind = TIER_TRUST_ROOT_DIR,
                                            .deny = 077 };
    int root;

    if (blog_dirfd >= 0)
        return blog_dirfd;
    if (!a->nvdimm_ok || !a->conf->nvdimm_dir[0]) {
        errno = ENODEV;
        return tier_errprintf (error, "node %s has no NVDIMM tier", a->node);
    }
    if ((root = tier_trust_open (a->conf->nvdimm_dir, &root_rule, error)) < 0)
        return -1;
    if (mkdirat (root, ".blog", 0700) < 0 && errno != EEXIST) {
        int saved = errno;
        close (root);
        errno = saved;
        return tier_errprintf (error, "%s/.blog: %s", a->conf->nvdimm_dir,
                               strerror (errno));
    }
    blog_dirfd = tier_trust_openat (root, a->conf->nvdimm_dir, ".blog", &rule,
                                    error);
    close (root);
    return blog_dirfd;
}

static void on_drain_msg (struct agent *a, struct child *c, int type,
                          json_t *body, int *fds, int nfds, void *owner);
static void on_drain_done (struct agent *a, struct child *c, int status,
                           void *owner);

static int drain_start (struct agent *a, struct bjob *j, tier_error_t *error)
{
    struct drain_arg da = {
        .logfd = j->logfd,
        .blog_flags = a->nvdimm_pmem ? BLOG_PMEM : 0,
        .tick_ms = 10,
        .trickle = BCACHE_TRICKLE,
    };
    struct child_spec spec = {
        .name = "tierd-drain",
        .proto = &drmsg_proto,
        .mode = TIER_CRED_DATA,
        .outlive = true,
        .main = drain_main,
        .arg = &da,
        .on_msg = on_drain_msg,
        .on_done = on_drain_done,
        .owner = j,
    };
    struct store_job job;
    struct tier_cred cred;
    tier_error_t e;

    if (store_job_get (a->store, j->job_id, j->restart, &job, &e) < 0
        || jobs_cred (&job, &cred) < 0) {
        errno = ESRCH;
        return tier_errprintf (error, "job %u: no credentials for its drain",
                               j->job_id);
    }
    spec.cred = &cred;
    spec.keep[spec.nkeep++] = j->logfd;
    (void) snprintf (spec.title, sizeof (spec.title),
                     "tierd-drain job %u.%u %s", j->job_id, j->restart,
                     j->user);
    if (!(j->child = child_start (a, &spec, error)))
        return -1;
    j->starts++;
    for (int i = 0; i < j->nfiles; i++)
        if (child_send (j->child, DRMSG_FILE, json_pack ("{s:i}", "file", i),
                        &j->files[i].fd, 1)
            < 0)
            tier_log (LOG_WARNING, "job %u: file %d to the drain: %s",
                      j->job_id, i, strerror (errno));
    if (j->ending)
        (void) child_send (j->child, DRMSG_END, json_object (), NULL, 0);
    tier_log (LOG_INFO, "job %u: drain %d for its block cache (%llu MiB)",
              j->job_id, (int) child_pid (j->child),
              (unsigned long long) (j->capacity >> 20));
    return 0;
}

static json_t *sync_answer (struct bjob *j)
{
    json_t *o = json_pack ("{s:I s:I s:I s:I s:b s:i}", "job_id",
                           (json_int_t) j->job_id, "pending",
                           (json_int_t) j->used, "records",
                           (json_int_t) j->records, "bytes",
                           (json_int_t) j->bytes, "drained",
                           j->ended && j->used == 0, "fail_errno",
                           j->fail_errno);
    if (o && j->fail_errno)
        json_object_set_new (o, "failure", json_string (j->fail_error));
    if (o && j->damaged)
        json_object_set_new (o, "damaged", json_string (j->damage));
    return o;
}

static void answer_waiters (struct agent *a, struct bjob *j, bool all)
{
    int64_t now = tier_now_ms ();
    struct bwaiter **pp = &j->waiters;

    while (*pp) {
        struct bwaiter *w = *pp;
        if (all || now >= w->deadline_ms) {
            json_t *o = sync_answer (j);
            if (o && !all)
                json_object_set_new (o, "timed_out", json_true ());
            *pp = w->next;
            w->c->waiting--;
            server_reply (a, w->c, w->msgid,
                          o ? json_dumps (o, JSON_COMPACT) : NULL);
            json_decref (o);
            free (w);
        }
        else
            pp = &w->next;
    }
}

static void bjob_free (struct bjob *j)
{
    for (int i = 0; i < j->nfiles; i++) {
        rxfd_drop (j->uid, j->files[i].fd);
        free (j->files[i].path);
    }
    if (j->logfd >= 0)
        close (j->logfd);
    free (j);
}

/* The job ended and its log is on the GFS: answer, remove, forget. */
static void bjob_finish (struct agent *a, struct bjob *j)
{
    answer_waiters (a, j, true);
    if (blog_dirfd >= 0 && j->used == 0 && !j->damaged
        && unlinkat (blog_dirfd, j->name, 0) < 0 && errno != ENOENT)
        tier_log (LOG_WARNING, "job %u: removing its write log: %s", j->job_id,
                  strerror (errno));
    for (struct bjob **pp = &bjobs; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    tier_log (LOG_INFO,
              "job %u: block cache drained: %llu records, "
              "%llu bytes",
              j->job_id, (unsigned long long) j->records,
              (unsigned long long) j->bytes);
    bjob_free (j);
}

static void on_drain_msg (struct agent *a, struct child *c, int type,
                          json_t *body, int *fds, int nfds, void *owner)
{
    struct bjob *j = owner;
    json_int_t records = 0, bytes = 0, used = 0, tail = 0, file = -1, seq = 0;
    json_int_t ab = 0, ref = 0;
    const char *text = NULL;
    int err = 0;

    (void) c;
    (void) fds;
    (void) nfds;
    switch (type) {
        case DRMSG_PROGRESS:
            if (json_unpack (body, "{s:I s:I s:I s:I}", "records", &records,
                             "bytes", &bytes, "used", &used, "tail", &tail)
                == 0) {
                j->records = (uint64_t) records;
                j->bytes = (uint64_t) bytes;
                j->used = (uint64_t) used;
                j->fail_errno = 0;
            }
            break;
        case DRMSG_FAILED:
            if (json_unpack (body, "{s:I s:I s:i s:s}", "file", &file, "seq",
                             &seq, "errno", &err, "error", &text)
                == 0) {
                const char *path = file >= 0 && file < j->nfiles
                                       ? j->files[file].path
                                       : "?";
                j->fail_errno = err;
                j->fail_file = file;
                (void) snprintf (j->fail_error, sizeof (j->fail_error),
                                 "%s: %s", path, strerror (err));
                tier_log (LOG_ERR,
                          "job %u: block cache: writing %s to the "
                          "GFS failed (record %lld): %s; kept, retried",
                          j->job_id, path, (long long) seq, text);
            }
            break;
        case DRMSG_FLUSHED:
            break;
        case DRMSG_ENDED:
            if (json_unpack (body, "{s:I s:I s:I s:I}", "records", &records,
                             "bytes", &bytes, "abandoned", &ab, "refused", &ref)
                == 0) {
                j->records = (uint64_t) records;
                j->bytes = (uint64_t) bytes;
                j->abandoned = (uint64_t) ab;
                j->refused = (uint64_t) ref;
                j->used = 0;
                j->fail_errno = 0;
                j->ended = true;
            }
            break;
        case DRMSG_DAMAGED:
            if (json_unpack (body, "{s:s}", "error", &text) == 0) {
                j->damaged = true;
                (void) snprintf (j->damage, sizeof (j->damage), "%s", text);
                tier_log (LOG_ERR, "job %u: its write log: %s", j->job_id,
                          text);
            }
            break;
        default:
            break;
    }
    json_decref (body);
}

static void on_drain_done (struct agent *a, struct child *c, int status,
                           void *owner)
{
    struct bjob *j = owner;

    (void) c;
    j->child = NULL;
    if (j->ended || j->damaged) {
        if (j->ending)
            bjob_finish (a, j);
        return;
    }
    tier_log (LOG_WARNING,
              "job %u: its drain ended (status %d) with the "
              "log not empty: started again",
              j->job_id, status);
    j->restart_ms = tier_now_ms () + 1000;
}

/* The job's log, made at its first blog.open here. */
static struct bjob *bjob_make (struct agent *a, const struct store_job *job,
                               uint64_t window, tier_error_t *error)
{
    struct bjob *j;
    uint64_t cap = window & ~(uint64_t) (BLOG_ALIGN - 1), room;
    int dfd, fd;

    if ((dfd = dir_open (a, error)) < 0)
        return NULL;
    if (cap < BLOG_CAPACITY_MIN)
        cap = BLOG_CAPACITY_MIN;
    if (cap > BLOG_CAPACITY_MAX)
        cap = BLOG_CAPACITY_MAX;
    if (a->conf->nvdimm_capacity) {
        uint64_t taken = agent_nvdimm_taken (a, 0);
        room = a->conf->nvdimm_capacity > taken
                   ? a->conf->nvdimm_capacity - taken
                   : 0;
        if (room < BLOG_SUPER + cap) {
            errno = ENOSPC;
            tier_errprintf (error,
                            "no room for a %llu MiB write window on "
                            "node %s's NVDIMM tier (%llu MiB left)",
                            (unsigned long long) (cap >> 20), a->node,
                            (unsigned long long) (room >> 20));
            return NULL;
        }
    }
    if (!(j = calloc (1, sizeof (*j)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    j->job_id = job->job_id;
    j->restart = job->restart;
    j->uid = job->uid;
    j->gid = job->gid;
    j->capacity = cap;
    j->fail_file = -1;
    (void) snprintf (j->user, sizeof (j->user), "%s", job->user);
    (void) snprintf (j->name, sizeof (j->name), "%u.%u", job->job_id,
                     job->restart);
    fd = openat (dfd, j->name,
                 O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* an earlier agent's, not taken over yet (see above): kept */
        char aside[96];
        (void) snprintf (aside, sizeof (aside), "%s.orphan", j->name);
        if (renameat (dfd, j->name, dfd, aside) == 0)
            tier_log (LOG_ERR,
                      "job %u: a write log of an earlier agent "
                      "was set aside as %s/.blog/%s: its records are not "
                      "replayed yet",
                      job->job_id, a->conf->nvdimm_dir, aside);
        fd = openat (dfd, j->name,
                     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd < 0 || fchown (fd, job->uid, job->gid) < 0
        || blog_format (fd, cap, error) < 0) {
        if (fd >= 0) {
            int saved = errno;
            close (fd);
            (void) unlinkat (dfd, j->name, 0);
            errno = saved;
        }
        else
            tier_errprintf (error, "the write log: %s", strerror (errno));
        free (j);
        return NULL;
    }
    j->logfd = fd;
    if (drain_start (a, j, error) < 0) {
        close (fd);
        (void) unlinkat (dfd, j->name, 0);
        free (j);
        return NULL;
    }
    j->next = bjobs;
    bjobs = j;
    return j;
}

static int take_fd (struct conn *c, tier_error_t *error)
{
    int fd;

    if (c->req_nfds != 1 || c->req_fds[0] < 0) {
        errno = EINVAL;
        return tier_errprintf (error, "blog.open needs one descriptor");
    }
    fd = c->req_fds[0];
    c->req_fds[0] = -1;
    return fd;
}

/* The descriptor a task sends: a regular file open for writing, neither
 * appending nor synchronous nor direct, the one the kernel says is at
 * path, on a mount of the site's. */
static int check_file (pid_t peer, int fd, const char *path, struct stat *st,
                       tier_error_t *error)
{
    char link[64], real[PATH_MAX];
    ssize_t n;
    int fl;

    if (fstat (fd, st) < 0 || !S_ISREG (st->st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "the descriptor is not a regular file");
    }
    fl = fcntl (fd, F_GETFL);
    if (fl < 0 || (fl & O_PATH) || (fl & O_ACCMODE) == O_RDONLY) {
        errno = EBADF;
        return tier_errprintf (error, "the descriptor is not open for "
                                      "writing");
    }
    if (fl & (O_APPEND | O_DIRECT | O_SYNC | O_DSYNC)) {
        errno = EINVAL;
        return tier_errprintf (error, "the descriptor appends, or writes "
                                      "synchronously or directly: not cached");
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
    return rxfd_check (peer, fd, error);
}

static int get_path (json_t *req, char *out, size_t size, tier_error_t *error)
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

/* blog.open {path} + the file's descriptor: {file, capacity, pmem} + the
 * log's descriptor. */
json_t *op_blog_open (struct agent *a, struct conn *c, json_t *req,
                      tier_error_t *error)
{
    char path[PATH_MAX];
    struct store_job job;
    struct peer_job pj;
    struct tier_policy pol;
    struct stat st;
    struct bjob *j;
    int fd = take_fd (c, error), id = -1, copy;

    if (fd < 0)
        return NULL;
    if (get_path (req, path, sizeof (path), error) < 0
        || rpc_caller_job (a, c, &job, &pj, error) < 0
        || check_file (c->cred.pid, fd, path, &st, error) < 0)
        goto error;
    if (!stage_allowed_root (a->conf, path)
        || policy_job_resolve (a, &job, path, &pol) < 0
        || !tier_policy_is_window (&pol)) {
        errno = ENOENT;
        tier_errprintf (error,
                        "%s is not in a block cache directory (an "
                        "endpoint with a window) of job %u",
                        path, job.job_id);
        goto error;
    }
    if (!(j = bjob_find (job.job_id, job.restart))
        && !(j = bjob_make (a, &job, pol.window, error)))
        goto error;
    if (j->ending || j->damaged) {
        errno = ESHUTDOWN;
        tier_errprintf (error, "job %u's write log is %s", job.job_id,
                        j->damaged ? "damaged" : "closing");
        goto error;
    }
    for (int i = 0; i < j->nfiles; i++)
        if (j->files[i].dev == st.st_dev && j->files[i].ino == st.st_ino)
            id = i;
    if (id < 0) {
        if (j->nfiles == BCACHE_FILES_MAX) {
            errno = EMFILE;
            tier_errprintf (error,
                            "job %u writes %d files through the "
                            "block cache on node %s already",
                            job.job_id, BCACHE_FILES_MAX, a->node);
            goto error;
        }
        if (!(j->files[j->nfiles].path = strdup (path))) {
            errno = ENOMEM;
            tier_errprintf (error, "out of memory");
            goto error;
        }
        id = j->nfiles++;
        j->files[id].dev = st.st_dev;
        j->files[id].ino = st.st_ino;
        j->files[id].fd = fd;
        fd = -1;
        if (j->child
            && child_send (j->child, DRMSG_FILE,
                           json_pack ("{s:i}", "file", id), &j->files[id].fd, 1)
                   < 0)
            tier_log (LOG_WARNING, "job %u: file %s to the drain: %s",
                      job.job_id, path, strerror (errno));
    }
    if (fd >= 0)
        rxfd_drop (job.uid, fd);
    if ((copy = fcntl (j->logfd, F_DUPFD_CLOEXEC, 3)) < 0) {
        tier_errprintf (error, "the log's descriptor: %s", strerror (errno));
        return NULL;
    }
    c->reply_fd = copy;
    return json_pack ("{s:i s:I s:b}", "file", id, "capacity",
                      (json_int_t) j->capacity, "pmem", a->nvdimm_pmem);
error:
    rxfd_drop (c->cred.uid, fd);
    return NULL;
}

/* blog.flush {file?}: from the job. */
json_t *op_blog_flush (struct agent *a, struct conn *c, json_t *req,
                       tier_error_t *error)
{
    struct store_job job;
    struct peer_job pj;
    struct bjob *j;
    json_int_t file = -1;
    json_t *o;

    if (rpc_caller_job (a, c, &job, &pj, error) < 0)
        return NULL;
    (void) json_unpack (req, "{s?I}", "file", &file);
    if (!(j = bjob_find (job.job_id, job.restart))) {
        errno = ENOENT;
        tier_errprintf (error, "job %u has no write log on node %s", job.job_id,
                        a->node);
        return NULL;
    }
    if (j->child)
        (void) child_send (j->child, DRMSG_FLUSH,
                           json_pack ("{s:I}", "id", (json_int_t) c->req_id),
                           NULL, 0);
    o = sync_answer (j);
    if (o && j->fail_errno && file >= 0 && j->fail_file != file)
        json_object_set_new (o, "fail_errno", json_integer (0));
    return o;
}

/* blog.sync {job_id, timeout_ms?, end?}: the epilog (end: the job ended
 * here) and tierctl; answered once the log is empty (with end: and the
 * drain ended), or after timeout_ms. */
json_t *op_blog_sync (struct agent *a, struct conn *c, json_t *req,
                      tier_error_t *error)
{
    json_int_t job_id = 0, timeout = BCACHE_SYNC_MS;
    int end = 0;
    struct bjob *j = NULL;
    struct bwaiter *w;

    if (json_unpack (req, "{s:I s?I s?b}", "job_id", &job_id, "timeout_ms",
                     &timeout, "end", &end)
            < 0
        || job_id <= 0 || job_id > UINT32_MAX) {
        errno = EINVAL;
        tier_errprintf (error, "'job_id' is missing");
        return NULL;
    }
    for (struct bjob *k = bjobs; k; k = k->next)
        if (k->job_id == (uint32_t) job_id && (!j || k->restart > j->restart))
            j = k;
    if (!j)
        return json_pack ("{s:I s:I s:b}", "job_id", job_id, "pending",
                          (json_int_t) 0, "none", 1);
    if (!agent_privileged (a, c->cred.uid) && j->uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %lld belongs to another user",
                        (long long) job_id);
        return NULL;
    }
    if (end && !agent_privileged (a, c->cred.uid)) {
        errno = EPERM;
        tier_errprintf (error, "only the epilog ends a job");
        return NULL;
    }
    if (!(w = calloc (1, sizeof (*w)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (end && !j->ending) {
        j->ending = true;
        if (j->child)
            (void) child_send (j->child, DRMSG_END, json_object (), NULL, 0);
    }
    else if (j->child)
        (void) child_send (j->child, DRMSG_FLUSH,
                           json_pack ("{s:I}", "id", (json_int_t) c->req_id),
                           NULL, 0);
    w->c = c;
    w->msgid = c->req_id;
    w->deadline_ms = tier_now_ms () + (timeout > 0 ? timeout : 0);
    w->next = j->waiters;
    j->waiters = w;
    c->waiting++;
    if (j->ending && !j->child && (j->ended || j->damaged))
        bjob_finish (a, j);
    return RPC_DEFERRED;
}

void bcache_tick (struct agent *a)
{
    int64_t now = tier_now_ms ();
    tier_error_t e;

    for (struct bjob *j = bjobs, *next; j; j = next) {
        next = j->next;
        /* a flush waiter (not end) is answered once the log is empty */
        if (!j->ending && j->used == 0 && j->waiters)
            answer_waiters (a, j, true);
        else
            answer_waiters (a, j, false);
        if (!j->child && j->restart_ms && now >= j->restart_ms) {
            j->restart_ms = 0;
            if (j->starts >= BCACHE_RESTARTS_MAX) {
                j->damaged = true;
                (void) snprintf (j->damage, sizeof (j->damage),
                                 "its drain ended %d times", j->starts);
                tier_log (LOG_ERR,
                          "job %u: its drain ended %d times: its "
                          "log is kept in %s/.blog/%s",
                          j->job_id, j->starts, a->conf->nvdimm_dir, j->name);
                if (j->ending)
                    bjob_finish (a, j);
            }
            else if (drain_start (a, j, &e) < 0) {
                tier_log (LOG_ERR, "job %u: its drain: %s", j->job_id, e.text);
                j->restart_ms = now + 5000;
            }
        }
    }
}

void bcache_conn_gone (struct agent *a, struct conn *c)
{
    (void) a;
    for (struct bjob *j = bjobs; j; j = j->next)
        for (struct bwaiter **pp = &j->waiters; *pp;) {
            struct bwaiter *w = *pp;
            if (w->c == c) {
                *pp = w->next;
                c->waiting--;
                free (w);
            }
            else
                pp = &w->next;
        }
}

json_t *bcache_status_json (struct agent *a, uid_t uid)
{
    json_t *arr = json_array ();

    for (struct bjob *j = bjobs; j && arr; j = j->next) {
        json_t *o;
        if (!agent_privileged (a, uid) && uid != j->uid)
            continue;
        o = json_pack ("{s:I s:s s:I s:I s:I s:I s:i s:b}", "job_id",
                       (json_int_t) j->job_id, "user", j->user, "window",
                       (json_int_t) j->capacity, "pending",
                       (json_int_t) j->used, "records", (json_int_t) j->records,
                       "bytes", (json_int_t) j->bytes, "files", j->nfiles,
                       "draining", j->child != NULL);
        if (o && j->fail_errno)
            json_object_set_new (o, "failed",
                                 json_pack ("{s:i s:s}", "errno", j->fail_errno,
                                            "error", j->fail_error));
        if (o && j->damaged)
            json_object_set_new (o, "damaged", json_string (j->damage));
        if (o)
            json_array_append_new (arr, o);
    }
    return arr;
}

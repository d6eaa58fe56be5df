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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/copy.h"
#include "lib/jobns.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "agent.h"

#define STAGE_ITEMS_MAX 64
#define GROUPS_MAX 256

struct stage_req {
    uint32_t job_id;
    uid_t uid;
    gid_t gid;
    gid_t groups[GROUPS_MAX];
    int ngroups;
    int nitems;
    char items[STAGE_ITEMS_MAX][PATH_MAX];
};

static int64_t now_ms (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* stage.status, replaced atomically (the stager is root). */
static void write_status (const struct tier_conf *conf, uint32_t job,
                          const char *state, uint64_t done, uint64_t total,
                          uint64_t files, uint64_t gfs, int64_t ms,
                          const char *err)
{
    json_t *o = json_pack ("{s:s s:I s:I s:I s:I s:I s:s}", "state", state,
                           "done", (json_int_t) done,
                           "total", (json_int_t) total,
                           "files", (json_int_t) files,
                           "gfs", (json_int_t) gfs,
                           "ms", (json_int_t) ms, "error", err ? err : "");
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    char tmp[64];

    json_decref (o);
    if (!s)
        return;
    (void) snprintf (tmp, sizeof (tmp), "stage.status.%d", (int) getpid ());
    if (tier_ns_write (conf->namespace_dir, job, tmp, s) == 0) {
        char a[PATH_MAX], b[PATH_MAX];
        (void) snprintf (a, sizeof (a), "%s/%u/%s", conf->namespace_dir, job,
                         tmp);
        (void) snprintf (b, sizeof (b), "%s/%u/stage.status",
                         conf->namespace_dir, job);
        (void) rename (a, b);
    }
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
    int64_t t = now_ms ();
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
 *   T total | P done | D files bytes | E message
 */
/* A file input through the node's stage cache: NvdimmDir/.stagecache/UID/
 * keyed by the source's version (inode, size, mtime, ctime).  Tasks of a
 * batch staging the same file on a node copy it once (the others wait on
 * the key's lock, then hard-link the copy into their own stage directory).
 */
static int cached_copy (int cachefd, int srcfd, const struct stat *st,
                        int dstfd, const char *base,
                        const struct tier_copy_opts *opts,
                        struct tier_copy_result *res, bool *hit,
                        tier_error_t *error)
{
    char key[160], lock[170];
    int lfd, rc;

    *hit = false;
    if (cachefd < 0)
        return tier_copy_fd (srcfd, dstfd, base, opts, res, error);
    (void) snprintf (key, sizeof (key), "%llx-%llx-%lld.%09ld-%lld.%09ld",
                     (unsigned long long) st->st_ino,
                     (unsigned long long) st->st_size,
                     (long long) st->st_mtim.tv_sec, st->st_mtim.tv_nsec,
                     (long long) st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
    (void) snprintf (lock, sizeof (lock), "%s.lock", key);
    if ((lfd = openat (cachefd, lock, O_RDWR | O_CREAT | O_CLOEXEC
                       | O_NOFOLLOW, 0600)) < 0 || flock (lfd, LOCK_EX) < 0) {
        if (lfd >= 0)
            close (lfd);
        return tier_copy_fd (srcfd, dstfd, base, opts, res, error);
    }
    if (linkat (cachefd, key, dstfd, base, 0) == 0) {
        *hit = true;
        res->files = 1;
        res->bytes = (uint64_t) st->st_size;
        rc = 0;
    }
    else if ((rc = tier_copy_fd (srcfd, dstfd, base, opts, res, error)) == 0)
        (void) linkat (dstfd, base, cachefd, key, 0);
    close (lfd);
    return rc;
}

static void copier (const struct tier_conf *conf, const struct stage_req *r,
                    const int *dstfds, int cachefd, int fd)
{
    int srcfds[STAGE_ITEMS_MAX];
    struct stat sts[STAGE_ITEMS_MAX];
    uint64_t total = 0, files = 0, bytes = 0, gfs = 0;
    struct progress prog = { .fd = fd };
    char line[PATH_MAX + 128];
    int n;

    if (setgroups ((size_t) r->ngroups, r->groups) < 0
        || setresgid (r->gid, r->gid, r->gid) < 0
        || setresuid (r->uid, r->uid, r->uid) < 0) {
        n = snprintf (line, sizeof (line), "E cannot take uid %u\n",
                      (unsigned) r->uid);
        (void) write (fd, line, n);
        _exit (1);
    }
    for (int k = 0; k < r->nitems; k++) {
        const char *p = r->items[k], *root = NULL, *rel;
        int rootfd;

        for (int i = 0; i < conf->allowed_roots_count; i++)
            if (tier_path_under (p, conf->allowed_roots[i])) {
                root = conf->allowed_roots[i];
                break;
            }
        if (!root) {
            n = snprintf (line, sizeof (line), "E %s: outside the "
                          "directories tier may act on (AllowedRoots)\n", p);
            (void) write (fd, line, n);
            _exit (1);
        }
        rel = tier_path_strip (p, root);
        srcfds[k] = -1;
        if ((rootfd = open (root, O_PATH | O_DIRECTORY | O_CLOEXEC)) >= 0) {
            srcfds[k] = tier_path_open_beneath (rootfd, rel, O_RDONLY
                                                | O_NOCTTY, 0, 0);
            close (rootfd);
        }
        if (srcfds[k] < 0 || fstat (srcfds[k], &sts[k]) < 0) {
            n = snprintf (line, sizeof (line), "E %s: %s\n", p,
                          errno == EXDEV || errno == ELOOP
                          ? "a symlink or '..' leads out of its root"
                          : strerror (errno));
            (void) write (fd, line, n);
            _exit (1);
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
    n = snprintf (line, sizeof (line), "T %llu\n", (unsigned long long) total);
    (void) write (fd, line, n);
    for (int k = 0; k < r->nitems; k++) {
        struct tier_copy_opts opts = {
            .flags = TIER_COPY_NOSYNC | TIER_COPY_NOREPLACE,
            .progress = on_progress, .progress_arg = &prog,
        };
        struct tier_copy_result res;
        tier_error_t error;
        const char *base = strrchr (r->items[k], '/') + 1;
        int rc;

        bool hit = false;

        memset (&res, 0, sizeof (res));
        prog.base = bytes;
        if (S_ISREG (sts[k].st_mode))
            rc = cached_copy (cachefd, srcfds[k], &sts[k], dstfds[k], base,
                              &opts, &res, &hit, &error);
        else
            rc = tier_copy_tree (srcfds[k], dstfds[k], &opts, &res, &error);
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
    }
    n = snprintf (line, sizeof (line), "D %llu %llu %llu\n",
                  (unsigned long long) files, (unsigned long long) bytes,
                  (unsigned long long) gfs);
    (void) write (fd, line, n);
    _exit (0);
}

/* The stager: root, its own process group. */
static void stager (const struct tier_conf *conf, struct stage_req *r)
{
    int dstfds[STAGE_ITEMS_MAX], p[2], rootfd, jobfd, stfd, cachefd;
    char name[32], buf[8192], err[PATH_MAX + 128] = "";
    uint64_t total = 0, done = 0, files = 0, gfs = 0;
    size_t got = 0;
    int64_t t0 = now_ms ();
    bool ok = false;
    tier_error_t error;
    pid_t pid;
    int status;

    (void) setpgid (0, 0);
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
        (void) snprintf (name, sizeof (name), "%d", k);
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
    if (pipe2 (p, O_CLOEXEC) < 0 || (pid = fork ()) < 0) {
        write_status (conf, r->job_id, "failed", 0, 0, 0, 0, 0, "fork failed");
        _exit (1);
    }
    if (pid == 0) {
        close (p[0]);
        close (rootfd);
        copier (conf, r, dstfds, cachefd, p[1]);
    }
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
                gfs = strtoull (end, NULL, 10);
                ok = true;
            }
            else if (buf[0] == 'E')
                (void) snprintf (err, sizeof (err), "%.4000s", buf + 2);
            if (buf[0] != 'D' && buf[0] != 'E')
                write_status (conf, r->job_id, "copying", done, total, files,
                              gfs, now_ms () - t0, NULL);
            got -= (nl + 1 - buf);
            memmove (buf, nl + 1, got + 1);
        }
    }
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    ok = ok && WIFEXITED (status) && WEXITSTATUS (status) == 0;
    if (!ok && !err[0])
        (void) snprintf (err, sizeof (err), "the copy was interrupted");
    write_status (conf, r->job_id, ok ? "done" : "failed", done, total, files,
                  gfs, now_ms () - t0, ok ? NULL : err);
    _exit (ok ? 0 : 1);
}

json_t *op_stage_in (struct agent *a, struct conn *c, json_t *req,
                     tier_error_t *error)
{
    static struct stage_req r;
    json_int_t job_id = 0, uid = -1, gid = -1;
    const char *user = NULL;
    json_t *items = NULL, *it;
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
    /* once per job: a second request (another step, the prolog and the
     * first step) finds the status */
    if (tier_ns_read (a->conf->namespace_dir, r.job_id, "stage.status", path,
                      sizeof (path)) == 0)
        return json_pack ("{s:I s:b}", "job_id", job_id, "started", 0);
    if (!(pw = getpwuid (r.uid)) || strcmp (pw->pw_name, user)) {
        errno = EINVAL;
        tier_errprintf (error, "uid %u is not %s", (unsigned) r.uid, user);
        return NULL;
    }
    r.ngroups = GROUPS_MAX;
    if (getgrouplist (pw->pw_name, r.gid, r.groups, &r.ngroups) < 0) {
        errno = E2BIG;
        tier_errprintf (error, "too many groups for %s", user);
        return NULL;
    }
    (void) snprintf (path, sizeof (path), "%s/%u", a->conf->namespace_dir,
                     r.job_id);
    (void) mkdir (path, 0700);
    write_status (a->conf, r.job_id, "queued", 0, 0, 0, 0, 0, NULL);
    if ((pid = fork ()) < 0) {
        tier_errprintf (error, "fork: %s", strerror (errno));
        return NULL;
    }
    if (pid == 0)
        stager (a->conf, &r);
    (void) snprintf (pidbuf, sizeof (pidbuf), "%d", (int) pid);
    (void) tier_ns_write (a->conf->namespace_dir, r.job_id, "stage.pid",
                          pidbuf);
    tier_log (LOG_INFO, "job %u: staging in %d item(s)", r.job_id, r.nitems);
    return json_pack ("{s:I s:b}", "job_id", job_id, "started", 1);
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

/* At job end: stop a stage-in still running (scancel), and count it. */
void stage_job_end (struct agent *a, const struct store_job *job)
{
    char buf[1024];
    json_error_t jerr;
    const char *state;
    json_t *o;

    if (tier_ns_read (a->conf->namespace_dir, job->job_id, "stage.status",
                      buf, sizeof (buf)) < 0
        || !(o = json_loads (buf, 0, &jerr)))
        return;
    state = json_string_value (json_object_get (o, "state"));
    if (!state || (strcmp (state, "done") && strcmp (state, "failed"))) {
        char pidbuf[32];
        if (tier_ns_read (a->conf->namespace_dir, job->job_id, "stage.pid",
                          pidbuf, sizeof (pidbuf)) == 0) {
            pid_t pid = (pid_t) atoi (pidbuf);
            if (pid > 1 && kill (-pid, SIGKILL) == 0)
                tier_log (LOG_NOTICE, "job %u ended during stage-in: copies "
                          "stopped", job->job_id);
        }
    }
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
    }
    else
        ctr_add (a, job, TIER_ROLE_ENDPOINT, TIER_CTR_FAILURES, 1);
    json_decref (o);
    drop_cache (a, job);
}

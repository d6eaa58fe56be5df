/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* keep.c - at job end: count what the job left in its scratch, and keep it
 * on the GFS when its keep says so (the directory's policy, or
 * --tier-keep).
 *
 * Runs in the epilog after the processes left in the job's namespace are
 * killed and before the namespace goes.  For each scratch directory a
 * forked child resolves DIR as the user on the host (the real GFS
 * directory, not the overlay), joins the job's namespace to open the
 * upper layer (a tmpfs that exists only there), then drops to the user's
 * credentials for good and copies the upper layer to
 * DIR/.tier-kept/JOBID/NODE/ (JOBID.RESTART/ for a requeued run of the
 * job) with the copy engine: never replacing a GFS file, whiteouts and
 * other special files skipped.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <slurm/spank.h>

#include "lib/clock.h"
#include "lib/copy.h"
#include "lib/jobns.h"
#include "lib/usercg.h"
#include "keep.h"
#include "ns.h"
#include "opts.h"

/* Walk the upper layer: regular files and their bytes; a file whose path
 * also exists in the lower was copied up from the GFS.
 */
static void count_tree (int dirfd, int lowerfd, int depth,
                        struct tier_scratch_stats *st)
{
    struct dirent *de;
    DIR *d;
    int fd = dup (dirfd);

    if (fd < 0 || depth > 64 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return;
    }
    while ((de = readdir (d))) {
        struct stat sb, lb;
        if (!strcmp (de->d_name, ".") || !strcmp (de->d_name, ".."))
            continue;
        if (fstatat (dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG (sb.st_mode)) {
            st->files++;
            st->bytes += sb.st_size;
            if (lowerfd >= 0
                && fstatat (lowerfd, de->d_name, &lb, AT_SYMLINK_NOFOLLOW)
                   == 0 && S_ISREG (lb.st_mode)) {
                st->copyups++;
                st->copyup_bytes += lb.st_size;
            }
        }
        else if (S_ISDIR (sb.st_mode)) {
            int sub = openat (dirfd, de->d_name, O_RDONLY | O_DIRECTORY
                              | O_NOFOLLOW | O_CLOEXEC);
            int lsub = lowerfd >= 0
                       ? openat (lowerfd, de->d_name, O_PATH | O_DIRECTORY
                                 | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (sub >= 0) {
                count_tree (sub, lsub, depth + 1, st);
                close (sub);
            }
            if (lsub >= 0)
                close (lsub);
        }
    }
    closedir (d);
}

/* Create name beneath dirfd (as the user); EEXIST is fine if allowed. */
static int user_subdir (int dirfd, const char *name, bool may_exist,
                        tier_error_t *error)
{
    int fd;

    if (mkdirat (dirfd, name, 0755) < 0
        && !(errno == EEXIST && may_exist))
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    if ((fd = openat (dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0)
        return tier_errprintf (error, "%s: %s", name, strerror (errno));
    return fd;
}

void keep_name (uint32_t job_id, uint32_t restart, char *buf, size_t size)
{
    if (restart)
        (void) snprintf (buf, size, "%u.%u", job_id, restart);
    else
        (void) snprintf (buf, size, "%u", job_id);
}

struct child_report {
    struct tier_scratch_stats st;
    int kept_ok;
    char error[TIER_ERROR_MAX];
};

static void child (const struct mount_ctx *m, int k, const char *dir,
                   bool keep, int wfd)
{
    struct child_report r;
    tier_error_t e = { { 0 } };
    char path[PATH_MAX];
    int lowerfd = -1, upfd = -1;

    memset (&r, 0, sizeof (r));
    /* a copy is the user's work: charged to their cgroup, as the agent's
     * children are (lib/usercg.h; the agent made the directories) */
    if (keep) {
        struct tier_usercg u;
        char why[256];
        if (tier_usercg_find (&u, m->conf, false, why, sizeof (why)) > 0)
            (void) tier_usercg_join (&u, m->cred.uid);
    }
    /* the real GFS directory, as the user, on the host */
    if ((lowerfd = ns_resolve_dir (m, "--tier-scratch", dir, &e)) < 0)
        goto out;
    if (tier_ns_enter (m->conf->namespace_dir, m->job_id, &e) < 0)
        goto out;
    (void) snprintf (path, sizeof (path), "%s/%u/%d/upper",
                     m->conf->nvdimm_dir, m->job_id, k);
    if ((upfd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                      | O_CLOEXEC)) < 0) {
        if (errno != ENOENT)
            tier_errprintf (&e, "%s: %s", path, strerror (errno));
        goto out; /* nothing was mounted there */
    }
    count_tree (upfd, lowerfd, 0, &r.st);
    if (keep && r.st.files > 0) {
        struct tier_copy_opts opts = {
            .flags = TIER_COPY_NOREPLACE | TIER_COPY_KEEP_GOING,
            .threads = 2,
        };
        struct tier_copy_result res;
        char name[32];
        int kept, jfd, nfd;

        /* for good: nothing below runs with root's rights, and the
         * copy gets exactly the job's groups */
        if (tier_cred_drop (&m->cred, TIER_CRED_DATA) < 0) {
            tier_errprintf (&e, "cannot drop to uid %u",
                            (unsigned) m->cred.uid);
            goto out;
        }
        if ((kept = user_subdir (lowerfd, ".tier-kept", true, &e)) < 0)
            goto out;
        keep_name (m->job_id, m->restart, name, sizeof (name));
        jfd = user_subdir (kept, name, true, &e);
        close (kept);
        if (jfd < 0)
            goto out;
        nfd = user_subdir (jfd, m->conf->node, false, &e);
        close (jfd);
        if (nfd < 0)
            goto out;
        memset (&res, 0, sizeof (res));
        if (tier_copy_tree (upfd, nfd, &opts, &res, &e) == 0)
            r.kept_ok = 1;
        r.st.kept_files = res.files;
        r.st.kept_bytes = res.bytes;
        close (nfd);
    }
out:
    if (e.text[0])
        (void) snprintf (r.error, sizeof (r.error), "%s", e.text);
    if (write (wfd, &r, sizeof (r)) != (ssize_t) sizeof (r)) {
        /* the parent sees a short read */
    }
    _exit (e.text[0] ? 1 : 0);
}

/* The report of the keep child pid on fd, within timeout_s: the child
 * runs as the job's user, who may stop it (SIGSTOP) or make it slow, so
 * one that is stopped or past its time is killed, and one that does not
 * end even then (a GFS request that never returns) is left behind.
 * Returns the bytes read (sizeof *r when whole); why says what went
 * wrong ("" if nothing).
 */
static ssize_t wait_report (pid_t pid, int fd, struct child_report *r,
                            uint64_t timeout_s, char *why, size_t size)
{
    int64_t now = tier_now_ms ();
    int64_t deadline = now + (int64_t) timeout_s * 1000, killed = 0;
    ssize_t got = 0, n;
    bool eof = false, reaped = false;
    int status;

    why[0] = '\0';
    while (!reaped) {
        struct pollfd p = { .fd = fd, .events = POLLIN };

        if (!eof && poll (&p, 1, 200) > 0) {
            n = read (fd, (char *) r + got, sizeof (*r) - (size_t) got);
            if (n > 0)
                got += n;
            else if (n == 0 || errno != EINTR)
                eof = true;
        }
        else if (eof) {
            struct timespec ts = { 0, 100 * 1000 * 1000 };
            nanosleep (&ts, NULL);
        }
        pid_t w = waitpid (pid, &status, WNOHANG | WUNTRACED);
        if (w == pid && WIFSTOPPED (status) && !killed) {
            (void) snprintf (why, size,
                             "the copy was stopped (signal %d, "
                             "from outside) and is killed",
                             WSTOPSIG (status));
            (void) kill (pid, SIGKILL);
            killed = tier_now_ms ();
        }
        else if (w == pid || (w < 0 && errno == ECHILD))
            reaped = true;
        now = tier_now_ms ();
        if (!killed && now >= deadline) {
            (void) snprintf (why, size,
                             "the copy ran past KeepTimeout "
                             "(%llus) and is killed",
                             (unsigned long long) timeout_s);
            (void) kill (pid, SIGKILL);
            killed = now;
        }
        /* killed but not ending: stuck in the kernel; left behind */
        if (killed && now - killed > 5000)
            break;
    }
    return got;
}

bool keep_item (enum tier_keep item, enum tier_keep dflt, int failed, bool *ask)
{
    enum tier_keep k = item != TIER_KEEP_UNSET ? item : dflt;

    *ask = false;
    if (k == TIER_KEEP_ALWAYS)
        return true;
    if (k != TIER_KEEP_ON_FAILURE)
        return false;
    if (failed < 0)
        *ask = true;
    return failed > 0;
}

void keep_announce (const char *scratch, enum tier_keep dflt, bool failed,
                    uint32_t job_id, uint32_t restart)
{
    char item[PATH_MAX + 64], dir[PATH_MAX + 64], name[32];
    const char *p = scratch;
    enum tier_keep k;
    uint64_t size;
    tier_error_t e;
    bool ask;

    keep_name (job_id, restart, name, sizeof (name));
    while ((p = opts_next_item (p, item, sizeof (item))))
        if (opts_split_item (item, dir, sizeof (dir), &size, &k, &e) == 0
            && keep_item (k, dflt, failed, &ask))
            slurm_spank_log ("tier: keep=%s: the pipeline data of %s is "
                             "kept in %s/.tier-kept/%s/NODE/ for each node "
                             "of the job",
                             opts_keep_name (k != TIER_KEEP_UNSET ? k : dflt),
                             dir, dir, name);
}

int keep_scratch_finish (spank_t sp, const struct tier_conf *conf,
                         uint32_t job_id, uint32_t restart, const char *scratch,
                         enum tier_keep dflt, bool (*failed) (uint32_t),
                         struct tier_scratch_stats *st, tier_error_t *error)
{
    struct mount_ctx m = { .conf = conf, .job_id = job_id,
                           .scratch = scratch, .restart = restart };
    char item[PATH_MAX + 64];
    const char *p = scratch;
    int k = 0, rc = 0, job_failed = -1;

    memset (st, 0, sizeof (*st));
    if (!scratch || !*scratch || !tier_ns_exists (conf->namespace_dir,
                                                  job_id))
        return 0;
    if (ns_job_cred (sp, &m.cred, error) < 0) /* the epilog: from NSS */
        return -1;
    /* nothing may write while we look */
    (void) tier_ns_kill (conf->namespace_dir, job_id, 2000);
    while ((p = opts_next_item (p, item, sizeof (item)))) {
        char dir[PATH_MAX + 64];
        struct child_report r;
        enum tier_keep ik;
        uint64_t size;
        tier_error_t e;
        char why[128];
        int pfd[2];
        ssize_t n;
        pid_t pid;
        bool keep, ask;

        if (opts_split_item (item, dir, sizeof (dir), &size, &ik, &e) < 0) {
            k++;
            continue;
        }
        keep = keep_item (ik, dflt, job_failed, &ask);
        if (ask) {
            job_failed = failed && failed (job_id) ? 1 : 0;
            keep = keep_item (ik, dflt, job_failed, &ask);
        }
        if (pipe2 (pfd, O_CLOEXEC) < 0)
            return tier_errprintf (error, "pipe: %s", strerror (errno));
        if ((pid = fork ()) < 0) {
            close (pfd[0]);
            close (pfd[1]);
            return tier_errprintf (error, "fork: %s", strerror (errno));
        }
        if (pid == 0) {
            close (pfd[0]);
            child (&m, k, dir, keep, pfd[1]);
        }
        close (pfd[1]);
        memset (&r, 0, sizeof (r));
        n = wait_report (pid, pfd[0], &r, conf->keep_timeout, why,
                         sizeof (why));
        close (pfd[0]);
        if (why[0]) {
            tier_errprintf (error,
                            "keeping %s: %s; what it copied stays in "
                            "%s/.tier-kept/",
                            dir, why, dir);
            rc = -1;
        }
        else if (n == (ssize_t) sizeof (r)) {
            st->files += r.st.files;
            st->bytes += r.st.bytes;
            st->copyups += r.st.copyups;
            st->copyup_bytes += r.st.copyup_bytes;
            st->kept_dirs += keep && r.st.kept_files ? 1 : 0;
            st->kept_files += r.st.kept_files;
            st->kept_bytes += r.st.kept_bytes;
            if (r.error[0]) {
                tier_errprintf (error, "%s", r.error);
                rc = -1;
            }
        }
        else {
            tier_errprintf (error, "keeping %s: the helper died", dir);
            rc = -1;
        }
        k++;
    }
    return rc;
}

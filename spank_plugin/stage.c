/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage.c - the plugin's side of stage-in (the agent copies: agent/stage.c)
 *
 *   prolog / init_post_opt   expand --tier-stage-in's patterns for this
 *                            job and ask the agent to start copying
 *   task_init_privileged     wait for the copies (progress on stderr),
 *                            then, in the job's namespace and once per job
 *                            and node, bind each copy read-only over its
 *                            GFS path; a missing input fails the job here
 *                            with the path (no drain, no requeue)
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/jobns.h"
#include "lib/tjson.h"
#include "lib/units.h"
#include "ns.h"
#include "opts.h"
#include "spawn.h"
#include "stage.h"

int tier_stage_expand (const char *list, const struct tier_pattern_ctx *ctx,
                       char items[][PATH_MAX], int max, tier_error_t *error)
{
    char item[PATH_MAX + 64];
    const char *p = list;
    int n = 0;

    while ((p = tier_opt_next_item (p, item, sizeof (item)))) {
        tier_error_t e;
        if (n == max)
            return tier_errprintf (error, "--tier-stage-in: more than %d "
                                   "items", max);
        if (tier_pattern_expand (item, ctx, items[n], PATH_MAX, &e) < 0)
            return tier_errprintf (error, "--tier-stage-in: %s", e.text);
        n++;
    }
    return n;
}

int tier_stage_start (const struct tier_conf *conf, uint32_t job_id,
                      uid_t uid, gid_t gid, char items[][PATH_MAX], int n,
                      tier_error_t *error)
{
    static char body[TIER_STAGE_ITEMS_MAX * (PATH_MAX + 8) + 256];
    struct passwd pw, *pwp = NULL;
    char buf[4096], *reply = NULL;
    struct tier_jw w;
    int rc;

    if (getpwuid_r (uid, &pw, buf, sizeof (buf), &pwp) != 0 || !pwp)
        return tier_errprintf (error, "uid %u has no passwd entry",
                               (unsigned) uid);
    tier_jw_init (&w, body, sizeof (body));
    tier_jw_str (&w, "op", "job.stage_in");
    tier_jw_uint (&w, "job_id", job_id);
    tier_jw_uint (&w, "uid", uid);
    tier_jw_uint (&w, "gid", gid);
    tier_jw_str (&w, "user", pw.pw_name);
    tier_jw_arr_begin (&w, "items");
    for (int i = 0; i < n; i++)
        tier_jw_str (&w, NULL, items[i]);
    tier_jw_arr_end (&w);
    if (tier_jw_finish (&w) < 0)
        return tier_errprintf (error, "stage-in request too large");
    rc = tier_agent_call (conf, body, &reply, (int) conf->agent_timeout_ms,
                          error);
    free (reply);
    return rc;
}

static int64_t now_s (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

int tier_stage_wait (const struct tier_conf *conf, uint32_t job_id,
                     bool report, bool (*gone) (uint32_t job_id),
                     tier_error_t *error)
{
    int64_t start = now_s (), last = start, checked = start;
    char buf[8192];

    for (;;) {
        char state[32] = "", err[4096] = "";
        uint64_t done = 0, total = 0;
        size_t len;

        if (tier_ns_read (conf->namespace_dir, job_id, "stage.status", buf,
                          sizeof (buf)) == 0) {
            len = strlen (buf);
            (void) tier_jr_get_str (buf, len, "state", state, sizeof (state));
            (void) tier_jr_get_uint (buf, len, "done", &done);
            (void) tier_jr_get_uint (buf, len, "total", &total);
            if (!strcmp (state, "done"))
                return 0;
            if (!strcmp (state, "failed")) {
                (void) tier_jr_get_str (buf, len, "error", err, sizeof (err));
                errno = EIO;
                return tier_errprintf (error, "stage-in failed: %.400s",
                                       err[0] ? err : "unknown error");
            }
        }
        /* a task waiting here may not get scancel's signal: ask */
        if (gone && now_s () - checked >= 3) {
            checked = now_s ();
            if (gone (job_id)) {
                errno = ECANCELED;
                return tier_errprintf (error, "the job was cancelled during "
                                       "stage-in");
            }
        }
        if ((uint64_t) (now_s () - start) > conf->stage_in_timeout) {
            errno = ETIMEDOUT;
            return tier_errprintf (error, "stage-in did not finish within "
                                   "StageInTimeout (%llu s)",
                                   (unsigned long long)
                                   conf->stage_in_timeout);
        }
        if (report && now_s () - last >= 10) {
            char a[32], b[32];
            last = now_s ();
            slurm_spank_log ("tier: staging in: %s of %s (%.0f%%), %llds",
                             tier_size_format (done, a, sizeof (a)),
                             tier_size_format (total, b, sizeof (b)),
                             total ? 100.0 * (double) done / (double) total
                                   : 0.0,
                             (long long) (last - start));
        }
        {
            struct timespec ts = { 0, 200 * 1000 * 1000 };
            nanosleep (&ts, NULL);
        }
    }
}

/* In the job's namespace (the calling task joined it), as root: bind each
 * staged copy read-only over its GFS path, once per job and node.
 */
int tier_stage_bind (const struct tier_conf *conf, uint32_t job_id,
                     uid_t uid, gid_t gid, char items[][PATH_MAX], int n,
                     tier_error_t *error)
{
    struct mount_ctx m = { .conf = conf, .job_id = job_id };
    int lockfd, rc = 0;

    if (tier_mount_ctx_user (&m, uid, gid, error) < 0)
        return -1;
    if ((lockfd = tier_ns_lock (conf->namespace_dir, job_id, error)) < 0)
        return -1;
    if (tier_ns_marked (conf->namespace_dir, job_id, "staged"))
        goto out;
    for (int k = 0; k < n && rc == 0; k++) {
        char src[PATH_MAX + 64];
        const char *base = strrchr (items[k], '/') + 1;
        struct stat st;
        int sfd, tfd;

        /* the copy: a file named like the input, or the tree's root */
        bool is_dir = false;
        (void) snprintf (src, sizeof (src), "%s/%u/stage/%d/%s",
                         conf->nvdimm_dir, job_id, k, base);
        if (lstat (src, &st) < 0 || !S_ISREG (st.st_mode)) {
            (void) snprintf (src, sizeof (src), "%s/%u/stage/%d",
                             conf->nvdimm_dir, job_id, k);
            is_dir = true;
        }
        if ((sfd = open (src, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            rc = tier_errprintf (error, "stage-in: the copy of %s is "
                                 "missing", items[k]);
            break;
        }
        /* the target, as the user sees it in the job, beneath its allowed
         * root (never a symlink out of it: a bind over /etc/passwd in a
         * job with setuid binaries would give root), of the same type */
        if ((tfd = tier_resolve_path (&m, "--tier-stage-in", items[k],
                                      is_dir ? TIER_RESOLVE_DIR : 0,
                                      error)) < 0) {
            close (sfd);
            rc = -1;
            break;
        }
        if (fstat (tfd, &st) < 0
            || (is_dir ? !S_ISDIR (st.st_mode) : !S_ISREG (st.st_mode))) {
            close (sfd);
            close (tfd);
            errno = EINVAL;
            rc = tier_errprintf (error, "stage-in: %s changed type since it "
                                 "was staged", items[k]);
            break;
        }
        if (tier_bind_ro (sfd, tfd, error) < 0) {
            char msg[TIER_ERROR_MAX];
            (void) snprintf (msg, sizeof (msg), "%s", error->text);
            rc = tier_errprintf (error, "stage-in: %s: %s", items[k], msg);
        }
        close (sfd);
        close (tfd);
    }
    if (rc == 0)
        (void) tier_ns_mark (conf->namespace_dir, job_id, "staged");
out:
    close (lockfd);
    return rc;
}

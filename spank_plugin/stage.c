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
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/jobns.h"
#include "lib/paths.h"
#include "lib/proc.h"
#include "lib/tjson.h"
#include "lib/units.h"
#include "lib/url.h"
#include "ns.h"
#include "opts.h"
#include "spawn.h"
#include "stage.h"

/* An expanded URL=PATH item checked again (the submit side checked a
 * sample expansion; a job name may expand to what no URL may hold), its
 * path normalised.
 */
static int url_item (char *item, tier_error_t *error)
{
    char url[PATH_MAX], path[PATH_MAX], norm[PATH_MAX];
    struct tier_url *u;
    tier_error_t e;

    if (tier_url_item_split (item, url, sizeof (url), path,
                             sizeof (path)) < 0
        || tier_path_normalize (path, norm, sizeof (norm)) < 0
        || !strcmp (norm, "/")) {
        char shown[256];
        tier_url_shown (item, shown, sizeof (shown));
        errno = EINVAL;
        return tier_errprintf (error, "--tier-stage-in: '%s': not "
                               "URL=/PATH", shown);
    }
    if (!(u = tier_url_parse_input (url, &e)))
        return tier_errprintf (error, "--tier-stage-in: %s", e.text);
    tier_url_destroy (u);
    if (snprintf (item, PATH_MAX, "%s=%s", url, norm) >= PATH_MAX) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "--tier-stage-in: an item is longer "
                               "than %d bytes", PATH_MAX - 1);
    }
    return 0;
}

int stage_expand (const char *list, const struct tier_pattern_ctx *ctx,
                  char items[][PATH_MAX], int max, tier_error_t *error)
{
    char item[PATH_MAX + 64];
    const char *p = list;
    int n = 0;

    while ((p = opts_next_item (p, item, sizeof (item)))) {
        tier_error_t e;
        if (n == max)
            return tier_errprintf (error, "--tier-stage-in: more than %d "
                                   "items", max);
        if (opts_pattern_expand (item, ctx, items[n], PATH_MAX, &e) < 0)
            return tier_errprintf (error, "--tier-stage-in: %s", e.text);
        if (tier_url_item_is_url (items[n]) && url_item (items[n], error) < 0)
            return -1;
        n++;
    }
    return n;
}

/* The agent's answer: the stage directory of each item, the parts. */
static int read_plan (const char *reply, int n, struct tier_stage_plan *plan,
                      tier_error_t *error)
{
    size_t len = strlen (reply), vlen;
    struct tier_jr_iter it;
    const char *val, *v;
    int64_t parts = 1, k;
    int i = 0;

    for (i = 0; i < n; i++)
        plan->index[i] = i;             /* an older agent's answer */
    plan->parts = 1;
    if (tier_jr_get_raw (reply, len, "index", &val, &vlen) < 0)
        return 0;
    if (tier_jr_get_int (reply, len, "parts", &parts) < 0 || parts < 1
        || parts > TIER_STAGE_ITEMS_MAX
        || tier_jr_iter_init (&it, val, vlen) < 0)
        goto error;
    for (i = 0; i < n; i++) {
        if (tier_jr_next (&it, NULL, NULL, &v, &vlen) != 1
            || tier_jr_value_int (v, vlen, &k) < 0 || k < 0
            || k >= TIER_STAGE_ITEMS_MAX)
            goto error;
        plan->index[i] = (int) k;
    }
    plan->parts = (int) parts;
    return 0;
error:
    errno = EPROTO;
    return tier_errprintf (error, "the agent's stage-in plan is not valid");
}

int stage_start (const struct tier_conf *conf, const char *conf_path,
                 uint32_t job_id, uid_t uid, gid_t gid, char items[][PATH_MAX],
                 int n, struct tier_stage_plan *plan, tier_error_t *error)
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
    rc = spawn_call_sure (conf, conf_path, job_id, "stage-in", body, &reply,
                          error);
    if (rc == 0 && plan)
        rc = read_plan (reply, n, plan, error);
    free (reply);
    return rc;
}

/* Part p's stager is gone (killed: the OOM killer, an admin) with its
 * part unfinished: it wrote no outcome, and none will come.  Its pid and
 * start time are in stage[.P].pid: a pid the kernel gave to another
 * process meanwhile has another start, so the stager is gone all the
 * same.  The stager writes its outcome before it exits: the caller reads
 * the status again before it believes this. */
static bool stager_gone (const struct tier_conf *conf, uint32_t job_id, int p,
                         long *pid)
{
    char name[48], buf[64];
    unsigned long long start = 0;

    tier_ns_part_name (p, TIER_NS_STAGE_PID, name, sizeof (name));
    if (tier_ns_read (conf->namespace_dir, job_id, name, buf, sizeof (buf)) < 0
        || sscanf (buf, "%ld %llu", pid, &start) != 2 || *pid <= 1
        || *pid > INT32_MAX || start == 0)
        return false;
    return tier_proc_start ((pid_t) *pid) != start;
}

/* Ask the agent to start part p's stager again (it ended unfinished:
 * op_stage_restart); 0 if it did, or another did, or the part has its
 * outcome meanwhile. */
static int stager_restart (const struct tier_conf *conf, const char *conf_path,
                           uint32_t job_id, int p, long pid,
                           tier_error_t *error)
{
    char body[256], *reply = NULL;
    int rc;

    (void) snprintf (body, sizeof (body),
                     "{\"op\":\"job.stage_restart\",\"job_id\":%u,"
                     "\"part\":%d,\"pid\":%ld}",
                     job_id, p, pid);
    rc = spawn_call_sure (conf, conf_path, job_id, "stage-in restart", body,
                          &reply, error);
    free (reply);
    return rc;
}

int stage_wait (const struct tier_conf *conf, const char *conf_path,
                uint32_t job_id, int parts, bool report,
                bool (*gone) (uint32_t job_id), tier_error_t *error)
{
    int64_t start = (tier_now_ms () / 1000), last = start, checked = start;
    char buf[8192];
    int dead = -1; /* a part whose stager was found gone, read again */
    long dead_pid = 0;

    for (;;) {
        uint64_t done = 0, total = 0;
        bool queued = false, check, again = false;
        int finished = 0;

        /* every 3 s: the job cancelled, a stager gone */
        check = (tier_now_ms () / 1000) - checked >= 3;
        if (check)
            checked = (tier_now_ms () / 1000);

        /* every part: the first failure fails the job; the progress is
         * the sum */
        for (int p = 0; p < parts; p++) {
            char name[48], state[32] = "", err[4096] = "";
            uint64_t d = 0, t = 0;
            bool q = false;
            size_t len;

            tier_ns_part_name (p, TIER_NS_STAGE_STATUS, name, sizeof (name));
            if (tier_ns_read (conf->namespace_dir, job_id, name, buf,
                              sizeof (buf)) < 0)
                continue;
            len = strlen (buf);
            (void) tier_jr_get_str (buf, len, "state", state, sizeof (state));
            (void) tier_jr_get_uint (buf, len, "done", &d);
            (void) tier_jr_get_uint (buf, len, "total", &t);
            (void) tier_jr_get_bool (buf, len, "queued", &q);
            done += d;
            total += t;
            queued = queued || q;
            if (!strcmp (state, "done"))
                finished++;
            else if (!strcmp (state, "failed")) {
                (void) tier_jr_get_str (buf, len, "error", err, sizeof (err));
                errno = EIO;
                return tier_errprintf (error, "stage-in failed: %.400s",
                                       err[0] ? err : "unknown error");
            }
            else if (dead == p) {
                /* gone before this reading, and still unfinished: the
                 * agent starts it again (a few times) */
                tier_error_t e;

                if (stager_restart (conf, conf_path, job_id, p, dead_pid, &e)
                    < 0) {
                    errno = EIO;
                    return tier_errprintf (error,
                                           "stage-in failed: its stager (pid "
                                           "%ld) ended before the stage-in "
                                           "did (killed?), and was not "
                                           "started again: %.300s; resubmit "
                                           "the job",
                                           dead_pid, e.text);
                }
                if (report)
                    slurm_spank_log ("tier: stage-in: its stager (pid %ld) "
                                     "ended before the stage-in did "
                                     "(killed?); it starts again",
                                     dead_pid);
                dead = -1;
            }
            else if (check && dead < 0
                     && stager_gone (conf, job_id, p, &dead_pid)) {
                dead = p; /* read its status once more, then believe it */
                again = true;
            }
        }
        if (finished == parts)
            return 0;
        if (again)
            continue; /* at once: that part's status again */
        /* a task waiting here may not get scancel's signal: ask */
        if (gone && check) {
            if (gone (job_id)) {
                errno = ECANCELED;
                return tier_errprintf (error, "the job was cancelled during "
                                       "stage-in");
            }
        }
        if ((uint64_t) ((tier_now_ms () / 1000) - start)
            > conf->stage_in_timeout) {
            errno = ETIMEDOUT;
            return tier_errprintf (error, "stage-in did not finish within "
                                   "StageInTimeout (%llu s)",
                                   (unsigned long long)
                                   conf->stage_in_timeout);
        }
        if (report && (tier_now_ms () / 1000) - last >= 10) {
            char a[32], b[32];
            last = (tier_now_ms () / 1000);
            /* queued: the node's GFS streams are all in use (GfsStreams) */
            slurm_spank_log ("tier: staging in: %s%s of %s (%.0f%%), %llds",
                             queued ? "queued for a GFS stream, " : "",
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

/* Is tfd, the bind target resolved now, the file or tree that stage-in
 * copied?  Its copier wrote down where that was, symlinks resolved
 * (NvdimmDir/JOBID/stage/INDEX.src, root's).  Had the user put a symlink
 * in the input's place since (or in place of a directory above it), the
 * target is another file, perhaps one the user may not write (a bind of
 * the user's content over a set-user-ID program's file would give root):
 * refused.  A file replaced at the same path is the same input. */
static int same_source (const struct tier_conf *conf, uint32_t job_id,
                        int index, const char *target, int tfd,
                        tier_error_t *error)
{
    char name[PATH_MAX + 64], was[PATH_MAX], now[PATH_MAX];
    ssize_t n = -1, m;
    int fd;

    (void) snprintf (name, sizeof (name), "%s/%u/stage/%d.src",
                     conf->nvdimm_dir, job_id, index);
    if ((fd = open (name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
        n = read (fd, was, sizeof (was) - 1);
        close (fd);
    }
    if (n <= 0) {
        errno = ENOENT;
        return tier_errprintf (error,
                               "stage-in: %s: no record of where its "
                               "copy came from (%s): not bound",
                               target, name);
    }
    was[n] = '\0';
    (void) snprintf (name, sizeof (name), "/proc/self/fd/%d", tfd);
    if ((m = readlink (name, now, sizeof (now) - 1)) < 0)
        return tier_errprintf (error, "stage-in: %s: %s", target,
                               strerror (errno));
    now[m] = '\0';
    if (strcmp (was, now)) {
        errno = EXDEV;
        return tier_errprintf (error,
                               "stage-in: %s now leads to %s, and "
                               "its copy was made from %s (a symlink or a "
                               "rename since): not bound",
                               target, now, was);
    }
    return 0;
}

/* In the job's namespace (the calling task joined it), as root: bind each
 * staged copy read-only over its GFS path, once per job and node.
 */
int stage_bind (spank_t sp, const struct tier_conf *conf, uint32_t job_id,
                char items[][PATH_MAX], const int *index, int n,
                tier_error_t *error)
{
    struct mount_ctx m = { .conf = conf, .job_id = job_id };
    int lockfd, rc = 0;

    if (ns_job_cred (sp, &m.cred, error) < 0)
        return -1;
    if ((lockfd = tier_ns_lock (conf->namespace_dir, job_id, error)) < 0)
        return -1;
    if (tier_ns_marked (conf->namespace_dir, job_id, TIER_NS_STAGED))
        goto out;
    for (int k = 0; k < n && rc == 0; k++) {
        char src[PATH_MAX + 64], url[PATH_MAX], path[PATH_MAX];
        const char *target = items[k], *base;
        struct stat st;
        bool is_url = false, is_dir = false;
        int sfd, tfd;

        /* URL=PATH: the object's copy is a file named like PATH */
        if (tier_url_item_is_url (items[k])
            && tier_url_item_split (items[k], url, sizeof (url), path,
                                    sizeof (path)) == 0) {
            target = path;
            is_url = true;
        }
        base = strrchr (target, '/') + 1;
        /* the copy: a file named like the input, or the tree's root */
        (void) snprintf (src, sizeof (src), "%s/%u/stage/%d/%s",
                         conf->nvdimm_dir, job_id, index[k], base);
        if (!is_url && (lstat (src, &st) < 0 || !S_ISREG (st.st_mode))) {
            (void) snprintf (src, sizeof (src), "%s/%u/stage/%d",
                             conf->nvdimm_dir, job_id, index[k]);
            is_dir = true;
        }
        if ((sfd = open (src, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            rc = tier_errprintf (error, "stage-in: the copy of %s is "
                                 "missing", target);
            break;
        }
        /* the target, as the user sees it in the job, beneath its allowed
         * root (never a symlink out of it: a bind over /etc/passwd in a
         * job with set-user-ID binaries would give root), of the same type */
        if ((tfd = ns_resolve_path (&m, "--tier-stage-in", target,
                                    is_dir ? TIER_RESOLVE_DIR : 0, error))
            < 0) {
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
                                 "was staged", target);
            break;
        }
        if (!is_url
            && same_source (conf, job_id, index[k], target, tfd, error) < 0) {
            close (sfd);
            close (tfd);
            rc = -1;
            break;
        }
        if (tier_bind_ro (sfd, tfd, error) < 0) {
            char msg[TIER_ERROR_MAX];
            (void) snprintf (msg, sizeof (msg), "%s", error->text);
            rc = tier_errprintf (error, "stage-in: %s: %s", target, msg);
        }
        close (sfd);
        close (tfd);
    }
    if (rc == 0)
        (void) tier_ns_mark (conf->namespace_dir, job_id, TIER_NS_STAGED);
out:
    close (lockfd);
    return rc;
}

int stage_out_item (const char *item, char *dir, size_t dirsize, char *url,
                    size_t urlsize)
{
    char raw[2 * PATH_MAX];
    uint64_t size;

    if (tier_item_split (item, raw, sizeof (raw), &size, NULL, 0) < 0)
        return -1;
    if (urlsize)
        url[0] = '\0';
    if (!tier_url_out_item_is_url (raw)) {
        if (snprintf (dir, dirsize, "%s", raw) >= (int) dirsize) {
            errno = ENAMETOOLONG;
            return -1;
        }
        return 0;
    }
    return tier_url_out_item_split (raw, dir, dirsize, url, urlsize);
}

/* An expanded DIR=URL item checked again (the submit side checked a
 * sample expansion; a job name may expand to what no URL may hold). */
static int out_url_check (const char *url, tier_error_t *error)
{
    struct tier_url *u;
    tier_error_t e;

    if (!(u = tier_url_parse_output (url, &e)))
        return tier_errprintf (error, "--tier-stage-out: %s", e.text);
    tier_url_destroy (u);
    return 0;
}

int stage_out_dirs (const char *option, const char *policy_dirs,
                    const struct tier_pattern_ctx *ctx, char *out, size_t size,
                    tier_error_t *error)
{
    char item[PATH_MAX + 64], exp[2 * PATH_MAX], esc[4 * PATH_MAX];
    const char *lists[2] = { option, policy_dirs };
    size_t o = 0;

    out[0] = '\0';
    for (int l = 0; l < 2; l++) {
        const char *p = lists[l];
        while (p && (p = tier_list_next (p, item, sizeof (item)))) {
            char raw[2 * PATH_MAX], dir[PATH_MAX], url[PATH_MAX];
            char norm[PATH_MAX];
            uint64_t size0;
            size_t n;
            bool dup = false;
            if (tier_item_split (item, raw, sizeof (raw), &size0, NULL, 0) < 0)
                return tier_errprintf (error, "--tier-stage-out: '%s': "
                                       "invalid", item);
            if (l == 0) {
                tier_error_t e;
                if (opts_pattern_expand (raw, ctx, exp, sizeof (exp), &e) < 0)
                    return tier_errprintf (error, "--tier-stage-out: %s",
                                           e.text);
            }
            else
                (void) snprintf (exp, sizeof (exp), "%.4000s", raw);
            /* DIR=URL (the option only): its files go to URL, not DIR */
            url[0] = '\0';
            if (l == 0 && tier_url_out_item_is_url (exp)) {
                if (tier_url_out_item_split (exp, dir, sizeof (dir), url,
                                             sizeof (url)) < 0) {
                    char shown[256];
                    tier_url_shown (exp, shown, sizeof (shown));
                    errno = EINVAL;
                    return tier_errprintf (error, "--tier-stage-out: '%s': "
                                           "not /DIR=URL", shown);
                }
                if (out_url_check (url, error) < 0)
                    return -1;
            }
            else if (snprintf (dir, sizeof (dir), "%s", exp)
                     >= (int) sizeof (dir))
                return tier_errprintf (error, "--tier-stage-out: %.200s...: "
                                       "name too long", exp);
            if (tier_path_normalize (dir, norm, sizeof (norm)) < 0
                || norm[0] != '/' || !strcmp (norm, "/"))
                return tier_errprintf (error, "--tier-stage-out: '%s': "
                                       "invalid", dir);
            /* once each directory (an option may repeat a policy's; the
             * option, first, wins) */
            {
                const char *q = out;
                char have[PATH_MAX + 64], hdir[PATH_MAX], hurl[PATH_MAX];
                while ((q = tier_list_next (q, have, sizeof (have))))
                    if (stage_out_item (have, hdir, sizeof (hdir), hurl,
                                        sizeof (hurl))
                            == 0
                        && !strcmp (hdir, norm))
                        dup = true;
            }
            if (dup)
                continue;
            if (snprintf (exp, sizeof (exp), "%s%s%s", norm, url[0] ? "="
                          : "", url) >= (int) sizeof (exp)
                || tier_list_escape (exp, esc, sizeof (esc)) < 0)
                return tier_errprintf (error, "--tier-stage-out: %s: name "
                                       "too long", norm);
            n = strlen (esc);
            if (o + n + 2 > size)
                return tier_errprintf (error, "--tier-stage-out: too many "
                                       "directories");
            if (o)
                out[o++] = ',';
            memcpy (out + o, esc, n + 1);
            o += n;
        }
    }
    return 0;
}

int stage_out_start (const struct tier_conf *conf, const char *conf_path,
                     uint32_t job_id, uint32_t restart, const char *list,
                     tier_error_t *error)
{
    static char body[TIER_OPT_VALUE_MAX * 2];
    char item[PATH_MAX + 64], dir[PATH_MAX], url[PATH_MAX], *reply = NULL;
    const char *p;
    struct tier_jw w;
    int rc;

    tier_jw_init (&w, body, sizeof (body));
    tier_jw_str (&w, "op", "job.stageout");
    tier_jw_uint (&w, "job_id", job_id);
    tier_jw_uint (&w, "restart", restart);
    tier_jw_arr_begin (&w, "dirs");
    for (p = list; (p = tier_list_next (p, item, sizeof (item)));)
        if (stage_out_item (item, dir, sizeof (dir), url, sizeof (url)) == 0)
            tier_jw_str (&w, NULL, dir);
    tier_jw_arr_end (&w);
    /* urls[K]: where the files of dirs[K] go; "" for the GFS itself */
    tier_jw_arr_begin (&w, "urls");
    for (p = list; (p = tier_list_next (p, item, sizeof (item)));)
        if (stage_out_item (item, dir, sizeof (dir), url, sizeof (url)) == 0)
            tier_jw_str (&w, NULL, url);
    tier_jw_arr_end (&w);
    if (tier_jw_finish (&w) < 0)
        return tier_errprintf (error, "stage-out request too large");
    rc = spawn_call_sure (conf, conf_path, job_id, "stage-out", body, &reply,
                          error);
    free (reply);
    return rc;
}

/* "PATH: REASON" of the agent's first_path and first_error, each cut to
 * a bound (ERANGE leaves the longest prefix that fits), control
 * characters shown as '?': it goes to the job's stderr and record.
 */
static void first_failure (const char *reply, size_t len, char *out,
                           size_t size)
{
    char path[200], why[100];

    out[0] = '\0';
    if (tier_jr_get_str (reply, len, "first_path", path, sizeof (path)) < 0
        && errno != ERANGE)
        return;
    if (tier_jr_get_str (reply, len, "first_error", why, sizeof (why)) < 0
        && errno != ERANGE)
        why[0] = '\0';
    (void) snprintf (out, size, "%s: %s", path, why[0] ? why : "failed");
    for (char *p = out; *p; p++)
        if ((unsigned char) *p < ' ' || *p == 0x7f)
            *p = '?';
}

/* One job.stageout_sync; *unreachable as spawn_call_ex says.  With
 * conf_path (and no unreachable), asked again across an agent restart
 * (spawn_call_sure_ex). */
static int sync_once (const struct tier_conf *conf, const char *conf_path,
                      uint32_t job_id, int64_t timeout_ms, bool end,
                      struct tier_stageout_left *left, bool *unreachable,
                      tier_error_t *error)
{
    char body[256], *reply = NULL;
    int64_t v;
    int rc;

    memset (left, 0, sizeof (*left));
    (void) snprintf (body, sizeof (body), "{\"op\":\"job.stageout_sync\","
                     "\"job_id\":%u,\"timeout_ms\":%lld,\"wait\":%s,"
                     "\"end\":%s}", job_id, (long long) timeout_ms,
                     timeout_ms > 0 ? "true" : "false",
                     end ? "true" : "false");
    if (conf_path && !unreachable)
        rc = spawn_call_sure_ex (conf, conf_path, job_id, "stage-out sync",
                                 body, &reply,
                                 (int) (timeout_ms
                                        + (int64_t) conf->agent_timeout_ms),
                                 error);
    else
        rc = spawn_call_ex (conf, body, &reply,
                            (int) (timeout_ms
                                   + (int64_t) conf->agent_timeout_ms),
                            unreachable, error);
    if (rc == 0) {
        size_t len = strlen (reply);
        if (tier_jr_get_int (reply, len, "pending", &v) == 0)
            left->pending = (int) v;
        if (tier_jr_get_int (reply, len, "failed", &v) == 0)
            left->failed = (int) v;
        if (tier_jr_get_int (reply, len, "conflicts", &v) == 0)
            left->conflicts = (int) v;
        (void) tier_jr_get_bool (reply, len, "timed_out", &left->timed_out);
        (void) tier_jr_get_bool (reply, len, "stuck", &left->stuck);
        first_failure (reply, len, left->first, sizeof (left->first));
    }
    free (reply);
    return rc;
}

int stage_out_sync (const struct tier_conf *conf, const char *conf_path,
                    uint32_t job_id, int64_t timeout_ms, bool end,
                    struct tier_stageout_left *left, tier_error_t *error)
{
    return sync_once (conf, conf_path, job_id, timeout_ms, end, left, NULL,
                      error);
}

/* Nothing of the job in flight on the node's agent (finished and
 * retired, or never started): what its records say is left. */
static int outputs_left (const struct tier_conf *conf, uint32_t job_id,
                         struct tier_stageout_left *left, tier_error_t *error)
{
    char body[128], *reply = NULL;
    int64_t v;

    (void) snprintf (body, sizeof (body),
                     "{\"op\":\"job.outputs\","
                     "\"job_id\":%u}",
                     job_id);
    if (spawn_call (conf, body, &reply, (int) conf->agent_timeout_ms, error)
        < 0)
        return -1;
    if (tier_jr_get_int (reply, strlen (reply), "pending", &v) == 0)
        left->pending = (int) v;
    if (tier_jr_get_int (reply, strlen (reply), "failed", &v) == 0)
        left->failed = (int) v;
    if (tier_jr_get_int (reply, strlen (reply), "conflicts", &v) == 0)
        left->conflicts = (int) v;
    free (reply);
    return 0;
}

/* The job's write caches on this node are there (the agent was told of
 * them, or died before it could be). */
static bool outbox_exists (const struct tier_conf *conf, uint32_t job_id,
                           uint32_t restart)
{
    char path[PATH_MAX];
    struct stat st;

    return snprintf (path, sizeof (path), "%s/.outbox/%u.%u", conf->nvdimm_dir,
                     job_id, restart)
               < (int) sizeof (path)
           && lstat (path, &st) == 0 && S_ISDIR (st.st_mode);
}

int stage_out_sync_end (const struct tier_conf *conf, const char *conf_path,
                        uint32_t job_id, uint32_t restart, const char *list,
                        int64_t timeout_ms, struct tier_stageout_left *left,
                        tier_error_t *error)
{
    int64_t deadline = tier_now_ms () + timeout_ms, now;
    int pause_ms = 100, lost = 0;
    bool unreachable, started = false;
    tier_error_t e;

    for (;;) {
        now = tier_now_ms ();
        if (sync_once (conf, NULL, job_id, deadline > now ? deadline - now : 1,
                       true, left, &unreachable, error)
            == 0)
            break;
        if (!unreachable) {
            /* an agent that died before it heard of the job's write
             * caches (they are there): tell it now, and ask again */
            if (errno == ENOENT && !started && list && list[0]
                && outbox_exists (conf, job_id, restart)
                && stage_out_start (conf, conf_path, job_id, restart, list, &e)
                       == 0) {
                started = true;
                continue;
            }
            /* a restarted agent that finished the job before we asked
             * again, or one that never had its outputs */
            if (errno == ENOENT
                && outputs_left (conf, job_id, left, error) == 0)
                break;
            return -1;
        }
        lost++;
        if ((now = tier_now_ms ()) >= deadline) {
            left->unreachable = true;
            left->timed_out = true;
            left->lost = lost;
            return 0;
        }
        /* it died or is restarting: start one where the plugin starts
         * agents (a supervisor's wins the lock), then ask again; its
         * resumed migrations answer */
        if (conf->enabled)
            (void) spawn_ensure (conf, conf_path, conf->node,
                                 (int) (deadline - now < 5000 ? deadline - now
                                                              : 5000),
                                 &e);
        else {
            struct timespec ts = { 0, (long) pause_ms * 1000000L };
            (void) nanosleep (&ts, NULL);
            if (pause_ms < 1000)
                pause_ms *= 2;
        }
    }
    left->lost = lost;
    return 0;
}

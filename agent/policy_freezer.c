/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_freezer.c - the policy freezer: the user's side of freezing
 *
 * File work in the user's directory in SharedStateDir (its policies, the
 * job's frozen set in TIER_STATE_JOBS/JOB.RESTART/policy.json) runs in a
 * child started with agent/child.h's child_ask, with the user's own
 * credentials (TIER_CRED_OWN: the primary group only, as the files are
 * the user's own, 0700) -- never as root against user paths, so that a
 * GFS that squashes root works -- every component opened beneath
 * SharedStateDir without following a symlink, the user's directory under
 * lib/trust.h's USER_PRIVATE rule (lib/state.h knows the names).  The
 * agent parses; the child only moves bytes, and answers with one message
 * of policy_msg.h.  A frozen set is published with link() from a unique
 * temporary, so the first node of a job wins.
 *
 * Owns the freezer and the sweep of old frozen sets.  Calls lib/state,
 * policies/files.h and policy_msg.c.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/state.h"
#include "policies/files.h"
#include "child.h"
#include "policy_freezer.h"

#define FROZEN_KEEP_MIN (30 * 86400) /* shared frozen sets kept >= this */
/* How long the agent waits for the freezer (the GFS answering). */
#define FREEZER_TIMEOUT_MS 5000

struct freezer {
    const char *root; /* SharedStateDir */
    const struct store_job *job;
    const char *text; /* to publish (NULL: read) */
    time_t keep;      /* sweep sets older than this (0: none) */
};

/* ------------------------------------------------------ in the child */

/* The one answer; the exit status. */
static int tell (int chan, enum polmsg_type type, const char *text)
{
    if (polmsg_send (chan, type, text) < 0)
        return 1;
    return type == POLMSG_ERROR ? 1 : 0;
}

/* The user's TIER_STATE_JOBS (or its JOB.RESTART), beneath the user's
 * directory ufd (the user's own: made by the user, refusing symlinks). */
static int open_jobs (const struct freezer *f, int ufd, bool job, bool create,
                      tier_error_t *error)
{
    char name[64];
    int jfd, d;

    if ((jfd = tier_policy_subdir (ufd, TIER_STATE_JOBS, create, error)) < 0
        || !job)
        return jfd;
    tier_state_job_name (f->job->job_id, f->job->restart, name, sizeof (name));
    d = tier_policy_subdir (jfd, name, create, error);
    close (jfd);
    return d;
}

/* The job's frozen set if one exists, else the user's policies. */
static int freeze_read (const struct freezer *f, int chan)
{
    const struct store_job *job = f->job;
    char *text = NULL;
    tier_error_t e;
    int ufd, d, rc;

    if ((ufd = tier_state_user_open (f->root, job->user, job->uid, NULL, false,
                                     &e))
        < 0)
        return tell (chan, POLMSG_ERROR, e.text);
    if ((d = open_jobs (f, ufd, true, false, &e)) >= 0) {
        rc = tier_policy_read_at (d, TIER_POLICY_FROZEN_FILE, &text, NULL, &e);
        close (d);
        if (rc == 0)
            return tell (chan, POLMSG_FROZEN, text);
    }
    if (tier_policy_read_at (ufd, TIER_STATE_POLICIES, &text, NULL, &e) == 0)
        return tell (chan, POLMSG_USER, text);
    if (errno == ENOENT)
        return tell (chan, POLMSG_NONE, NULL);
    return tell (chan, POLMSG_ERROR, e.text);
}

/* Remove frozen sets older than keep seconds (the job directories in
 * jobs/ whose policy.json is that old).
 */
static void sweep_frozen (int jfd, time_t keep)
{
    time_t cutoff = time (NULL) - keep;
    struct dirent *de;
    int dfd = dup (jfd);
    DIR *d;

    if (dfd < 0 || !(d = fdopendir (dfd))) {
        if (dfd >= 0)
            close (dfd);
        return;
    }
    while ((de = readdir (d))) {
        struct stat st;
        int sub;
        if (de->d_name[0] == '.')
            continue;
        if ((sub = openat (jfd, de->d_name,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
            < 0)
            continue;
        if (fstatat (sub, TIER_POLICY_FROZEN_FILE, &st, AT_SYMLINK_NOFOLLOW)
                == 0
            && st.st_mtime < cutoff) {
            (void) unlinkat (sub, TIER_POLICY_FROZEN_FILE, 0);
            (void) unlinkat (jfd, de->d_name, AT_REMOVEDIR);
        }
        close (sub);
    }
    closedir (d);
}

/* Publish the text as the job's frozen set unless one exists; answer
 * with the set that is in force. */
static int freeze_write (const struct freezer *f, int chan)
{
    const struct store_job *job = f->job;
    char *cur = NULL;
    tier_error_t e;
    int ufd, jfd, d;

    if ((ufd = tier_state_user_open (f->root, job->user, job->uid, NULL, false,
                                     &e))
            < 0
        || (jfd = open_jobs (f, ufd, false, true, &e)) < 0)
        return tell (chan, POLMSG_ERROR, e.text);
    if (f->keep > 0)
        sweep_frozen (jfd, f->keep);
    close (jfd);
    if ((d = open_jobs (f, ufd, true, true, &e)) < 0)
        return tell (chan, POLMSG_ERROR, e.text);
    if (tier_policy_write_at (d, TIER_POLICY_FROZEN_FILE, f->text, 0600, true,
                              &e)
        == 0)
        return tell (chan, POLMSG_FROZEN, f->text);
    if (errno != EEXIST)
        return tell (chan, POLMSG_ERROR, e.text);
    /* another node of the job froze it first: theirs is in force */
    if (tier_policy_read_at (d, TIER_POLICY_FROZEN_FILE, &cur, NULL, &e) < 0)
        return tell (chan, POLMSG_ERROR, e.text);
    return tell (chan, POLMSG_FROZEN, cur);
}

static int freezer_main (void *arg, int chan)
{
    const struct freezer *f = arg;

    return f->text ? freeze_write (f, chan) : freeze_read (f, chan);
}

/* ------------------------------------------------------ in the agent */

/* Should this freeze also sweep the user's old frozen sets?  A sweep
 * reads every job directory the user has on the GFS: once per user and
 * node every FROZEN_SWEEP_S, not at each job (that was quadratic in the
 * jobs a user ran within the retention time).
 */
#define FROZEN_SWEEP_S 3600
#define SWEEPS_MAX 256

static bool sweep_due (uid_t uid)
{
    static struct {
        uid_t uid;
        time_t last;
    } sweeps[SWEEPS_MAX];
    static int nsweeps;
    time_t now = time (NULL);
    int i, oldest = 0;

    for (i = 0; i < nsweeps; i++)
        if (sweeps[i].uid == uid)
            break;
    if (i == nsweeps) {
        if (nsweeps < SWEEPS_MAX)
            i = nsweeps++;
        else { /* forget the longest ago */
            for (int k = 1; k < nsweeps; k++)
                if (sweeps[k].last < sweeps[oldest].last)
                    oldest = k;
            i = oldest;
        }
        sweeps[i].uid = uid;
        sweeps[i].last = 0;
    }
    if (now - sweeps[i].last < FROZEN_SWEEP_S)
        return false;
    sweeps[i].last = now;
    return true;
}

/* The freezer's answer: its kind, and the text or the reason in *out. */
static int answer (int type, json_t *body, int fd, char **out)
{
    struct polmsg m;
    tier_error_t e;

    if (polmsg_unpack (type, body, &m, &e) < 0) {
        *out = strdup (e.text);
        return POLMSG_ERROR;
    }
    switch (m.type) {
        case POLMSG_NONE:
            return POLMSG_NONE;
        case POLMSG_ERROR:
            *out = strdup (m.error);
            return POLMSG_ERROR;
        default:
            if (polmsg_text_read (&m, fd, out, &e) < 0) {
                *out = strdup (e.text);
                return POLMSG_ERROR;
            }
            return m.type;
    }
}

/* The freezer's spec (cred is filled in). */
static void freezer_spec (const struct freezer *f, struct tier_cred *cred,
                          struct child_spec *spec)
{
    const struct store_job *job = f->job;

    memset (spec, 0, sizeof (*spec));
    spec->name = "tierd-freeze";
    spec->cred = cred;
    spec->mode = TIER_CRED_OWN;
    spec->proto = &polmsg_proto;
    spec->main = freezer_main;
    spec->arg = (void *) f;
    tier_cred_init (cred, job->uid, job->gid);
    (void) snprintf (spec->title, sizeof (spec->title),
                     "tierd-freeze job %u %s", job->job_id, job->user);
}

/* Why the freezer gave no answer (errno as child_ask leaves it), in
 * *out. */
static int no_answer (const char *root, uint32_t job_id, const char *user,
                      const tier_error_t *e, char **out)
{
    char shown[PATH_MAX];

    if (errno == ETIMEDOUT) {
        if (tier_state_user_path (root, user, NULL, shown, sizeof (shown)) < 0)
            (void) snprintf (shown, sizeof (shown), "%s", root);
        tier_log (LOG_ERR, "job %u: %s did not answer within %d s", job_id,
                  shown, FREEZER_TIMEOUT_MS / 1000);
        *out = strdup ("the shared state directory did not answer in time");
    }
    else
        *out = strdup (e->text[0] ? e->text : "the freezer failed");
    return POLMSG_ERROR;
}

/* A freezer started with child_ask: who hears its answer. */
struct asking {
    policy_freezer_f done;
    void *arg;
    char root[PATH_MAX];
    uint32_t job_id;
    char user[64];
};

static void on_answer (struct agent *a, int rc, int type, json_t *body, int fd,
                       const tier_error_t *e, void *arg)
{
    struct asking *k = arg;
    char *out = NULL;
    int kind;

    if (rc) {
        errno = rc;
        kind = no_answer (k->root, k->job_id, k->user, e, &out);
    }
    else
        kind = answer (type, body, fd, &out);
    if (fd >= 0)
        close (fd);
    json_decref (body);
    k->done (a, kind, out, k->arg);
    free (k);
}

static void as_user_start (struct agent *a, const struct freezer *f,
                           policy_freezer_f done, void *arg)
{
    struct asking *k = calloc (1, sizeof (*k));
    struct tier_cred cred;
    struct child_spec spec;

    if (!k) {
        done (a, POLMSG_ERROR, strdup ("out of memory"), arg);
        return;
    }
    k->done = done;
    k->arg = arg;
    k->job_id = f->job->job_id;
    (void) snprintf (k->root, sizeof (k->root), "%s", f->root);
    (void) snprintf (k->user, sizeof (k->user), "%s", f->job->user);
    freezer_spec (f, &cred, &spec);
    child_ask (a, &spec, FREEZER_TIMEOUT_MS, on_answer, k);
}

void policy_freezer_read_start (struct agent *a, const struct store_job *job,
                                policy_freezer_f done, void *arg)
{
    struct freezer f = { .root = a->conf->shared_state_dir, .job = job };

    as_user_start (a, &f, done, arg);
}

void policy_freezer_write_start (struct agent *a, const struct store_job *job,
                                 const char *text, policy_freezer_f done,
                                 void *arg)
{
    struct freezer f = {
        .root = a->conf->shared_state_dir,
        .job = job,
        .text = text,
    };

    if (sweep_due (job->uid))
        f.keep = a->conf->stats_retention > FROZEN_KEEP_MIN
                     ? (time_t) a->conf->stats_retention
                     : FROZEN_KEEP_MIN;
    as_user_start (a, &f, done, arg);
}

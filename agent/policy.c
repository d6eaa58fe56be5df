/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy.c - freezing a job's policy set; job.policy and user.ensure
 *
 * When a job's first step registers on a node, the agent resolves the
 * job's effective policy set -- the site layer (SitePolicyDir, read as
 * root), the user's store and the job's options -- applies the checks
 * that belong on the node (AllowedRoots, tier's own directories, locked
 * site policies, refused nesting), and freezes it for the whole job:
 *
 *     SharedStateDir/users/USER/jobs/JOB.RESTART/policy.json
 *
 * written with link() from a unique temporary, so the first node wins and
 * every later node reads the winner's set: all nodes of a job apply the
 * same policies, and a later `tierctl set policy` changes later jobs only.
 * The node keeps what it applied with its registry, in
 * StateDir/policies/JOB.RESTART.json (root 0600), for job.policy.
 *
 * File work in the user's directory runs in a forked child that drops to
 * the user's uid and gid (no supplementary groups: the files are the
 * user's own, 0700) -- never as root against user paths, so a GFS that
 * squashes root works, and every component is opened with O_NOFOLLOW
 * beneath SharedStateDir.  The parent parses; the children only move
 * bytes through a pipe.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "policies/files.h"
#include "policies/policy.h"
#include "agent.h"
#include "policy.h"

#define FROZEN_FORMAT 1
#define FROZEN_KEEP_MIN (30 * 86400)    /* shared frozen sets kept >= this */

/* What the reading child found: a frozen set, the user's store, none. */
enum {
    FOUND_NONE = 'N',
    FOUND_FROZEN = 'F',
    FOUND_USER = 'U',
    FOUND_ERROR = 'E',
};

static int drop_to_user (const struct store_job *job)
{
    if (setgroups (0, NULL) < 0 || setresgid (job->gid, job->gid, job->gid) < 0
        || setresuid (job->uid, job->uid, job->uid) < 0)
        return -1;
    return 0;
}

static int write_all (int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = write (fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        p += n;
        len -= (size_t) n;
    }
    return 0;
}

/* In the child: one kind byte, then the text (or an error message). */
static void send_found (int fd, char kind, const char *text)
{
    (void) write_all (fd, &kind, 1);
    if (text)
        (void) write_all (fd, text, strlen (text));
}

static void job_dir_name (const struct store_job *job, char *buf, size_t size)
{
    (void) snprintf (buf, size, "%u.%u", job->job_id, job->restart);
}

/* Child, as the user: the job's frozen set if one exists, else the
 * user's store.
 */
static int child_read (const char *root, const struct store_job *job, int fd)
{
    tier_error_t e;
    char name[64], *text = NULL;
    int ufd, jfd, d;

    if (drop_to_user (job) < 0) {
        send_found (fd, FOUND_ERROR, "cannot take the user's credentials");
        return 1;
    }
    if ((ufd = tier_policy_user_dir (root, job->user, job->uid, &e)) < 0) {
        send_found (fd, FOUND_ERROR, e.text);
        return 1;
    }
    job_dir_name (job, name, sizeof (name));
    if ((jfd = tier_policy_subdir (ufd, "jobs", false, &e)) >= 0) {
        if ((d = tier_policy_subdir (jfd, name, false, &e)) >= 0) {
            if (tier_policy_read_at (d, TIER_POLICY_FROZEN_FILE, &text, NULL,
                                     &e) == 0) {
                send_found (fd, FOUND_FROZEN, text);
                return 0;
            }
            close (d);
        }
        close (jfd);
    }
    if (tier_policy_read_at (ufd, TIER_POLICY_USER_FILE, &text, NULL,
                             &e) == 0) {
        send_found (fd, FOUND_USER, text);
        return 0;
    }
    if (errno == ENOENT) {
        send_found (fd, FOUND_NONE, NULL);
        return 0;
    }
    send_found (fd, FOUND_ERROR, e.text);
    return 1;
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
        if ((sub = openat (jfd, de->d_name, O_RDONLY | O_DIRECTORY
                           | O_NOFOLLOW | O_CLOEXEC)) < 0)
            continue;
        if (fstatat (sub, TIER_POLICY_FROZEN_FILE, &st,
                     AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < cutoff) {
            (void) unlinkat (sub, TIER_POLICY_FROZEN_FILE, 0);
            (void) unlinkat (jfd, de->d_name, AT_REMOVEDIR);
        }
        close (sub);
    }
    closedir (d);
}

/* Child, as the user: publish text as the job's frozen set unless one
 * exists; send back the set that is in force ('F' + text).
 */
static int child_write (const char *root, const struct store_job *job,
                        const char *text, time_t keep, int fd)
{
    tier_error_t e;
    char name[64], *cur = NULL;
    int ufd, jfd, d;

    if (drop_to_user (job) < 0) {
        send_found (fd, FOUND_ERROR, "cannot take the user's credentials");
        return 1;
    }
    if ((ufd = tier_policy_user_dir (root, job->user, job->uid, &e)) < 0
        || (jfd = tier_policy_subdir (ufd, "jobs", true, &e)) < 0) {
        send_found (fd, FOUND_ERROR, e.text);
        return 1;
    }
    if (keep > 0)
        sweep_frozen (jfd, keep);
    job_dir_name (job, name, sizeof (name));
    if ((d = tier_policy_subdir (jfd, name, true, &e)) < 0) {
        send_found (fd, FOUND_ERROR, e.text);
        return 1;
    }
    if (tier_policy_write_at (d, TIER_POLICY_FROZEN_FILE, text, 0600, true,
                              &e) == 0) {
        send_found (fd, FOUND_FROZEN, text);
        return 0;
    }
    if (errno != EEXIST) {
        send_found (fd, FOUND_ERROR, e.text);
        return 1;
    }
    /* another node of the job froze it first: theirs is in force */
    if (tier_policy_read_at (d, TIER_POLICY_FROZEN_FILE, &cur, NULL,
                             &e) < 0) {
        send_found (fd, FOUND_ERROR, e.text);
        return 1;
    }
    send_found (fd, FOUND_FROZEN, cur);
    return 0;
}

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
        else {                          /* forget the longest ago */
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

/* How long the agent waits for such a child (the GFS answering). */
#define AS_USER_TIMEOUT_MS 5000

/* Run fn in a child as the user and collect what it sends.  Returns the
 * kind, with the text in *out (malloc'd), or FOUND_ERROR.
 */
static int as_user (struct agent *a, const struct store_job *job,
                    const char *text, bool write, char **out)
{
    size_t len = 0, cap = 0;
    char *buf = NULL;
    int pfd[2], status = 0, kind;
    pid_t pid;
    time_t keep = a->conf->stats_retention > FROZEN_KEEP_MIN
                  ? (time_t) a->conf->stats_retention : FROZEN_KEEP_MIN;
    int64_t deadline = tier_now_ms () + AS_USER_TIMEOUT_MS;

    if (!write || !sweep_due (job->uid))
        keep = 0;                       /* no sweep this time */

    *out = NULL;
    if (pipe2 (pfd, O_CLOEXEC) < 0)
        return FOUND_ERROR;
    if ((pid = fork ()) < 0) {
        close (pfd[0]);
        close (pfd[1]);
        return FOUND_ERROR;
    }
    if (pid == 0) {
        close (pfd[0]);
        _exit (write ? child_write (a->conf->shared_state_dir, job, text,
                                    keep, pfd[1])
                     : child_read (a->conf->shared_state_dir, job, pfd[1]));
    }
    close (pfd[1]);
    for (;;) {
        ssize_t n;
        if (len + 4097 > cap) {
            char *nb;
            if (cap > TIER_POLICY_TEXT_MAX + 8192
                || !(nb = realloc (buf, cap + 65536)))
                break;
            buf = nb;
            cap += 65536;
        }
        {
            /* a hung GFS must not stall the agent's loop for long */
            struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
            int64_t left = deadline - tier_now_ms ();
            int r = left > 0 ? poll (&pf, 1, (int) left) : 0;
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0) {
                (void) kill (pid, SIGKILL);     /* reaped with the others */
                close (pfd[0]);
                free (buf);
                tier_log (LOG_ERR, "job %u: %s/users/%s did not answer "
                          "within %d s", job->job_id,
                          a->conf->shared_state_dir, job->user,
                          AS_USER_TIMEOUT_MS / 1000);
                *out = strdup ("the shared state directory did not answer "
                               "in time");
                return FOUND_ERROR;
            }
        }
        n = read (pfd[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t) n;
    }
    close (pfd[0]);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!buf || len == 0) {
        free (buf);
        return FOUND_ERROR;
    }
    buf[len] = '\0';
    kind = buf[0];
    memmove (buf, buf + 1, len);
    *out = buf;
    return kind;
}

static void report_cb (void *arg, const char *text)
{
    json_t *errors = arg;

    tier_log (LOG_WARNING, "site policies: %s", text);
    (void) json_array_append_new (errors, json_string (text));
}

static void note (json_t *errors, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

static void note (json_t *errors, const char *fmt, ...)
{
    tier_error_t e;
    va_list ap;

    va_start (ap, fmt);
    (void) tier_verrprintf (&e, fmt, ap);
    va_end (ap);
    tier_log (LOG_WARNING, "%s", e.text);
    (void) json_array_append_new (errors, json_string (e.text));
}

/* The node's copy, with its registry. */
static int local_dir (struct agent *a)
{
    char path[PATH_MAX];
    struct stat st;
    int fd;

    (void) snprintf (path, sizeof (path), "%s/policies", a->conf->state_dir);
    if (mkdir (path, 0700) < 0 && errno != EEXIST)
        return -1;
    if ((fd = open (path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW
                    | O_CLOEXEC)) < 0)
        return -1;
    if (fstat (fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 077)) {
        close (fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* Drop local copies whose job is no longer in the registry. */
static void sweep_local (struct agent *a, int dfd)
{
    struct dirent *de;
    int fd = dup (dfd);
    DIR *d;

    if (fd < 0 || !(d = fdopendir (fd))) {
        if (fd >= 0)
            close (fd);
        return;
    }
    while ((de = readdir (d))) {
        struct store_job j;
        tier_error_t e;
        unsigned id, rst;
        char tail[8];
        if (sscanf (de->d_name, "%u.%u.%7s", &id, &rst, tail) != 3
            || strcmp (tail, "json"))
            continue;
        if (store_job_get (a->store, id, rst, &j, &e) < 0 && errno == ENOENT)
            (void) unlinkat (dfd, de->d_name, 0);
    }
    closedir (d);
}

static void keep_local (struct agent *a, const struct store_job *job,
                        const char *text)
{
    char name[80];
    tier_error_t e;
    int dfd;

    if ((dfd = local_dir (a)) < 0) {
        tier_log_error ("%s/policies", a->conf->state_dir);
        return;
    }
    sweep_local (a, dfd);
    (void) snprintf (name, sizeof (name), "%u.%u.json", job->job_id,
                     job->restart);
    if (tier_policy_write_at (dfd, name, text, 0600, false, &e) < 0)
        tier_log (LOG_ERR, "job %u: keeping its policy set: %s", job->job_id,
                  e.text);
    close (dfd);
}

/* The refusals of the user and job layers that another node recorded,
 * as plain text fields (what they say is only ever shown to the job's
 * owner, whose own directory they come from).
 */
static int carry_refused (json_t *refused, json_t *carried)
{
    size_t i;
    json_t *o;

    json_array_foreach (carried, i, o) {
        const char *k[] = { "dir", "layer", "role", "source", "reason" };
        json_t *r = json_object ();
        const char *layer = json_string_value (json_object_get (o, "layer"));
        bool ok = r && layer && (!strcmp (layer, "user")
                                 || !strcmp (layer, "job"));

        for (size_t j = 0; ok && j < sizeof (k) / sizeof (k[0]); j++) {
            json_t *v = json_object_get (o, k[j]);
            ok = json_is_string (v) && json_string_length (v) < PATH_MAX
                 && json_object_set (r, k[j], v) == 0;
        }
        if (ok && json_array_append (refused, r) < 0) {
            json_decref (r);
            return -1;
        }
        json_decref (r);
    }
    return 0;
}

/* Compose the frozen document from the layers (and the refusals carried
 * over from another node's set, or NULL).
 */
static char *compose (struct agent *a, const struct store_job *job,
                      struct tier_policy_set *all, json_t *carried,
                      json_t *errors, int *count, int *nrefused)
{
    struct tier_policy_set *out = tier_policy_set_create ();
    struct tier_policy_conf_roots rb;
    json_t *refused = json_array (), *doc = NULL, *pols;
    char *text = NULL;
    tier_error_t e;

    if (!out || !refused || (carried && carry_refused (refused, carried) < 0))
        goto out;
    tier_policy_roots_from_conf (a->conf, job->user, &rb);
    if (tier_policy_freeze (all, &rb.roots, out, refused, &e) < 0) {
        note (errors, "job %u: freezing its policies: %s", job->job_id,
              e.text);
        goto out;
    }
    if (!(pols = tier_policy_set_to_json (out)))
        goto out;
    doc = json_pack ("{s:i s:I s:I s:s s:I s:s s:I s:o s:O s:O}",
                     "format", FROZEN_FORMAT,
                     "job_id", (json_int_t) job->job_id,
                     "restart", (json_int_t) job->restart,
                     "user", job->user,
                     "uid", (json_int_t) job->uid,
                     "node", a->node,
                     "frozen", (json_int_t) time (NULL),
                     "policies", pols,
                     "refused", refused,
                     "errors", errors);
    if (doc)
        text = json_dumps (doc, JSON_INDENT (2) | JSON_SORT_KEYS);
    *count = out->n;
    *nrefused = (int) json_array_size (refused);
out:
    json_decref (doc);
    json_decref (refused);
    tier_policy_set_destroy (out);
    return text;
}

/* A frozen set found in the shared directory: the first node's, or one
 * the job's owner put there herself (the directory is hers).  Only its
 * user and job layers are taken -- what the user could ask for anyway --
 * over this node's own site layer, and frozen again with this node's
 * checks: site policies, locked, share and AllowedRoots always come from
 * the node's own configuration, and the user's entries are refused under
 * its locked site policies and outside its AllowedRoots.  Returns the
 * document this node applies (malloc'd), or NULL with error set.
 */
static char *adopt_frozen (struct agent *a, const struct store_job *job,
                           const char *text, int *count, int *nrefused,
                           tier_error_t *error)
{
    struct tier_policy_set *shared = tier_policy_set_create ();
    struct tier_policy_set *all = tier_policy_set_create ();
    json_error_t jerr;
    json_t *doc = json_loads (text, JSON_REJECT_DUPLICATES, &jerr);
    json_t *errors = json_array (), *refused;
    json_int_t id = -1, rst = -1;
    char *out = NULL;

    if (!shared || !all || !errors) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        goto out;
    }
    if (!doc
        || json_unpack (doc, "{s:I s:I}", "job_id", &id, "restart", &rst) < 0
        || id != job->job_id || rst != job->restart) {
        errno = EINVAL;
        tier_errprintf (error, "not this job's frozen policy set");
        goto out;
    }
    if (tier_policy_set_from_json (shared, json_object_get (doc, "policies"),
                                   "frozen policy set", error) < 0)
        goto out;
    refused = json_object_get (doc, "refused");
    (void) tier_policy_load_site (all, a->conf->site_policy_dir, report_cb,
                                  errors);
    for (int i = 0; i < shared->n; i++)
        if (shared->v[i].layer != TIER_LAYER_SITE
            && tier_policy_add (all, &shared->v[i], error) < 0)
            goto out;
    if (!(out = compose (a, job, all, json_is_array (refused) ? refused
                         : NULL, errors, count, nrefused))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
    }
out:
    json_decref (doc);
    json_decref (errors);
    tier_policy_set_destroy (shared);
    tier_policy_set_destroy (all);
    return out;
}

json_t *policy_job_freeze (struct agent *a, const struct store_job *job)
{
    struct tier_policy_set *all = tier_policy_set_create ();
    json_t *errors = json_array (), *opts = NULL, *res = NULL;
    const char *by = a->node;
    char *found = NULL, *text = NULL, *cur = NULL;
    char path[PATH_MAX + 64];
    bool shared = a->conf->shared_state_dir[0] != '\0';
    int count = 0, nrefused = 0, kind = FOUND_NONE;
    json_error_t jerr;
    tier_error_t e;

    if (!all || !errors)
        goto out;
    (void) snprintf (path, sizeof (path), "%s/users/%s/%s",
                     a->conf->shared_state_dir, job->user,
                     TIER_POLICY_USER_FILE);
    if (shared)
        kind = as_user (a, job, NULL, false, &found);
    if (kind == FOUND_FROZEN) {
        if ((text = adopt_frozen (a, job, found, &count, &nrefused, &e))) {
            /* frozen by another node of the job: apply the same */
            keep_local (a, job, text);
            tier_log (LOG_INFO, "job %u: %d policies, frozen by another "
                      "node, %d refused", job->job_id, count, nrefused);
            res = json_pack ("{s:i s:i s:b}", "count", count, "refused",
                             nrefused, "shared", 1);
            goto out;
        }
        note (errors, "job %u: the frozen policy set in %s/users/%s/jobs "
              "is unusable (%s); freezing anew here", job->job_id,
              a->conf->shared_state_dir, job->user, e.text);
        kind = FOUND_NONE;
    }
    (void) tier_policy_load_site (all, a->conf->site_policy_dir, report_cb,
                                  errors);
    if (kind == FOUND_USER) {
        if (tier_policy_parse (all, found, strlen (found), TIER_LAYER_USER,
                               path, &e) < 0)
            note (errors, "user policies of %s are not used: %s", job->user,
                  e.text);
    }
    else if (kind == FOUND_ERROR && shared)
        note (errors, "user policies of %s cannot be read: %s", job->user,
              found && found[0] ? found : "the helper failed");
    if (!(opts = json_loads (job->options[0] ? job->options : "{}", 0, &jerr))
        || tier_policy_from_options (all, opts, &e) < 0)
        note (errors, "job %u: its --tier options give no policies: %s",
              job->job_id, opts ? e.text : "not JSON");
    if (!(text = compose (a, job, all, NULL, errors, &count, &nrefused)))
        goto out;
    if (shared) {
        int k = as_user (a, job, text, true, &cur);
        if (k == FOUND_FROZEN && cur && strcmp (cur, text)) {
            int c2 = 0, r2 = 0;
            char *mine = adopt_frozen (a, job, cur, &c2, &r2, &e);
            if (mine) {
                /* another node came first: theirs is in force */
                free (text);
                text = mine;
                count = c2;
                nrefused = r2;
                by = "another node";
            }
            else
                tier_log (LOG_WARNING, "job %u: the frozen policy set in "
                          "%s/users/%s/jobs is unusable (%s); this node "
                          "applies its own", job->job_id,
                          a->conf->shared_state_dir, job->user, e.text);
        }
        else if (k != FOUND_FROZEN)
            tier_log (LOG_WARNING, "job %u: its policy set is not shared "
                      "with its other nodes: %s", job->job_id,
                      cur && cur[0] ? cur : "the helper failed");
    }
    keep_local (a, job, text);
    tier_log (LOG_INFO, "job %u: %d policies frozen (by %s), %d refused",
              job->job_id, count, by, nrefused);
    res = json_pack ("{s:i s:i s:b}", "count", count, "refused", nrefused,
                     "shared", shared);
out:
    free (found);
    free (text);
    free (cur);
    json_decref (opts);
    json_decref (errors);
    tier_policy_set_destroy (all);
    return res;
}

json_t *policy_reply (json_t *pol, json_t *res)
{
    if (res && pol)
        (void) json_object_set_new (res, "policy", pol);
    else
        json_decref (pol);
    return res;
}

json_t *op_job_policy (struct agent *a, struct conn *c, json_t *req,
                       tier_error_t *error)
{
    struct store_job job;
    json_int_t id = 0, rst = -1;
    char name[80], *text = NULL;
    json_error_t jerr;
    json_t *doc;
    int rc, dfd;

    if (json_unpack (req, "{s:I s?I}", "job_id", &id, "restart", &rst) < 0
        || id <= 0 || id > 0xfffffff0LL || rst < -1 || rst > 0xffffffffLL) {
        errno = EINVAL;
        tier_errprintf (error, "job.policy needs a 'job_id' (and an "
                        "optional 'restart')");
        return NULL;
    }
    if (rst < 0)
        rc = store_job_latest (a->store, (uint32_t) id, &job, error);
    else
        rc = store_job_get (a->store, (uint32_t) id, (uint32_t) rst, &job,
                            error);
    if (rc < 0)
        return NULL;
    if (!agent_privileged (a, c->cred.uid) && job.uid != c->cred.uid) {
        errno = EPERM;
        tier_errprintf (error, "job %u belongs to another user",
                        (unsigned) id);
        return NULL;
    }
    if ((dfd = local_dir (a)) < 0) {
        tier_errprintf (error, "%s/policies: %s", a->conf->state_dir,
                        strerror (errno));
        return NULL;
    }
    (void) snprintf (name, sizeof (name), "%u.%u.json", job.job_id,
                     job.restart);
    rc = tier_policy_read_at (dfd, name, &text, NULL, error);
    close (dfd);
    if (rc < 0) {
        if (errno == ENOENT)
            tier_errprintf (error, "job %u has no frozen policy set on node "
                            "%s", job.job_id, a->node);
        return NULL;
    }
    doc = json_loads (text, 0, &jerr);
    free (text);
    if (!doc) {
        errno = EIO;
        tier_errprintf (error, "job %u: its frozen policy set is corrupt",
                        job.job_id);
        return NULL;
    }
    return json_pack ("{s:s s:o}", "node", a->node, "frozen", doc);
}

json_t *op_user_ensure (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    struct passwd pw, *pwp = NULL;
    char buf[4096];
    int rootfd, fd;

    if (!a->conf->shared_state_dir[0]) {
        errno = ENOENT;
        tier_errprintf (error, "SharedStateDir is not set in tier.conf");
        return NULL;
    }
    if (getpwuid_r (c->cred.uid, &pw, buf, sizeof (buf), &pwp) != 0 || !pwp) {
        errno = ENOENT;
        tier_errprintf (error, "uid %u has no passwd entry",
                        (unsigned) c->cred.uid);
        return NULL;
    }
    if ((rootfd = tier_state_open_root (a->conf->shared_state_dir,
                                        error)) < 0)
        return NULL;
    fd = tier_state_user_dir (rootfd, pw.pw_name, pw.pw_uid, pw.pw_gid,
                              error);
    close (rootfd);
    if (fd < 0) {
        tier_log (LOG_ERR, "SharedStateDir %s/%s", a->conf->shared_state_dir,
                  error->text);
        return NULL;
    }
    close (fd);
    return json_pack ("{s:s s:s}", "user", pw.pw_name, "dir",
                      a->conf->shared_state_dir);
}

/* Does p decide its own directory, with role?  The frozen set keeps the
 * entries of lower layers that a higher one (or a locked site policy)
 * overrides for the same directory: only the one resolution picks counts,
 * once -- a 'none' over a site pipeline is no mount, --tier-batch over a
 * pipeline policy is no overlay, a directory named by a policy and by
 * --tier-scratch is one overlay with one reservation.
 */
static bool decides (const struct tier_policy_set *set,
                     const struct tier_policy *p, enum tier_policy_role role)
{
    struct tier_policy_match m;

    return p->role == role && tier_policy_resolve (set, p->dir, &m) == 0
           && m.policy == p;
}

/* The pipeline directories of a job's frozen set (this node's copy), as
 * "DIR[:SIZE][:keep=WHEN],..." for the plugin's scratch mounts and what
 * its epilog keeps (each DIR escaped, so that a ',' or ':' in a name
 * stays in it: tier_list_escape; SIZE the policy's, else the node's
 * default, so that the plugin mounts exactly what is reserved; keep=
 * when the policy sets it -- the job's --tier-scratch items carry
 * --tier-keep), and the sum of their sizes for the node's reservation.
 */
int policy_job_pipeline (struct agent *a, const struct store_job *job,
                         char *out, size_t size, uint64_t *reserve,
                         char *refused, size_t rsize)
{
    struct tier_policy_set *set = tier_policy_set_create ();
    char path[PATH_MAX];
    json_error_t jerr;
    json_t *doc;
    tier_error_t e;
    size_t o = 0;
    int rc = -1;
    /* a directory without a size gets, and reserves, ScratchDefaultSize,
     * else the whole NvdimmCapacity (else no limit and no accounting):
     * what is reserved is what the plugin mounts */
    uint64_t dflt = a->conf->scratch_default ? a->conf->scratch_default
                                             : a->conf->nvdimm_capacity;

    *reserve = 0;
    out[0] = '\0';
    refused[0] = '\0';
    (void) snprintf (path, sizeof (path), "%s/policies/%u.%u.json",
                     a->conf->state_dir, job->job_id, job->restart);
    if (!set || !(doc = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr))) {
        tier_policy_set_destroy (set);
        return -1;
    }
    if (tier_policy_set_from_json (set, json_object_get (doc, "policies"),
                                   "frozen policy set", &e) < 0)
        goto out;
    {
        /* what of the job's own options was refused, for its stderr */
        size_t i, r = 0;
        json_t *v;
        json_array_foreach (json_object_get (doc, "refused"), i, v) {
            const char *layer = json_string_value (json_object_get (v,
                                                                    "layer"));
            const char *src = json_string_value (json_object_get (v,
                                                                  "source"));
            const char *why = json_string_value (json_object_get (v,
                                                                  "reason"));
            int n;
            if (!layer || strcmp (layer, "job") || !why)
                continue;
            n = snprintf (refused + r, rsize - r, "%s%s: %s", r ? "; " : "",
                          src ? src : "option", why);
            if (n < 0 || (size_t) n >= rsize - r)
                break;
            r += n;
        }
    }
    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        char item[2 * PATH_MAX + 32], esc[2 * PATH_MAX];
        uint64_t psize = p->size ? p->size : dflt;
        int n;

        if (!decides (set, p, TIER_POLICY_PIPELINE)
            || tier_list_escape (p->dir, esc, sizeof (esc)) < 0)
            continue;
        n = snprintf (item, sizeof (item), "%s", esc);
        if (psize && n > 0 && n < (int) sizeof (item))
            n += snprintf (item + n, sizeof (item) - n, ":%llu",
                           (unsigned long long) psize);
        if ((p->set & TIER_PA_KEEP) && n > 0 && n < (int) sizeof (item))
            n += snprintf (item + n, sizeof (item) - n, ":keep=%s",
                           tier_policy_keep_name (p->keep));
        if (n < 0 || n >= (int) sizeof (item))
            continue;
        if (o + n + 2 > size)
            break;
        if (o)
            out[o++] = ',';
        memcpy (out + o, item, n);
        o += n;
        out[o] = '\0';
        *reserve += psize;
    }
    rc = 0;
out:
    json_decref (doc);
    tier_policy_set_destroy (set);
    return rc;
}

/* The frozen sets of running jobs, parsed once: every redirected open
 * asks which policy covers its path.
 */
#define FROZEN_CACHE 64

static struct frozen_cache {
    uint32_t job_id, restart;
    struct tier_policy_set *set;
    int64_t used;
} frozen_cache[FROZEN_CACHE];

static struct tier_policy_set *frozen_load (struct agent *a,
                                            const struct store_job *job)
{
    struct tier_policy_set *set;
    struct frozen_cache *slot = &frozen_cache[0];
    char path[PATH_MAX];
    json_error_t jerr;
    json_t *doc;
    tier_error_t e;

    for (int i = 0; i < FROZEN_CACHE; i++) {
        struct frozen_cache *f = &frozen_cache[i];
        if (f->set && f->job_id == job->job_id
            && f->restart == job->restart) {
            f->used = tier_now_ms ();
            return f->set;
        }
        if (!f->set || f->used < slot->used)
            slot = f;
    }
    (void) snprintf (path, sizeof (path), "%s/policies/%u.%u.json",
                     a->conf->state_dir, job->job_id, job->restart);
    if (!(doc = json_load_file (path, JSON_REJECT_DUPLICATES, &jerr)))
        return NULL;
    if (!(set = tier_policy_set_create ())
        || tier_policy_set_from_json (set, json_object_get (doc, "policies"),
                                      "frozen policy set", &e) < 0) {
        tier_policy_set_destroy (set);
        json_decref (doc);
        return NULL;
    }
    json_decref (doc);
    tier_policy_set_destroy (slot->set);
    slot->set = set;
    slot->job_id = job->job_id;
    slot->restart = job->restart;
    slot->used = tier_now_ms ();
    return set;
}

int policy_job_resolve (struct agent *a, const struct store_job *job,
                        const char *path, struct tier_policy *out)
{
    struct tier_policy_set *set = frozen_load (a, job);
    struct tier_policy_match m;

    memset (out, 0, sizeof (*out));
    out->role = TIER_POLICY_NONE;
    if (!set) {
        errno = ENOENT;
        return -1;
    }
    if (tier_policy_resolve (set, path, &m) < 0)
        return -1;
    if (m.policy) {
        *out = *m.policy;
        out->dir = out->comment = out->source = NULL;   /* not owned */
    }
    return 0;
}

/* The batch directories of a job, for the interposer: "D1:D2:!D3", where
 * !D names a directory inside a batch directory that is not batch (a
 * 'none' policy, say).  Directories with ':' in their names are left out.
 */
int policy_job_batch (struct agent *a, const struct store_job *job,
                      char *out, size_t size)
{
    struct tier_policy_set *set = frozen_load (a, job);
    size_t o = 0;

    out[0] = '\0';
    if (!set)
        return -1;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < set->n; i++) {
            const struct tier_policy *p = &set->v[i];
            struct tier_policy_match m;
            bool batch = p->role == TIER_POLICY_BATCH;
            bool inside = false;
            size_t n;

            if ((pass == 0) != batch || strchr (p->dir, ':'))
                continue;
            /* the entry that decides the directory itself counts, once
             * (a locked site policy or a higher layer may differ) */
            if (tier_policy_resolve (set, p->dir, &m) < 0 || m.policy != p)
                continue;
            if (pass == 1) {
                for (int j = 0; j < set->n; j++)
                    if (set->v[j].role == TIER_POLICY_BATCH
                        && strcmp (set->v[j].dir, p->dir)
                        && tier_path_under (p->dir, set->v[j].dir))
                        inside = true;
                if (!inside)
                    continue;
            }
            n = strlen (p->dir) + (pass == 1);
            if (o + n + 2 > size)
                return 0;
            if (o)
                out[o++] = ':';
            if (pass == 1)
                out[o++] = '!';
            memcpy (out + o, p->dir, strlen (p->dir));
            o += strlen (p->dir);
            out[o] = '\0';
        }
    return 0;
}

/* The policies a user's next job would follow (site and user layers),
 * for requests from outside a job (tierctl prefetch).
 */
struct tier_policy_set *policy_user_set (struct agent *a, uid_t uid,
                                         gid_t gid, const char *user)
{
    struct tier_policy_set *all = tier_policy_set_create ();
    struct tier_policy_set *out = tier_policy_set_create ();
    struct tier_policy_conf_roots rb;
    struct store_job job;
    json_t *errors = json_array ();
    char *found = NULL;
    tier_error_t e;
    int kind = FOUND_NONE;

    if (!all || !out || !errors)
        goto fail;
    memset (&job, 0, sizeof (job));
    job.uid = uid;
    job.gid = gid;
    (void) snprintf (job.user, sizeof (job.user), "%s", user);
    (void) tier_policy_load_site (all, a->conf->site_policy_dir, report_cb,
                                  errors);
    if (a->conf->shared_state_dir[0])
        kind = as_user (a, &job, NULL, false, &found);
    if (kind == FOUND_USER
        && tier_policy_parse (all, found, strlen (found), TIER_LAYER_USER,
                              "user policies", &e) < 0)
        tier_log (LOG_WARNING, "user policies of %s: %s", user, e.text);
    tier_policy_roots_from_conf (a->conf, user, &rb);
    if (tier_policy_freeze (all, &rb.roots, out, NULL, &e) < 0)
        goto fail;
    free (found);
    json_decref (errors);
    tier_policy_set_destroy (all);
    return out;
fail:
    free (found);
    json_decref (errors);
    tier_policy_set_destroy (all);
    tier_policy_set_destroy (out);
    return NULL;
}

/* The endpoint directories of a job's frozen set of one direction: the
 * outputs (stage = out) for the plugin's output overlays, or the inputs
 * (stage = in) for its stage-in; a ',' list with '\' escapes ("" if
 * none).
 */
static int endpoint_list (struct agent *a, const struct store_job *job,
                          bool inputs, char *out, size_t size)
{
    struct tier_policy_set *set = frozen_load (a, job);
    size_t o = 0;

    out[0] = '\0';
    if (!set)
        return -1;
    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        char esc[2 * PATH_MAX];
        size_t n;

        if (!decides (set, p, TIER_POLICY_ENDPOINT)
            || tier_policy_is_input (p) != inputs
            || tier_list_escape (p->dir, esc, sizeof (esc)) < 0)
            continue;
        n = strlen (esc);
        if (o + n + 2 > size)
            break;
        if (o)
            out[o++] = ',';
        memcpy (out + o, esc, n + 1);
        o += n;
    }
    return 0;
}

int policy_job_endpoint (struct agent *a, const struct store_job *job,
                         char *out, size_t size)
{
    return endpoint_list (a, job, false, out, size);
}

int policy_job_inputs (struct agent *a, const struct store_job *job,
                       char *out, size_t size)
{
    return endpoint_list (a, job, true, out, size);
}

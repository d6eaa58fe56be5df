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
 * File work in the user's directory runs in the policy freezer
 * (policy_freezer.c), a child with the user's own credentials; this file
 * parses what it reads and composes what it writes.  Calls
 * policies/ (the model and its files), policy_freezer.c, the store and
 * lib/trust.h (the node's copies in StateDir/policies/).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
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
#include <time.h>
#include <unistd.h>

#include "lib/units.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/paths.h"
#include "lib/state.h"
#include "lib/trust.h"
#include "policies/files.h"
#include "policies/policy.h"
#include "agent.h"
#include "policy_freezer.h"
#include "policy.h"

#define FROZEN_FORMAT 1

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

/* The node's copies, with its registry: StateDir/policies, root's 0700
 * (lib/trust.h), made if missing. */
static int local_dir (struct agent *a, tier_error_t *error)
{
    static const struct tier_trust rule = {
        .kind = TIER_TRUST_ROOT_DIR,
        .create = 0700,
        .deny = 077,
    };
    char path[PATH_MAX];

    (void) snprintf (path, sizeof (path), "%s/policies", a->conf->state_dir);
    return tier_trust_open (path, &rule, error);
}

/* "JOB.RESTART.json", the name of a local copy (keep_local). */
static bool local_name (const char *s, uint32_t *id, uint32_t *rst)
{
    uint64_t v[2] = { 0, 0 };

    for (int i = 0; i < 2; i++) {
        if (!isdigit ((unsigned char) *s))
            return false;
        for (; isdigit ((unsigned char) *s); s++)
            if ((v[i] = v[i] * 10 + (uint64_t) (*s - '0')) > UINT32_MAX)
                return false;
        if (*s++ != '.')
            return false;
    }
    *id = (uint32_t) v[0];
    *rst = (uint32_t) v[1];
    return !strcmp (s, "json");
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
        uint32_t id, rst;
        if (!local_name (de->d_name, &id, &rst))
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

    if ((dfd = local_dir (a, &e)) < 0) {
        tier_log (LOG_ERR, "%s", e.text);
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

/* A path in the user's directory, for messages. */
static const char *user_path (struct agent *a, const struct store_job *job,
                              const char *sub, char *buf, size_t size)
{
    if (tier_state_user_path (a->conf->shared_state_dir, job->user, sub, buf,
                              size)
        < 0)
        (void) snprintf (buf, size, "%s", a->conf->shared_state_dir);
    return buf;
}

/* The user and job layers over the site's: what the freezer found (kind,
 * found) and the job's options. */
static void add_layers (struct agent *a, const struct store_job *job,
                        struct tier_policy_set *all, int kind,
                        const char *found, json_t *errors)
{
    char path[PATH_MAX];
    json_error_t jerr;
    tier_error_t e;
    json_t *opts;

    (void) tier_policy_load_site (all, a->conf->site_policy_dir, report_cb,
                                  errors);
    if (kind == POLMSG_USER) {
        if (tier_policy_parse (all, found, strlen (found), TIER_LAYER_USER,
                               user_path (a, job, TIER_STATE_POLICIES, path,
                                          sizeof (path)),
                               &e)
            < 0)
            note (errors, "user policies of %s are not used: %s", job->user,
                  e.text);
    }
    else if (kind == POLMSG_ERROR && a->conf->shared_state_dir[0])
        note (errors, "user policies of %s cannot be read: %s", job->user,
              found && found[0] ? found : "the helper failed");
    if (!(opts = json_loads (job->options[0] ? job->options : "{}", 0, &jerr))
        || tier_policy_from_options (all, opts, &e) < 0)
        note (errors, "job %u: its --tier options give no policies: %s",
              job->job_id, opts ? e.text : "not JSON");
    json_decref (opts);
}

/* A freeze under way: the freezer's read, the composition, the
 * freezer's publication (policy_job_freeze). */
struct freeze {
    struct agent *a;
    struct store_job job;
    policy_freeze_f done;
    void *arg;
    char *text; /* being published */
    int count, nrefused;
};

static void freeze_end (struct freeze *f, const char *text, const char *by,
                        bool shared)
{
    json_t *res = NULL;

    if (text) {
        keep_local (f->a, &f->job, text);
        tier_log (LOG_INFO, "job %u: %d policies frozen (by %s), %d refused",
                  f->job.job_id, f->count, by, f->nrefused);
        res = json_pack ("{s:i s:i s:b}", "count", f->count, "refused",
                         f->nrefused, "shared", shared);
    }
    f->done (f->a, res, f->arg);
    free (f->text);
    free (f);
}

/* The freezer published f->text, or found the set another node of the
 * job published first (cur): that one (adopted) is in force. */
static void on_published (struct agent *a, int k, char *cur, void *arg)
{
    struct freeze *f = arg;
    const struct store_job *job = &f->job;
    const char *by = a->node;
    char path[PATH_MAX], *mine;
    int c2 = 0, r2 = 0;
    tier_error_t e;

    if (k == POLMSG_FROZEN && cur && strcmp (cur, f->text)) {
        if ((mine = adopt_frozen (a, job, cur, &c2, &r2, &e))) {
            free (f->text);
            f->text = mine;
            f->count = c2;
            f->nrefused = r2;
            by = "another node";
        }
        else
            tier_log (LOG_WARNING,
                      "job %u: the frozen policy set in %s is "
                      "unusable (%s); this node applies its own",
                      job->job_id,
                      user_path (a, job, TIER_STATE_JOBS, path, sizeof (path)),
                      e.text);
    }
    else if (k != POLMSG_FROZEN)
        tier_log (LOG_WARNING,
                  "job %u: its policy set is not shared with "
                  "its other nodes: %s",
                  job->job_id, cur && cur[0] ? cur : "the helper failed");
    free (cur);
    freeze_end (f, f->text, by, true);
}

/* What the freezer found (kind, found; NULL without a shared state
 * directory): adopt another node's frozen set, or compose one and
 * publish it. */
static void on_found (struct agent *a, int kind, char *found, void *arg)
{
    struct freeze *f = arg;
    const struct store_job *job = &f->job;
    struct tier_policy_set *all = tier_policy_set_create ();
    json_t *errors = json_array ();
    bool shared = a->conf->shared_state_dir[0] != '\0';
    char path[PATH_MAX], *text = NULL;
    tier_error_t e;

    if (!all || !errors)
        goto out;
    if (kind == POLMSG_FROZEN) {
        if ((text = adopt_frozen (a, job, found, &f->count, &f->nrefused,
                                  &e))) {
            /* frozen by another node of the job: apply the same */
            keep_local (a, job, text);
            tier_log (LOG_INFO,
                      "job %u: %d policies, frozen by another "
                      "node, %d refused",
                      job->job_id, f->count, f->nrefused);
            f->done (a,
                     json_pack ("{s:i s:i s:b}", "count", f->count, "refused",
                                f->nrefused, "shared", 1),
                     f->arg);
            free (text);
            free (f);
            f = NULL;
            goto out;
        }
        note (errors,
              "job %u: the frozen policy set in %s is unusable "
              "(%s); freezing anew here",
              job->job_id,
              user_path (a, job, TIER_STATE_JOBS, path, sizeof (path)), e.text);
        kind = POLMSG_NONE;
    }
    add_layers (a, job, all, kind, found, errors);
    text = compose (a, job, all, NULL, errors, &f->count, &f->nrefused);
out:
    free (found);
    json_decref (errors);
    tier_policy_set_destroy (all);
    if (!f)
        return;
    if (text && shared) {
        f->text = text;
        policy_freezer_write_start (a, &f->job, text, on_published, f);
        return;
    }
    freeze_end (f, text, a->node, false);
    free (text);
}

void policy_job_freeze (struct agent *a, const struct store_job *job,
                        policy_freeze_f done, void *arg)
{
    struct freeze *f = calloc (1, sizeof (*f));

    if (!f) {
        done (a, NULL, arg);
        return;
    }
    f->a = a;
    f->job = *job;
    f->done = done;
    f->arg = arg;
    if (a->conf->shared_state_dir[0])
        policy_freezer_read_start (a, &f->job, on_found, f);
    else
        on_found (a, POLMSG_NONE, NULL, f);
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
    if ((dfd = local_dir (a, error)) < 0)
        return NULL;
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
        *reserve = tier_size_add (*reserve, psize);
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
 * for requests from outside a job (tierctl prefetch): kind and text are
 * what the freezer read (userpol.c).
 */
struct tier_policy_set *policy_user_set (struct agent *a, uid_t uid,
                                         const char *user, int kind,
                                         const char *text)
{
    struct tier_policy_set *all = tier_policy_set_create ();
    struct tier_policy_set *out = tier_policy_set_create ();
    struct tier_policy_conf_roots rb;
    json_t *errors = json_array ();
    tier_error_t e;

    if (!all || !out || !errors)
        goto error;
    (void) tier_policy_load_site (all, a->conf->site_policy_dir, report_cb,
                                  errors);
    if (kind == POLMSG_USER && text
        && tier_policy_parse (all, text, strlen (text), TIER_LAYER_USER,
                              "user policies", &e)
               < 0)
        tier_log (LOG_WARNING, "user policies of %s (uid %d): %s", user,
                  (int) uid, e.text);
    tier_policy_roots_from_conf (a->conf, user, &rb);
    if (tier_policy_freeze (all, &rb.roots, out, NULL, &e) < 0)
        goto error;
    json_decref (errors);
    tier_policy_set_destroy (all);
    return out;
error:
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
            || !(inputs ? tier_policy_is_input (p) : tier_policy_is_output (p))
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

int policy_job_window (struct agent *a, const struct store_job *job, char *out,
                       size_t size)
{
    struct tier_policy_set *set = frozen_load (a, job);
    size_t o = 0;

    out[0] = '\0';
    if (!set)
        return -1;
    for (int i = 0; i < set->n; i++) {
        const struct tier_policy *p = &set->v[i];
        size_t n = strlen (p->dir);

        if (!decides (set, p, TIER_POLICY_ENDPOINT)
            || !tier_policy_is_window (p) || strchr (p->dir, ':'))
            continue;
        if (o + n + 2 > size)
            break;
        if (o)
            out[o++] = ':';
        memcpy (out + o, p->dir, n + 1);
        o += n;
    }
    return 0;
}

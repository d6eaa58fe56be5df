/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* rpc.c - the agent's requests: parse, authorise, dispatch
 *
 * Every request is a JSON object with "op".  The caller's identity is the
 * kernel's (SO_PEERCRED); a caller's job is derived from its pid (peer.c),
 * never taken from the request.  Root and SlurmUser may act on every job,
 * a user only on their own.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "lib/units.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/state.h"
#include "bcache.h"
#include "agent.h"
#include "peer.h"
#include "policy.h"
#include "streams.h"

#define JOB_ID_MAX 0xfffffff0U
#define TIER_OPT_LIST_MAX 16384 /* as the plugin's option values */

struct rpc_op {
    const char *name;
    rpc_f fn;
    bool privileged;            /* root or SlurmUser only */
};

char *rpc_error_body (int errnum, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    json_t *o;
    char *s;

    va_start (ap, fmt);
    (void) vsnprintf (text, sizeof (text), fmt, ap);
    va_end (ap);
    if (!(o = json_pack ("{s:i s:s}", "errno", errnum ? errnum : EIO,
                         "error", text)))
        return NULL;
    s = json_dumps (o, JSON_COMPACT);
    json_decref (o);
    return s;
}

uid_t agent_slurm_uid (const struct tier_conf *conf)
{
    struct passwd *pw = getpwnam (conf->slurm_user);

    return pw ? pw->pw_uid : (uid_t) -1;
}

bool agent_privileged (struct agent *a, uid_t uid)
{
    return uid == 0 || (a->slurm_uid != (uid_t) -1 && uid == a->slurm_uid);
}

static json_t *job_to_json (const struct store_job *j)
{
    static const char *states[] = { "?", "running", "ended", "reconciled" };
    json_error_t jerr;
    json_t *opts = json_loads (j->options[0] ? j->options : "{}", 0, &jerr);
    json_t *o = json_pack ("{s:I s:I s:I s:s s:I s:s s:s s:I s:I s:i}",
                           "job_id", (json_int_t) j->job_id,
                           "restart", (json_int_t) j->restart,
                           "batch_id", (json_int_t) j->batch_id,
                           "user", j->user,
                           "uid", (json_int_t) j->uid,
                           "node", j->node,
                           "state", states[j->state <= 3 ? j->state : 0],
                           "registered", (json_int_t) j->registered,
                           "ended", (json_int_t) j->ended,
                           "steps", (int) j->steps);
    if (!o) {
        json_decref (opts);
        return NULL;
    }
    json_object_set_new (o, "array_task_id",
                         j->array_task_id == STORE_NO_TASK
                         ? json_null ()
                         : json_integer (j->array_task_id));
    json_object_set_new (o, "options", opts ? opts : json_object ());
    return o;
}

/* A job-id-like member: an integer in 1..JOB_ID_MAX. */
static int get_id (json_t *req, const char *key, bool required,
                   uint32_t *out, tier_error_t *error)
{
    json_t *v = json_object_get (req, key);

    if (!v) {
        if (!required)
            return 0;
        errno = EINVAL;
        return tier_errprintf (error, "'%s' is missing", key);
    }
    if (!json_is_integer (v) || json_integer_value (v) < 0
        || json_integer_value (v) > (json_int_t) UINT32_MAX) {
        errno = EINVAL;
        return tier_errprintf (error, "'%s' must be an integer in 0..%u",
                               key, UINT32_MAX);
    }
    *out = (uint32_t) json_integer_value (v);
    return 0;
}

static bool user_name_valid (const char *s)
{
    size_t n = strlen (s);

    if (n == 0 || n >= 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum ((unsigned char) s[i]) && !strchr ("._-$", s[i]))
            return false;
    return true;
}

/* Look up the job a record request names, and authorise the caller. */
static int job_for_caller (struct agent *a, struct conn *c, uint32_t job_id,
                           json_t *req, struct store_job *job,
                           tier_error_t *error)
{
    uint32_t restart = UINT32_MAX;
    int rc;

    if (get_id (req, "restart", false, &restart, error) < 0)
        return -1;
    if (restart == UINT32_MAX)
        rc = store_job_latest (a->store, job_id, job, error);
    else
        rc = store_job_get (a->store, job_id, restart, job, error);
    if (rc < 0)
        return -1;
    if (!agent_privileged (a, c->cred.uid) && job->uid != c->cred.uid) {
        errno = EPERM;
        return tier_errprintf (error, "job %u belongs to another user",
                               job_id);
    }
    return 0;
}

static json_t *op_ping (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    return json_pack ("{s:s s:i s:s s:i s:I s:b}",
                      "version", PACKAGE_VERSION,
                      "protocol", TIER_PROTO_VERSION,
                      "node", a->node,
                      "pid", (int) getpid (),
                      "uptime", (json_int_t) ((tier_now_ms ()
                                               - a->started_ms) / 1000),
                      "enabled", !a->disabled && a->conf->enabled);
}

/* The user's directory in the shared state directory (policies, stats):
 * made by root for the user, refused if someone else made it.  A failure
 * is logged; the job goes on (tiers that need it say so).
 */
static void ensure_user_state (struct agent *a, const struct store_job *job)
{
    tier_error_t error;
    int rootfd, fd;

    if (!a->conf->shared_state_dir[0])
        return;
    if ((rootfd = tier_state_open_root (a->conf->shared_state_dir,
                                        &error)) < 0) {
        tier_log (LOG_ERR, "SharedStateDir: %s", error.text);
        return;
    }
    if ((fd = tier_state_user_dir (rootfd, job->user, job->uid, job->gid,
                                   &error)) < 0)
        tier_log (LOG_ERR, "SharedStateDir %s/%s", a->conf->shared_state_dir,
                  error.text);
    else
        close (fd);
    close (rootfd);
}

struct reserved_ctx {
    uint32_t except;
    uint64_t sum;
    bool only_uid;
    uid_t uid;
    bool write_caches; /* their write caches only */
};

static int reserved_cb (const struct store_job *j, void *arg)
{
    struct reserved_ctx *rc = arg;

    if (j->state != STORE_JOB_RUNNING || j->job_id == rc->except
        || (rc->only_uid && j->uid != rc->uid))
        return 0;
    if (!rc->write_caches)
        rc->sum = tier_size_add (rc->sum, j->reserved);
    rc->sum = tier_size_add (rc->sum, j->write_cache);
    return 0;
}

/* What the NVDIMM tier holds for jobs other than except: the running
 * jobs' reservations (scratch and write caches), the staged inputs, and
 * the write caches of ended jobs whose outputs are not all on the GFS
 * yet (what their migrators last counted). */
uint64_t agent_nvdimm_taken (struct agent *a, uint32_t except)
{
    struct reserved_ctx rc = { .except = except };
    tier_error_t error;

    (void) store_job_foreach (a->store, reserved_cb, &rc, &error);
    rc.sum = tier_size_add (rc.sum, stage_bytes_held (a, 0, -1));
    rc.sum = tier_size_add (rc.sum, bcache_held (a, except));
    return tier_size_add (rc.sum, migrate_held_ended (a, (uid_t) -1));
}

/* NVDIMM scratch reservations: with the write caches and staged inputs,
 * the sum stays within NvdimmCapacity (0: no accounting).
 */
static int reserve_scratch (struct agent *a, struct store_job *job,
                            uint64_t want, char *why, size_t size)
{
    struct reserved_ctx rc = { .except = job->job_id };
    tier_error_t error;
    uint64_t cap = a->conf->nvdimm_capacity, staged;

    job->reserved = 0;
    if (want == 0 || cap == 0) {
        job->reserved = want;
        return 0;
    }
    if (store_job_foreach (a->store, reserved_cb, &rc, &error) < 0)
        return -1;
    /* staged inputs and ended jobs' write caches are on the NVDIMM tier
     * too */
    staged = stage_bytes_held (a, 0, -1);
    rc.sum = tier_size_add (rc.sum, staged);
    rc.sum = tier_size_add (rc.sum, bcache_held (a, job->job_id));
    rc.sum = tier_size_add (rc.sum, migrate_held_ended (a, (uid_t) -1));
    if (want > cap || rc.sum > cap - want) {
        char held[64] = "";
        if (staged)
            (void) snprintf (held, sizeof (held),
                             ", %llu MiB of them by staged inputs",
                             (unsigned long long) (staged >> 20));
        (void) snprintf (why, size,
                         "the NVDIMM tier of node %s cannot "
                         "reserve %llu MiB (%llu of %llu MiB are "
                         "reserved%s)",
                         a->node, (unsigned long long) (want >> 20),
                         (unsigned long long) (rc.sum >> 20),
                         (unsigned long long) (cap >> 20), held);
        return -1;
    }
    job->reserved = want;
    return 0;
}

uint64_t agent_reserved (struct agent *a)
{
    struct reserved_ctx rc = { .except = 0 };
    tier_error_t error;

    (void) store_job_foreach (a->store, reserved_cb, &rc, &error);
    return rc.sum;
}

/* The record a registration asks for (not stored yet), every field of
 * the request checked; *want is the scratch it asks to reserve. */
static int register_parse (struct agent *a, json_t *req, struct store_job *job,
                           uint64_t *want, tier_error_t *error)
{
    uint32_t job_id = 0, restart = 0, batch_id = 0, task = STORE_NO_TASK;
    uint32_t uid = 0, gid = 0;
    const char *user = NULL;
    json_t *opts = json_object_get (req, "options");
    json_t *reserve = json_object_get (req, "scratch_reserve");
    json_t *groups = json_object_get (req, "groups");
    char *optstr = NULL;

    if (get_id (req, "job_id", true, &job_id, error) < 0
        || get_id (req, "restart", false, &restart, error) < 0
        || get_id (req, "batch_id", false, &batch_id, error) < 0
        || get_id (req, "array_task_id", false, &task, error) < 0
        || get_id (req, "uid", true, &uid, error) < 0
        || get_id (req, "gid", true, &gid, error) < 0)
        return -1;
    if (job_id == 0 || job_id > JOB_ID_MAX) {
        errno = EINVAL;
        return tier_errprintf (error, "job_id %u is out of range", job_id);
    }
    if (json_unpack (req, "{s:s}", "user", &user) < 0
        || !user_name_valid (user)) {
        errno = EINVAL;
        return tier_errprintf (error, "'user' must be a user name");
    }
    if (opts && !json_is_object (opts)) {
        errno = EINVAL;
        return tier_errprintf (error, "'options' must be an object");
    }
    if (reserve
        && (!json_is_integer (reserve) || json_integer_value (reserve) < 0)) {
        errno = EINVAL;
        return tier_errprintf (error, "'scratch_reserve' must be a byte "
                                      "count");
    }
    if (opts
        && (!(optstr = json_dumps (opts, JSON_COMPACT | JSON_SORT_KEYS))
            || strlen (optstr) >= sizeof (job->options))) {
        free (optstr);
        errno = E2BIG;
        return tier_errprintf (error, "'options' is too large");
    }
    memset (job, 0, sizeof (*job));
    /* the job's group list, as Slurm gave it to the step (the plugin's
     * S_JOB_SUPPLEMENTARY_GIDS): work on the job's data uses it */
    job->ngroups = -1;
    if (groups && store_job_set_groups (job, groups, error) < 0) {
        free (optstr);
        return -1;
    }
    job->job_id = job_id;
    job->restart = restart;
    job->batch_id = batch_id ? batch_id : job_id;
    job->array_task_id = task;
    job->uid = uid;
    job->gid = gid;
    (void) snprintf (job->user, sizeof (job->user), "%s", user);
    (void) snprintf (job->node, sizeof (job->node), "%s", a->node);
    (void) snprintf (job->options, sizeof (job->options), "%s",
                     optstr ? optstr : "{}");
    free (optstr);
    job->state = STORE_JOB_RUNNING;
    job->registered = time (NULL);
    job->steps = 1;
    job->exit_code = -1;
    *want = reserve ? (uint64_t) json_integer_value (reserve) : 0;
    return 0;
}

/* The job.register reply for job, once its frozen set is there: the
 * pipeline directories (their reservation made now, on the first step),
 * the endpoint and batch directories.  why: the reservation's refusal,
 * if any (updated). */
/* A write cache with less room than this is none: the job's output
 * directories are then the plain GFS (it would only get ENOSPC on its
 * first write). */
#define WRITE_CACHE_MIN (1ULL << 20)

/* Does the job have output directories: its --tier-stage-out, or
 * (policy_out) its frozen policies' stage = out? */
static bool wants_write_cache (const struct store_job *job, bool policy_out)
{
    json_error_t jerr;
    json_t *o;
    const char *s;
    bool yes;

    if (policy_out)
        return true;
    o = json_loads (job->options[0] ? job->options : "{}", 0, &jerr);
    s = json_string_value (json_object_get (o, "stage_out"));
    yes = s && s[0];
    json_decref (o);
    return yes;
}

static uint64_t min_u64 (uint64_t x, uint64_t y)
{
    return x < y ? x : y;
}

/* The job's write cache on the node, decided at its first registration
 * here: WriteCacheSize (a quarter of NvdimmCapacity by default), less if
 * the tier has less room left (NvdimmCapacity less what is reserved and
 * held: agent_nvdimm_taken), its file system has less free, or the
 * user's caches take nearly WriteCacheUserMax already (their running jobs' write caches, and
 * ended jobs' not all on the GFS yet: a migration that keeps failing
 * keeps its cache).  It is reserved (job->write_cache) and the plugin
 * mounts the cache with that size, so that the outputs of a running job
 * cannot fill the tier.  Less than WRITE_CACHE_MIN is none: the job's
 * output directories are the plain GFS ("outbox_denied" says why).  0
 * with no bound at all (no NvdimmCapacity, WriteCacheSize or
 * WriteCacheUserMax): the cache is not limited. */
static void write_cache_grant (struct agent *a, struct store_job *job,
                               char *why, size_t whysize)
{
    const struct tier_conf *c = a->conf;
    uint64_t want = c->write_cache_size ? c->write_cache_size
                                        : c->nvdimm_capacity / 4;
    uint64_t grant = want ? want : UINT64_MAX;
    char h[32], m[32];

    job->write_cache = 0;
    why[0] = '\0';
    if (c->write_cache_user_max) {
        struct reserved_ctx rc = { .except = job->job_id,
                                   .only_uid = true,
                                   .uid = job->uid,
                                   .write_caches = true };
        tier_error_t error;
        uint64_t take;

        (void) store_job_foreach (a->store, reserved_cb, &rc, &error);
        take = tier_size_add (rc.sum, migrate_held_ended (a, job->uid));
        if (take > c->write_cache_user_max - WRITE_CACHE_MIN
            || c->write_cache_user_max < WRITE_CACHE_MIN) {
            (void) snprintf (why, whysize,
                             "uid %u's write caches on node %s take %s "
                             "already (WriteCacheUserMax %s): the job "
                             "writes to the GFS directly",
                             (unsigned) job->uid, a->node,
                             tier_size_format (take, h, sizeof (h)),
                             tier_size_format (c->write_cache_user_max, m,
                                               sizeof (m)));
            return;
        }
        grant = min_u64 (grant, c->write_cache_user_max - take);
    }
    if (c->nvdimm_capacity) {
        uint64_t taken = tier_size_add (agent_nvdimm_taken (a, job->job_id),
                                        job->reserved);
        uint64_t room = taken < c->nvdimm_capacity ? c->nvdimm_capacity - taken
                                                   : 0;
        if (room < WRITE_CACHE_MIN) {
            (void) snprintf (why, whysize,
                             "the NVDIMM tier of node %s has no room for a "
                             "write cache (%s of %s reserved or held): the "
                             "job writes to the GFS directly",
                             a->node, tier_size_format (taken, h, sizeof (h)),
                             tier_size_format (c->nvdimm_capacity, m,
                                               sizeof (m)));
            return;
        }
        grant = min_u64 (grant, room);
    }
    if (c->nvdimm_dir[0]) {
        /* and the file system's own free space (on a tmpfs tier the
         * caches are file systems of their own, which it does not see:
         * a bound all the same) */
        struct statvfs sf;
        uint64_t fs_free;
        if (statvfs (c->nvdimm_dir, &sf) == 0) {
            fs_free = (uint64_t) sf.f_bavail * sf.f_frsize;
            if (fs_free < WRITE_CACHE_MIN) {
                (void) snprintf (why, whysize,
                                 "the node's write cache is full (%llu KiB "
                                 "free in %s): the job writes to the GFS "
                                 "directly",
                                 (unsigned long long) (fs_free >> 10),
                                 c->nvdimm_dir);
                return;
            }
            grant = min_u64 (grant, fs_free);
        }
    }
    job->write_cache = grant == UINT64_MAX ? 0 : grant;
}

static json_t *register_answer (struct agent *a, struct store_job *job,
                                char *why, size_t whysize, tier_error_t *error)
{
    static char scratch[TIER_OPT_LIST_MAX];
    static char refused[2048];
    uint64_t sum = 0;
    bool have_scratch, policy_out;
    json_t *res;

    /* the frozen set decides the pipeline directories (job options are
     * its job layer); their sizes are the node's reservation */
    have_scratch = policy_job_pipeline (a, job, scratch, sizeof (scratch), &sum,
                                        refused, sizeof (refused))
                   == 0;
    if (have_scratch && job->steps == 1 && sum > job->reserved
        && !job->scratch_denied) {
        if (reserve_scratch (a, job, sum, why, whysize) < 0)
            job->scratch_denied = 1;
        if (store_job_put (a->store, job, error) < 0)
            return NULL;
    }
    if (job->scratch_denied && !why[0])
        (void) snprintf (why, whysize,
                         "the NVDIMM tier of node %s "
                         "could not reserve the job's scratch",
                         a->node);
    res = json_pack ("{s:I s:I s:I s:s s:b s:b s:s}", "job_id",
                     (json_int_t) job->job_id, "restart",
                     (json_int_t) job->restart, "batch_id",
                     (json_int_t) job->batch_id, "node", a->node, "enabled",
                     !a->disabled && a->conf->enabled, "scratch_ok",
                     !job->scratch_denied, "scratch_error", why);
    if (res && have_scratch) {
        json_object_set_new (res, "scratch", json_string (scratch));
        if (refused[0])
            json_object_set_new (res, "refused", json_string (refused));
    }
    policy_out = res
                 && policy_job_endpoint (a, job, scratch, sizeof (scratch)) == 0
                 && scratch[0];
    if (policy_out)
        json_object_set_new (res, "stage_out", json_string (scratch));
    if (res && job->steps == 1 && wants_write_cache (job, policy_out)) {
        char wwhy[512];
        write_cache_grant (a, job, wwhy, sizeof (wwhy));
        if (wwhy[0])
            json_object_set_new (res, "outbox_denied", json_string (wwhy));
        if (store_job_put (a->store, job, error) < 0) {
            json_decref (res);
            return NULL;
        }
    }
    if (res && job->write_cache)
        json_object_set_new (res, "write_cache",
                             json_integer ((json_int_t) job->write_cache));
    /* endpoint inputs: staged in by the plugin with --tier-stage-in's
     * items, from the first step on (the prolog cannot know them) */
    if (res && policy_job_inputs (a, job, scratch, sizeof (scratch)) == 0
        && scratch[0])
        json_object_set_new (res, "stage_in", json_string (scratch));
    if (res && policy_job_batch (a, job, scratch, sizeof (scratch)) == 0)
        json_object_set_new (res, "batch", json_string (scratch));
    if (res && policy_job_window (a, job, scratch, sizeof (scratch)) == 0
        && scratch[0])
        json_object_set_new (res, "window", json_string (scratch));
    if (!res) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
    }
    return res;
}

/* A job's first registration on the node, being answered: its policy
 * freeze (the user's files) and its mirror check (the GFS) run in
 * children, off the loop, and the reply goes out when they report, in
 * AGENT_REGISTER_MS in all.  Other registrations of the job that come
 * meanwhile wait for it, in order (they need its frozen set).
 */
#define REG_WAITERS_MAX 4096
struct reg_wait {
    struct conn *c; /* NULL once gone */
    uint32_t msgid;
    json_t *req;
    struct reg_wait *next;
};
struct reg {
    struct agent *a;
    struct conn *c; /* who asked; NULL once gone */
    uint32_t msgid;
    uint32_t job_id, restart;
    int64_t deadline; /* tier_now_ms () */
    bool in_call;     /* op_job_register has not returned yet */
    bool done;        /* answered while in_call: res is the reply */
    json_t *pol, *res;
    char why[256];
    int nwait;
    struct reg_wait *wait, **tail;
    struct reg *next;
};
static struct reg *regs;
static struct reg_wait *woken; /* being answered (reg_wake) */

static json_t *op_job_register (struct agent *a, struct conn *c, json_t *req,
                                tier_error_t *error);

/* The registrations that waited for r, now (r is no more). */
static void reg_wake (struct agent *a, struct reg_wait *list)
{
    woken = list;
    while (woken) {
        struct reg_wait *w = woken;
        struct conn *c = w->c;
        woken = w->next;
        if (c) {
            uint32_t id = c->req_id;
            tier_error_t e = { { 0 } };
            json_t *res;
            c->waiting--;
            c->req_id = w->msgid;
            c->req_fds = NULL;
            c->req_nfds = 0;
            errno = 0;
            res = op_job_register (a, c, w->req, &e);
            c->req_id = id;
            if (res != RPC_DEFERRED) {
                char *body;
                if (res) {
                    body = json_dumps (res, JSON_COMPACT);
                    json_decref (res);
                }
                else
                    body = rpc_error_body (errno ? errno : EIO, "%s",
                                           e.text[0] ? e.text
                                                     : "job.register failed");
                server_reply (a, c, w->msgid, body); /* may close c */
            }
        }
        json_decref (w->req);
        free (w);
    }
}

/* The reply is complete (r->res NULL: failed, r->why says why). */
static void reg_finish (struct reg *r)
{
    struct agent *a = r->a;
    struct reg **pp;
    json_t *res = policy_reply (r->pol, r->res);
    struct reg_wait *list = r->wait;
    char *body;

    r->pol = NULL;
    r->res = res;
    if (r->in_call) {
        r->done = true;
        return;
    }
    for (pp = &regs; *pp && *pp != r; pp = &(*pp)->next)
        ;
    if (*pp)
        *pp = r->next;
    if (r->c) {
        body = res ? json_dumps (res, JSON_COMPACT)
                   : rpc_error_body (EIO, "job %u: %s", r->job_id,
                                     r->why[0] ? r->why
                                               : "its registration failed");
        r->c->waiting--;
        server_reply (a, r->c, r->msgid, body);
    }
    json_decref (res);
    free (r);
    reg_wake (a, list);
}

static void reg_bound (struct agent *a, char *binds, void *arg)
{
    struct reg *r = arg;

    (void) a;
    if (binds && r->res)
        json_object_set_new (r->res, "bind", json_string (binds));
    free (binds);
    reg_finish (r);
}

static void reg_frozen (struct agent *a, json_t *pol, void *arg)
{
    struct reg *r = arg;
    struct store_job job;
    tier_error_t e;
    const char *batch;

    r->pol = pol;
    if (store_job_get (a->store, r->job_id, r->restart, &job, &e) < 0
        || job.state != STORE_JOB_RUNNING) {
        (void) snprintf (r->why, sizeof (r->why),
                         "the job ended while it registered");
        reg_finish (r);
        return;
    }
    if (!(r->res = register_answer (a, &job, r->why, sizeof (r->why), &e))) {
        (void) snprintf (r->why, sizeof (r->why), "%.200s", e.text);
        reg_finish (r);
        return;
    }
    /* eager mode: mirrors of batch directories, checked once per job
     * and node (the first step binds them for all) */
    batch = json_string_value (json_object_get (r->res, "batch"));
    if (batch && batch[0])
        mirror_job_binds (a, &job, r->deadline, reg_bound, r);
    else
        reg_finish (r);
}

void rpc_conn_gone (struct agent *a, struct conn *c)
{
    (void) a;
    for (struct reg *r = regs; r; r = r->next) {
        if (r->c == c) {
            r->c = NULL;
            c->waiting--;
        }
        for (struct reg_wait *w = r->wait; w; w = w->next)
            if (w->c == c) {
                w->c = NULL;
                c->waiting--;
            }
    }
    for (struct reg_wait *w = woken; w; w = w->next)
        if (w->c == c) {
            w->c = NULL;
            c->waiting--;
        }
}

static json_t *reg_queue (struct reg *r, struct conn *c, json_t *req,
                          tier_error_t *error)
{
    struct reg_wait *w;

    if (r->nwait >= REG_WAITERS_MAX || !(w = calloc (1, sizeof (*w)))) {
        errno = EAGAIN;
        tier_errprintf (error, "job %u: %d registrations wait already",
                        r->job_id, r->nwait);
        return NULL;
    }
    w->c = c;
    w->msgid = c->req_id;
    w->req = json_incref (req);
    *r->tail = w;
    r->tail = &w->next;
    r->nwait++;
    c->waiting++;
    return RPC_DEFERRED;
}

static json_t *op_job_register (struct agent *a, struct conn *c, json_t *req,
                                tier_error_t *error)
{
    struct store_job job, old;
    char why[256] = "";
    uint64_t want = 0;
    tier_error_t e2;
    struct reg *r;
    json_t *res;

    if (register_parse (a, req, &job, &want, error) < 0)
        return NULL;
    for (r = regs; r; r = r->next)
        if (r->job_id == job.job_id)
            return reg_queue (r, c, req, error);
    /* a step's restart count from its environment, which its user sets:
     * the job's run on this node, if one is running, is the one (a
     * forged count must not make a second record and reservation) */
    if (json_is_true (json_object_get (req, "restart_from_env"))
        && store_job_latest (a->store, job.job_id, &old, &e2) == 0
        && old.state == STORE_JOB_RUNNING && old.restart != job.restart) {
        tier_log (LOG_NOTICE,
                  "job %u: a step claimed restart %u; it is "
                  "counted in the run on this node, %u",
                  job.job_id, job.restart, old.restart);
        job.restart = old.restart;
    }
    if (store_job_get (a->store, job.job_id, job.restart, &old, &e2) == 0
        && old.state == STORE_JOB_RUNNING) {
        job.registered = old.registered;
        job.steps = old.steps + 1;
        job.reserved = old.reserved;
        job.scratch_denied = old.scratch_denied;
        job.exit_code = old.exit_code;
        if (job.ngroups < 0) {
            /* a step without a list keeps the one an earlier step gave */
            job.ngroups = old.ngroups;
            memcpy (job.groups, old.groups, sizeof (job.groups));
        }
    }
    else if (reserve_scratch (a, &job, want, why, sizeof (why)) < 0)
        job.scratch_denied = 1;
    if (store_job_put (a->store, &job, error) < 0)
        return NULL;
    if (job.steps != 1)
        return register_answer (a, &job, why, sizeof (why), error);
    tier_log (LOG_INFO, "job %u (batch %u, user %s) registered", job.job_id,
              job.batch_id, job.user);
    ensure_user_state (a, &job);
    if (!(r = calloc (1, sizeof (*r)))) {
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    r->a = a;
    r->c = c;
    r->msgid = c->req_id;
    r->job_id = job.job_id;
    r->restart = job.restart;
    r->deadline = tier_now_ms () + AGENT_REGISTER_MS;
    r->tail = &r->wait;
    (void) snprintf (r->why, sizeof (r->why), "%s", why);
    r->in_call = true;
    r->next = regs;
    regs = r;
    c->waiting++;
    policy_job_freeze (a, &job, reg_frozen, r);
    r->in_call = false;
    if (!r->done)
        return RPC_DEFERRED;
    /* answered at once: no child was needed */
    res = r->res;
    r->res = NULL;
    if (!res) {
        errno = EIO;
        tier_errprintf (error, "job %u: %s", r->job_id,
                        r->why[0] ? r->why : "its registration failed");
    }
    c->waiting--;
    r->c = NULL;
    reg_finish (r); /* unlinks and frees it */
    return res;
}

static json_t *op_job_end (struct agent *a, struct conn *c, json_t *req,
                           tier_error_t *error)
{
    struct store_job job;
    uint32_t job_id = 0;

    if (get_id (req, "job_id", true, &job_id, error) < 0
        || job_for_caller (a, c, job_id, req, &job, error) < 0)
        return NULL;
    {
        /* what the epilog counted in the job's scratch on this node */
        json_int_t files = 0, bytes = 0, copyups = 0, cbytes = 0, kept = 0;
        if (json_unpack (req, "{s?I s?I s?I s?I s?I}", "scratch_files",
                         &files, "scratch_bytes", &bytes, "copyups",
                         &copyups, "copyup_bytes", &cbytes, "kept_bytes",
                         &kept) == 0
            && files >= 0 && bytes >= 0 && copyups >= 0 && cbytes >= 0
            && kept >= 0 && (files || bytes || copyups)) {
            /* copy-ups read their file from the GFS; kept data is
             * written to it */
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_GFS_BYTES_READ,
                     cbytes);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_GFS_BYTES_WRITTEN,
                     kept);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_SCRATCH_FILES,
                     files);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_SCRATCH_BYTES,
                     bytes);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_BYTES_NVDIMM,
                     bytes);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_GFS_BYTES_AVOIDED,
                     bytes);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_SCRATCH_PEAK,
                     bytes);
            ctr_add (a, &job, TIER_ROLE_PIPELINE, TIER_CTR_COPYUPS, copyups);
        }
    }
    if (job.state == STORE_JOB_RUNNING) {
        stage_job_end (a, &job);
        migrate_job_end (a, &job);
        job.state = STORE_JOB_ENDED;
        job.ended = time (NULL);
        if (store_job_put (a->store, &job, error) < 0)
            return NULL;
        (void) ctr_flush (a);
        tier_log (LOG_INFO, "job %u ended", job.job_id);
        stats_tick (a, true);           /* the batch's final snapshot */
    }
    return json_pack ("{s:I s:s}", "job_id", (json_int_t) job.job_id,
                      "state", "ended");
}

struct list_ctx {
    struct agent *a;
    uid_t uid;
    bool all;
    json_t *arr;
};

static int list_cb (const struct store_job *j, void *arg)
{
    struct list_ctx *lc = arg;
    json_t *o;

    if (!lc->all && j->uid != lc->uid)
        return 0;
    if ((o = job_to_json (j)))
        json_array_append_new (lc->arr, o);
    return 0;
}

static json_t *op_jobs (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error)
{
    struct list_ctx lc = {
        .a = a,
        .uid = c->cred.uid,
        .all = agent_privileged (a, c->cred.uid),
        .arr = json_array (),
    };

    if (!lc.arr || store_job_foreach (a->store, list_cb, &lc, error) < 0) {
        json_decref (lc.arr);
        return NULL;
    }
    return json_pack ("{s:s s:o}", "node", a->node, "jobs", lc.arr);
}

static json_t *op_job_show (struct agent *a, struct conn *c, json_t *req,
                            tier_error_t *error)
{
    struct store_job job;
    uint32_t job_id = 0;

    if (get_id (req, "job_id", true, &job_id, error) < 0
        || job_for_caller (a, c, job_id, req, &job, error) < 0)
        return NULL;
    return job_to_json (&job);
}

/* The caller's own job, from its process ancestry. */
int rpc_caller_job (struct agent *a, struct conn *c, struct store_job *job,
                    struct peer_job *pj, tier_error_t *error)
{
    if (peer_job_of (NULL, c->cred.pid, pj, error) < 0)
        return -1;
    if (store_job_latest (a->store, pj->job_id, job, error) < 0
        || job->state != STORE_JOB_RUNNING) {
        errno = ENOENT;
        return tier_errprintf (error, "job %u is not registered on node %s",
                               pj->job_id, a->node);
    }
    if (!agent_privileged (a, c->cred.uid) && job->uid != c->cred.uid) {
        errno = EPERM;
        return tier_errprintf (error, "job %u belongs to another user",
                               pj->job_id);
    }
    return 0;
}

static json_t *op_whoami (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error)
{
    struct store_job job;
    struct peer_job pj;

    if (rpc_caller_job (a, c, &job, &pj, error) < 0)
        return NULL;
    return json_pack ("{s:I s:s s:I s:I s:s}",
                      "job_id", (json_int_t) job.job_id,
                      "step", pj.step,
                      "batch_id", (json_int_t) job.batch_id,
                      "uid", (json_int_t) c->cred.uid,
                      "node", a->node);
}

struct batch_ctx {
    uint32_t batch_id;
    uid_t uid;
    bool found;
};

static int batch_cb (const struct store_job *j, void *arg)
{
    struct batch_ctx *bc = arg;

    if (j->batch_id == bc->batch_id) {
        bc->uid = j->uid;
        bc->found = true;
        return 1;
    }
    return 0;
}

static json_t *op_counters (struct agent *a, struct conn *c, json_t *req,
                            tier_error_t *error)
{
    const char *scope = NULL;
    struct tier_counters ctr;
    uint32_t id = 0;
    uint64_t key = 0;
    enum tier_scope sc;
    json_t *o;

    if (json_unpack (req, "{s:s}", "scope", &scope) < 0) {
        errno = EINVAL;
        tier_errprintf (error, "'scope' must be job, batch or node");
        return NULL;
    }
    if (!strcmp (scope, "node")) {
        sc = TIER_SCOPE_NODE;
    }
    else if (!strcmp (scope, "job")) {
        struct store_job job;
        if (get_id (req, "id", true, &id, error) < 0
            || job_for_caller (a, c, id, req, &job, error) < 0)
            return NULL;
        sc = TIER_SCOPE_JOB;
        key = store_job_key (job.job_id, job.restart);
    }
    else if (!strcmp (scope, "batch")) {
        struct batch_ctx bc = { 0 };
        if (get_id (req, "id", true, &id, error) < 0)
            return NULL;
        bc.batch_id = id;
        if (store_job_foreach (a->store, batch_cb, &bc, error) < 0)
            return NULL;
        if (!bc.found) {
            errno = ENOENT;
            tier_errprintf (error, "batch %u has no job on node %s", id,
                            a->node);
            return NULL;
        }
        if (!agent_privileged (a, c->cred.uid) && bc.uid != c->cred.uid) {
            errno = EPERM;
            tier_errprintf (error, "batch %u belongs to another user", id);
            return NULL;
        }
        sc = TIER_SCOPE_BATCH;
        key = id;
    }
    else {
        errno = EINVAL;
        tier_errprintf (error, "'scope' must be job, batch or node");
        return NULL;
    }
    if (ctr_get (a, sc, key, &ctr) < 0) {
        errno = EIO;
        tier_errprintf (error, "cannot read counters");
        return NULL;
    }
    if (!(o = ctr_to_json (&ctr)))
        return NULL;
    return json_pack ("{s:s s:I s:s s:o}", "scope", scope,
                      "id", (json_int_t) id, "node", a->node,
                      "counters", o);
}

struct count_ctx {
    int running, total;
};

static int count_cb (const struct store_job *j, void *arg)
{
    struct count_ctx *cc = arg;

    cc->total++;
    if (j->state == STORE_JOB_RUNNING)
        cc->running++;
    return 0;
}

static json_t *op_status (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error)
{
    struct count_ctx cc = { 0 };
    json_t *tiers = tiers_json (a);

    (void) store_job_foreach (a->store, count_cb, &cc, error);
    json_t *reps = replica_status_json (a);
    json_t *migs = migrate_status_json (a, c->cred.uid);
    json_t *streams = streams_status_json (a, c->cred.uid);
    json_t *blogs = bcache_status_json (a, c->cred.uid);

    int closing_users, closing = rxfd_closing (&closing_users);
    int waiting = 0, mine = 0;

    /* requests the agent holds for an answer (a fetch, a migration, a
     * child): the node's, and the caller's own */
    for (struct conn *x = a->conns; x; x = x->next) {
        waiting += x->waiting;
        if (x->cred.uid == c->cred.uid)
            mine += x->waiting;
    }
    return json_pack ("{s:s s:s s:i s:I s:b s:o s:{s:i s:i} s:o s:o s:o s:o "
                      "s:{s:i s:i} s:{s:i s:i s:i}}",
                      "version", PACKAGE_VERSION, "node", a->node, "pid",
                      (int) getpid (), "uptime",
                      (json_int_t) ((tier_now_ms () - a->started_ms) / 1000),
                      "enabled", !a->disabled && a->conf->enabled, "tiers",
                      tiers ? tiers : json_object (), "jobs", "running",
                      cc.running, "registered", cc.total, "replicas",
                      reps ? reps : json_object (), "migrations",
                      migs ? migs : json_object (), "streams",
                      streams ? streams : json_object (), "block_cache",
                      blogs ? blogs : json_array (), "closing", "descriptors",
                      closing, "users", closing_users, "clients", "connections",
                      a->nconns, "waiting", waiting, "yours_waiting", mine);
}

static const struct rpc_op ops[] = {
    { "status", op_status, false },
    { "ping", op_ping, false },
    { "job.register", op_job_register, true },
    { "job.end", op_job_end, true },
    { "job.stage_in", op_stage_in, true },
    { "job.stage_restart", op_stage_restart, true },
    { "jobs", op_jobs, false },
    { "job.show", op_job_show, false },
    { "whoami", op_whoami, false },
    { "counters", op_counters, false },
    { "node.enable", op_node_enable, true },
    { "job.policy", op_job_policy, false },
    { "user.ensure", op_user_ensure, false },
    { "replica.open", op_replica_open, false },
    { "replica.report", op_replica_report, false },
    { "replica.prefetch", op_replica_prefetch, false },
    { "replica.evict", op_replica_evict, false },
    { "replica.list", op_replica_list, false },
    { "replica.mirror", op_replica_mirror, false },
    { "job.stageout", op_job_stageout, true },
    { "job.stageout_sync", op_job_stageout_sync, false },
    { "job.outputs", op_job_outputs, false },
    { "blog.open", op_blog_open, false },
    { "blog.flush", op_blog_flush, false },
    { "blog.sync", op_blog_sync, false },
    { NULL, NULL, false },
};

static char deferred_marker;
json_t *const RPC_DEFERRED = (json_t *) &deferred_marker;

char *rpc_handle (struct agent *a, struct conn *c, const char *body,
                  size_t len, int *fds, int nfds, bool *deferred)
{
    json_error_t jerr;
    json_t *req, *res;
    const char *name = NULL;
    const struct rpc_op *op;
    tier_error_t error = { { 0 } };
    char *out;

    /* Jansson skips a NUL after a number: refuse any NUL first */
    if (memchr (body, '\0', len))
        return rpc_error_body (EINVAL, "request contains a NUL byte");
    if (!(req = json_loadb (body, len, JSON_REJECT_DUPLICATES, &jerr))
        || !json_is_object (req)) {
        json_decref (req);
        return rpc_error_body (EINVAL, "request is not a JSON object");
    }
    if (json_unpack (req, "{s:s}", "op", &name) < 0) {
        json_decref (req);
        return rpc_error_body (EINVAL, "request has no 'op'");
    }
    for (op = ops; op->name; op++)
        if (!strcmp (op->name, name))
            break;
    if (!op->name) {
        out = rpc_error_body (ENOSYS, "unknown request '%.64s'", name);
        json_decref (req);
        return out;
    }
    if (op->privileged && !agent_privileged (a, c->cred.uid)) {
        out = rpc_error_body (EPERM, "'%s' is for root and SlurmUser only",
                              op->name);
        json_decref (req);
        return out;
    }
    errno = 0;
    *deferred = false;
    c->req_fds = fds;
    c->req_nfds = nfds;
    res = op->fn (a, c, req, &error);
    c->req_fds = NULL;
    c->req_nfds = 0;
    if (res == RPC_DEFERRED) {
        json_decref (req);
        *deferred = true;
        return NULL;
    }
    if (!res) {
        int e = errno ? errno : EIO;
        out = rpc_error_body (e, "%s", error.text[0] ? error.text
                                                     : strerror (e));
        tier_log (LOG_DEBUG, "%s from uid %d: %s", op->name,
                  (int) c->cred.uid, error.text);
    }
    else {
        out = json_dumps (res, JSON_COMPACT);
        json_decref (res);
    }
    json_decref (req);
    return out;
}

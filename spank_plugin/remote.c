/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* remote.c - the plugin in slurmstepd (REMOTE context)
 *
 *   init_post_opt          root, host namespace, once per step per node:
 *                          reach (or start) the agent and register the job;
 *                          nothing written here reaches the user
 *   user_init              once per step per node, output reaches the job:
 *                          the task environment, and one warning line
 *                          when the job runs untiered
 *   task_init_privileged   per task: fail the job cleanly when it must
 *
 * Never returns an error from init/init_post_opt/user_init: that drains
 * the node.  Root code takes its configuration from plugstack.conf and
 * tier.conf only, its identity from Slurm's items, never from SPANK_* or
 * TIER_* variables.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <slurm/spank.h>

#include "lib/units.h"
#include "lib/conf.h"
#include "lib/jobns.h"
#include "lib/paths.h"
#include "lib/tjson.h"
#include "keep.h"
#include "opts.h"
#include "spawn.h"
#include "stage.h"
#include "tier.h"

#define NO_VAL32 0xfffffffeU

/* Load tier.conf for this node (root code: the file must be root's). */
struct tier_conf *remote_load_conf (tier_error_t *error)
{
    const char *node = getenv ("SLURMD_NODENAME");
    struct tier_conf *conf;

    if (!node || !tier_conf_nodename_valid (node)) {
        errno = EINVAL;
        tier_errprintf (error, "SLURMD_NODENAME is not set or invalid");
        return NULL;
    }
    if (tier_conf_expand_node (tier.args.conf, node, tier.conf_path,
                               sizeof (tier.conf_path)) < 0) {
        tier_errprintf (error, "plugstack argument conf: %s: %s",
                        tier.args.conf, strerror (errno));
        return NULL;
    }
    if (!(conf = tier_conf_create (node))) {
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (tier_conf_load (conf, tier.conf_path, true, error) < 0) {
        tier_conf_destroy (conf);
        return NULL;
    }
    return conf;
}

/* The options as a JSON object, for the registry. */
static void opts_json (struct tier_jw *w)
{
    tier_jw_obj_begin (w, "options");
    tier_jw_str (w, "cache", opts_cache_name (tier_effective_mode ()));
    if (tier.opts.keep != TIER_KEEP_UNSET)
        tier_jw_str (w, "keep", opts_keep_name (tier.opts.keep));
    if (tier.opts.batch[0])
        tier_jw_str (w, "batch", tier.opts.batch);
    if (tier.opts.scratch[0])
        tier_jw_str (w, "scratch", tier.opts.scratch);
    if (tier.opts.stage_in[0])
        tier_jw_str (w, "stage_in", tier.opts.stage_in);
    if (tier.opts.stage_out[0])
        tier_jw_str (w, "stage_out", tier.opts.stage_out);
    tier_jw_obj_end (w);
}

/* The sum of the sizes given with --tier-scratch=DIR:SIZE. */
static uint64_t scratch_reserve (void)
{
    char item[PATH_MAX + 64], dir[PATH_MAX + 64];
    const char *p = tier.opts.scratch;
    uint64_t sum = 0, size;
    tier_error_t e;

    while ((p = opts_next_item (p, item, sizeof (item))))
        if (opts_split_size (item, dir, sizeof (dir), &size, &e) == 0)
            sum = tier_size_add (sum, size);
    return sum;
}

static int get_u32 (spank_t sp, spank_item_t item, uint32_t *v)
{
    return spank_get_item (sp, item, v) == ESPANK_SUCCESS ? 0 : -1;
}

/* The restart count distinguishes a requeued job.  An srun step finds it
 * in the job's environment, which the user could set (*from_env): the
 * agent then takes the job's running record on the node instead, if it
 * has one, so a forged count makes no second record.  The batch step's
 * environment gets it only after this: slurmctld tells (one RPC per
 * batch job).
 */
static uint32_t job_restart (spank_t sp, uint32_t job_id, bool *from_env)
{
    char rbuf[32];
    uint32_t step = 0;

    if (from_env)
        *from_env = false;
    if (spank_getenv (sp, "SLURM_RESTART_COUNT", rbuf, sizeof (rbuf))
        == ESPANK_SUCCESS) {
        if (from_env)
            *from_env = true;
        return (uint32_t) strtoul (rbuf, NULL, 10);
    }
    if (get_u32 (sp, S_JOB_STEPID, &step) == 0
        && step == 0xfffffffbU)     /* the batch step */
        return tier_job_restarts (job_id);
    return 0;
}

/* The job's id and owner (with its group list) from Slurm's items, and
 * its place in an array: tier.job_id, tier.is_array, tier.batch_id.
 */
static int job_ids (spank_t sp, struct tier_cred *cred, uint32_t *task_id,
                    tier_error_t *error)
{
    uint32_t job_id = 0, array_id = 0;
    tier_error_t ce;
    uid_t uid;
    gid_t gid;

    if (get_u32 (sp, S_JOB_ID, &job_id) < 0
        || spank_get_item (sp, S_JOB_UID, &uid) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return tier_errprintf (error, "cannot read the job's id and owner");
    if (ns_job_cred (sp, cred, &ce) < 0) {
        /* more groups than tier takes: registered without them (work on
         * the job's data is then refused, never done with fewer) */
        slurm_error ("tier: job %u: %s", job_id, ce.text);
        tier_cred_init (cred, uid, gid);
    }
    if (get_u32 (sp, S_JOB_ARRAY_ID, &array_id) < 0)
        array_id = 0;
    if (get_u32 (sp, S_JOB_ARRAY_TASK_ID, task_id) < 0)
        *task_id = NO_VAL32;
    tier.job_id = job_id;
    tier.is_array = *task_id != NO_VAL32 && *task_id != 0xffffffffU;
    tier.batch_id = tier.is_array && array_id ? array_id : job_id;
    return 0;
}

/* The job.register request into body. */
static int register_request (char *body, size_t size, uint32_t task_id,
                             bool restart_from_env,
                             const struct tier_cred *cred, const char *user,
                             tier_error_t *error)
{
    struct tier_jw w;

    tier_jw_init (&w, body, size);
    tier_jw_str (&w, "op", "job.register");
    tier_jw_uint (&w, "job_id", tier.job_id);
    tier_jw_uint (&w, "restart", tier.restart);
    if (restart_from_env)
        tier_jw_bool (&w, "restart_from_env", true);
    tier_jw_uint (&w, "batch_id", tier.batch_id);
    tier_jw_uint (&w, "array_task_id", tier.is_array ? task_id : NO_VAL32);
    tier_jw_uint (&w, "uid", cred->uid);
    tier_jw_uint (&w, "gid", cred->gid);
    tier_jw_str (&w, "user", user);
    /* the job's group list: the agent's work on the job's data uses it
     * (no NSS lookup per job on the node) */
    if (tier_cred_has_groups (cred)) {
        tier_jw_arr_begin (&w, "groups");
        for (int i = 0; i < cred->ngroups; i++)
            tier_jw_uint (&w, NULL, cred->groups[i]);
        tier_jw_arr_end (&w);
    }
    tier_jw_uint (&w, "scratch_reserve", scratch_reserve ());
    opts_json (&w);
    if (tier_jw_finish (&w) < 0)
        return tier_errprintf (error, "registration too large");
    return 0;
}

/* The reply's string key into buf, or "" if it has none. */
static void reply_str (const char *reply, size_t len, const char *key,
                       char *buf, size_t size)
{
    if (tier_jr_get_str (reply, len, key, buf, size) < 0)
        buf[0] = '\0';
}

/* What the agent's reply sets up: the job's frozen policies name its
 * pipeline directories (the --tier-scratch items are their job layer;
 * refused ones are gone), batch and bind directories, the endpoint
 * directories, and whether the scratch reservation was granted.
 */
static void take_reply (const char *reply)
{
    static char scratch[TIER_OPT_VALUE_MAX];
    size_t len = strlen (reply);
    bool ok = true;
    tier_error_t e;

    if (tier_jr_get_str (reply, len, "scratch", scratch, sizeof (scratch)) == 0
        && (!scratch[0]
            || opts_list_check ("policy", scratch, TIER_ITEM_SIZE, NULL, &e)
                   == 0))
        (void) snprintf (tier.opts.scratch, sizeof (tier.opts.scratch), "%s",
                         scratch);
    {
        /* the run the agent counts this step in (see job_restart) */
        int64_t r;
        if (tier_jr_get_int (reply, len, "restart", &r) == 0 && r >= 0
            && r <= (int64_t) UINT32_MAX)
            tier.restart = (uint32_t) r;
    }
    reply_str (reply, len, "refused", tier.refused, sizeof (tier.refused));
    /* the batch directories of the frozen set (policies and
     * --tier-batch): the interposer redirects opens under them */
    reply_str (reply, len, "batch", tier.batch_dirs, sizeof (tier.batch_dirs));
    reply_str (reply, len, "window", tier.window_dirs,
               sizeof (tier.window_dirs));
    reply_str (reply, len, "bind", tier.binds, sizeof (tier.binds));
    reply_str (reply, len, "outbox_denied", tier.outbox_denied,
               sizeof (tier.outbox_denied));
    {
        int64_t w;
        tier.write_cache = tier_jr_get_int (reply, len, "write_cache", &w) == 0
                                   && w > 0
                               ? (uint64_t) w
                               : 0;
    }
    reply_str (reply, len, "stage_out", tier.policy_out,
               sizeof (tier.policy_out));
    /* the endpoint input directories (stage = in) */
    reply_str (reply, len, "stage_in", tier.policy_in, sizeof (tier.policy_in));
    if (tier_jr_get_bool (reply, len, "scratch_ok", &ok) == 0 && !ok) {
        tier.scratch_denied = 1;
        if (tier_jr_get_str (reply, len, "scratch_error", tier.ns_error,
                             sizeof (tier.ns_error))
            < 0)
            (void) snprintf (tier.ns_error, sizeof (tier.ns_error),
                             "the scratch reservation was refused");
    }
}

static int register_job (spank_t sp, tier_error_t *error)
{
    static char body[TIER_OPT_VALUE_MAX * 5];
    uint32_t task_id = NO_VAL32, restart;
    struct tier_cred cred;
    struct passwd pw, *pwp = NULL;
    char pwbuf[4096];
    char *reply = NULL;
    bool enabled = true, from_env;

    if (job_ids (sp, &cred, &task_id, error) < 0)
        return -1;
    restart = job_restart (sp, tier.job_id, &from_env);
    if (getpwuid_r (cred.uid, &pw, pwbuf, sizeof (pwbuf), &pwp) != 0 || !pwp)
        return tier_errprintf (error, "uid %u has no passwd entry",
                               (unsigned) cred.uid);
    tier.restart = restart;
    if (register_request (body, sizeof (body), task_id, from_env, &cred,
                          pw.pw_name, error)
        < 0)
        return -1;
    if (spawn_call_sure (tier.conf, tier.conf_path, tier.job_id, "registration",
                         body, &reply, error)
        < 0)
        return -1;
    (void) tier_jr_get_bool (reply, strlen (reply), "enabled", &enabled);
    take_reply (reply);
    free (reply);
    if (!enabled) {
        errno = EPERM;
        return tier_errprintf (error, "tier is disabled on node %s by the "
                               "administrator", tier.conf->node);
    }
    return 0;
}

/* The filename-pattern context of this task of the job. */
static void pattern_ctx (spank_t sp, struct tier_pattern_ctx *ctx,
                         char *name, size_t nsize, char *user, size_t usize)
{
    uint32_t task = 0, nodeid = 0;
    struct passwd pw, *pwp = NULL;
    char buf[4096];
    uid_t uid;

    memset (ctx, 0, sizeof (*ctx));
    ctx->job_id = tier.job_id;
    ctx->array_job_id = tier.batch_id;
    ctx->is_array = tier.is_array;
    ctx->node_name = tier.conf->node;
    if (spank_get_item (sp, S_JOB_ARRAY_TASK_ID, &task) == ESPANK_SUCCESS)
        ctx->array_task_id = task;
    if (spank_get_item (sp, S_JOB_NODEID, &nodeid) == ESPANK_SUCCESS)
        ctx->node_index = nodeid;
    if (spank_getenv (sp, "SLURM_JOB_NAME", name, (int) nsize)
        != ESPANK_SUCCESS)
        (void) snprintf (name, nsize, "job");
    user[0] = '\0';
    if (spank_get_item (sp, S_JOB_UID, &uid) == ESPANK_SUCCESS
        && getpwuid_r (uid, &pw, buf, sizeof (buf), &pwp) == 0 && pwp)
        (void) snprintf (user, usize, "%s", pw.pw_name);
    ctx->job_name = name;
    ctx->user = user;
}

/* The frozen policies' input directories (the agent's ',' list, '\'
 * escapes) after the n items expanded from --tier-stage-in: verbatim
 * (a policy's directory has no filename patterns), each once.  Returns
 * the new count, or -1. */
static int policy_inputs (int n, tier_error_t *error)
{
    char item[PATH_MAX + 64];
    const char *p = tier.policy_in;

    while ((p = tier_list_next (p, item, sizeof (item)))) {
        char dir[PATH_MAX];
        uint64_t size;
        bool dup = false;

        if (tier_item_split (item, dir, sizeof (dir), &size, NULL, 0) < 0)
            continue;
        for (int i = 0; i < n; i++)
            if (!strcmp (tier.stage_items[i], dir))
                dup = true;
        if (dup)
            continue;
        if (n == TIER_STAGE_ITEMS_MAX)
            return tier_errprintf (error, "stage-in: more than %d items "
                                   "with the endpoint policies' inputs",
                                   TIER_STAGE_ITEMS_MAX);
        (void) snprintf (tier.stage_items[n++], PATH_MAX, "%s", dir);
    }
    return n;
}

/* Expand --tier-stage-in for this task of the job, add the frozen
 * policies' input directories, and have the agent start copying (once
 * per job, node and item: the prolog may have asked for the option's
 * items already, the policies' are known from the first step on).  A
 * failure is reported when the tasks start.
 */
static void start_stage_in (spank_t sp)
{
    struct tier_pattern_ctx ctx;
    char name[256], user[64];
    tier_error_t error;
    uid_t uid;
    gid_t gid;
    int n = 0;

    if (spank_get_item (sp, S_JOB_UID, &uid) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
        return;
    pattern_ctx (sp, &ctx, name, sizeof (name), user, sizeof (user));
    if ((tier.opts.stage_in[0]
         && (n = stage_expand (tier.opts.stage_in, &ctx, tier.stage_items,
                               TIER_STAGE_ITEMS_MAX, &error))
                < 0)
        || (n = policy_inputs (n, &error)) < 0
        || stage_start (tier.conf, tier.conf_path, tier.job_id, uid, gid,
                        tier.stage_items, n, &tier.stage_plan, &error)
               < 0) {
        (void) snprintf (tier.ns_error, sizeof (tier.ns_error), "%s",
                         error.text);
        tier.stage_n = -1;
        return;
    }
    tier.stage_n = n;
    tier.stage_started = 1;
}

/* The job's output directories on this node: --tier-stage-out expanded
 * for this task, and the endpoint directories of its policies.
 */
static void list_outputs (spank_t sp)
{
    struct tier_pattern_ctx ctx;
    char name[256], user[64];
    tier_error_t error;

    tier.stage_out[0] = '\0';
    if (!tier.opts.stage_out[0] && !tier.policy_out[0])
        return;
    pattern_ctx (sp, &ctx, name, sizeof (name), user, sizeof (user));
    if (stage_out_dirs (tier.opts.stage_out, tier.policy_out, &ctx,
                        tier.stage_out, sizeof (tier.stage_out), &error)
        < 0) {
        tier.stage_out[0] = '\0';
        (void) snprintf (tier.ns_error, sizeof (tier.ns_error), "%s",
                         error.text);
        slurm_error ("tier: job %u: %s", tier.job_id, error.text);
    }
}

/* The agent did not answer (or refused the registration), but an earlier
 * step may have made the job's namespace on this node: join it all the
 * same, so that every step of the job sees one view (its pipeline and
 * output directories), never the plain GFS beside it.  Only a namespace
 * that is ready, of this run of the job (a requeued job's stale one is
 * never joined); the directories it holds come from its own record.
 */
static void ns_join_existing (spank_t sp)
{
    const char *base = tier.conf ? tier.conf->namespace_dir : NULL;
    uint32_t job_id = 0;
    char r[32];

    if (!base || tier.opt_error[0] || get_u32 (sp, S_JOB_ID, &job_id) < 0
        || !tier_ns_exists (base, job_id)
        || !tier_ns_marked (base, job_id, TIER_NS_READY)
        || tier_ns_marked (base, job_id, TIER_NS_FAILED)
        || tier_ns_read (base, job_id, TIER_NS_RESTART, r, sizeof (r)) < 0
        || strtoul (r, NULL, 10) != job_restart (sp, job_id, NULL))
        return;
    tier.job_id = job_id;
    tier.restart = (uint32_t) strtoul (r, NULL, 10);
    if (tier_ns_read (base, job_id, TIER_NS_SCRATCH, tier.opts.scratch,
                      sizeof (tier.opts.scratch)) < 0)
        tier.opts.scratch[0] = '\0';
    if (tier_ns_read (base, job_id, TIER_NS_BOUND, tier.bound,
                      sizeof (tier.bound)) < 0)
        tier.bound[0] = '\0';
    tier.ns_ok = 1;
    tier.ns_no_agent = 1;
    slurm_error ("tier: job %u: the agent did not answer; this step joins "
                 "the job's namespace made by an earlier step", job_id);
}

int remote_init_post_opt (spank_t sp)
{
    tier_error_t error = { { 0 } };

    if (tier.disabled || tier_effective_mode () == TIER_CACHE_OFF)
        return 0;
    tier.wanted = 1;
    if (tier.opt_error[0])
        return 0;                       /* reported in user_init */
    if (!(tier.conf = remote_load_conf (&error)))
        goto error;
    if (!tier.conf->enabled) {
        (void) snprintf (tier.agent_error, sizeof (tier.agent_error),
                         "tier is disabled on node %s (Enabled = no)",
                         tier.conf->node);
        return 0;
    }
    if (spawn_ensure (tier.conf, tier.conf_path, tier.conf->node, 5000, &error)
            < 0
        || register_job (sp, &error) < 0)
        goto error;
    tier.agent_ok = 1;
    list_outputs (sp);
    if (ns_wanted () && !tier.scratch_denied) {
        if (ns_setup (sp, &error) == 0)
            tier.ns_ok = 1;
        else {
            (void) snprintf (tier.ns_error, sizeof (tier.ns_error), "%s",
                             error.text);
            slurm_error ("tier: job %u: %s", tier.job_id, error.text);
        }
    }
    if (tier.ns_ok && (tier.opts.stage_in[0] || tier.policy_in[0]))
        start_stage_in (sp);
    return 0;
error:
    (void) snprintf (tier.agent_error, sizeof (tier.agent_error), "%s",
                     error.text);
    slurm_error ("tier: %s", error.text);       /* the slurmd log */
    ns_join_existing (sp);
    return 0;
}

/* The task environment, set anew on every node in every step: an inner
 * srun would otherwise carry the batch host's values to other nodes.
 */
int slurm_spank_user_init (spank_t sp, int ac, char **av)
{
    char v[4200];

    if (spank_context () != S_CTX_REMOTE || !tier.wanted)
        return 0;
    if (tier.opt_error[0]) {
        slurm_error ("tier: %s", tier.opt_error);
        return 0;                       /* the job fails in task_init_priv */
    }
    if (!tier.agent_ok) {
        if (tier.ns_no_agent && tier_effective_mode () != TIER_CACHE_REQUIRED)
            slurm_spank_log ("tier: warning: on node %s this step sees the "
                             "job's scratch and output directories as its "
                             "earlier steps did, but nothing else of tier "
                             "(no batch cache, no stage-in or stage-out "
                             "here): %s", getenv ("SLURMD_NODENAME")
                             ? getenv ("SLURMD_NODENAME") : "?",
                             tier.agent_error);
        else if (tier_effective_mode () != TIER_CACHE_REQUIRED)
            slurm_spank_log ("tier: warning: running untiered on node %s: %s",
                             getenv ("SLURMD_NODENAME")
                             ? getenv ("SLURMD_NODENAME") : "?",
                             tier.agent_error);
        (void) spank_unsetenv (sp, "TIER_JOB_ID");
        (void) spank_unsetenv (sp, "TIER_BATCH_ID");
        (void) spank_unsetenv (sp, "TIER_SOCKET");
        (void) spank_unsetenv (sp, "TIER_BATCH_DIRS");
        (void) spank_unsetenv (sp, "TIER_WINDOW_DIRS");
        return 0;
    }
    if (tier.refused[0] && tier_effective_mode () != TIER_CACHE_REQUIRED)
        slurm_spank_log ("tier: warning: refused: %s", tier.refused);
    if (tier.bind_error[0])
        slurm_spank_log ("tier: warning: eager mode: %s (read through the "
                         "interposer instead)", tier.bind_error);
    if (tier.outbox_error[0])
        slurm_spank_log ("tier: warning: %s", tier.outbox_error);
    if (ns_wanted () && !tier.ns_ok
        && tier_effective_mode () != TIER_CACHE_REQUIRED)
        slurm_spank_log ("tier: warning: %s; those directories are the "
                         "plain GFS in this job", tier.ns_error);
    (void) snprintf (v, sizeof (v), "%u", tier.job_id);
    (void) spank_setenv (sp, "TIER_JOB_ID", v, 1);
    (void) snprintf (v, sizeof (v), "%u", tier.batch_id);
    (void) spank_setenv (sp, "TIER_BATCH_ID", v, 1);
    if (tier_conf_socket_path (tier.conf, v, sizeof (v)) == 0)
        (void) spank_setenv (sp, "TIER_SOCKET", v, 1);
    /* the interposer, for jobs with batch-shared directories (in front of
     * whatever the job preloads already) */
    if (tier.batch_dirs[0]) {
        /* bound mirrors need no interposer: their opens pass through */
        char dirs[sizeof (tier.batch_dirs) + sizeof (tier.bound) + 64];
        char item[PATH_MAX + 8];
        const char *p = tier.bound;
        size_t o = (size_t) snprintf (dirs, sizeof (dirs), "%s",
                                      tier.batch_dirs);
        while (*p && o + 2 < sizeof (dirs)) {
            size_t l = strcspn (p, ":");
            if (l < sizeof (item) - 2 && o + l + 3 < sizeof (dirs)) {
                dirs[o++] = ':';
                dirs[o++] = '!';
                memcpy (dirs + o, p, l);
                o += l;
                dirs[o] = '\0';
            }
            p += l + (p[l] == ':');
        }
        (void) spank_setenv (sp, "TIER_BATCH_DIRS", dirs, 1);
    }
    else
        (void) spank_unsetenv (sp, "TIER_BATCH_DIRS");
    /* the block cache's directories: the interposer writes there
     * through the job's log (doc/block-cache.md) */
    if (tier.window_dirs[0])
        (void) spank_setenv (sp, "TIER_WINDOW_DIRS", tier.window_dirs, 1);
    else
        (void) spank_unsetenv (sp, "TIER_WINDOW_DIRS");
    if ((tier.batch_dirs[0] || tier.window_dirs[0])
        && access (tier.args.preload, R_OK) == 0) {
        char old[4096] = "";
        if (spank_getenv (sp, "LD_PRELOAD", old, sizeof (old))
            != ESPANK_SUCCESS)
            old[0] = '\0';
        if (!strstr (old, tier.args.preload)) {
            (void) snprintf (v, sizeof (v), "%s%s%s", tier.args.preload,
                             old[0] ? ":" : "", old);
            (void) spank_setenv (sp, "LD_PRELOAD", v, 1);
        }
    }
    return 0;
}

static bool gone_ask (uint32_t job_id)
{
    if (!tier_job_gone (job_id))
        return false;
    (void) tier_ns_mark (tier.conf->namespace_dir, job_id, TIER_NS_CANCELLED);
    return true;
}

static bool gone_marker (uint32_t job_id)
{
    return tier_ns_marked (tier.conf->namespace_dir, job_id, TIER_NS_CANCELLED);
}

/* The node-side check of the options, from the job's real items. */
static int node_check (spank_t sp, tier_error_t *error)
{
    uint32_t task_id = 0;
    int is_array;

    if (tier.opt_error[0])
        return tier_errprintf (error, "%s", tier.opt_error);
    if (spank_get_item (sp, S_JOB_ARRAY_TASK_ID, &task_id) != ESPANK_SUCCESS)
        is_array = -1;
    else
        is_array = (task_id != NO_VAL32 && task_id != 0xffffffffU) ? 1 : 0;
    return opts_check (&tier.opts, is_array, error);
}

/* A step's own --tier-keep (srun --tier-keep=always in a batch script
 * whose sbatch had none): the epilog sees only the batch script's
 * options, so the strongest a step gave is kept in the job's directory
 * (TIER_NS_KEEP) for it. */
static void note_keep (void)
{
    const char *base = tier.conf ? tier.conf->namespace_dir : NULL;
    enum tier_keep old = TIER_KEEP_UNSET;
    char buf[32];
    tier_error_t e;
    int lockfd;

    if (!base || tier.opts.keep == TIER_KEEP_UNSET
        || (lockfd = tier_ns_lock (base, tier.job_id, &e)) < 0)
        return;
    if (tier_ns_read (base, tier.job_id, TIER_NS_KEEP, buf, sizeof (buf)) == 0)
        (void) opts_keep_parse (buf, &old, &e);
    if (tier.opts.keep > old)
        (void) tier_ns_write (base, tier.job_id, TIER_NS_KEEP,
                              opts_keep_name (tier.opts.keep));
    close (lockfd);
}

int slurm_spank_task_init_privileged (spank_t sp, int ac, char **av)
{
    tier_error_t error;

    if (spank_context () != S_CTX_REMOTE || tier.disabled || !tier.wanted)
        return 0;
    if (node_check (sp, &error) < 0) {
        slurm_error ("tier: %s", error.text);
        return -1;                      /* fails this job's tasks cleanly */
    }
    if (!tier.agent_ok && tier_effective_mode () == TIER_CACHE_REQUIRED) {
        slurm_error ("tier: --tier-cache=required, but tier is not "
                     "available on node %s: %s",
                     tier.conf ? tier.conf->node : "?", tier.agent_error);
        return -1;
    }
    if (tier.refused[0] && tier_effective_mode () == TIER_CACHE_REQUIRED) {
        slurm_error ("tier: --tier-cache=required: %s", tier.refused);
        return -1;
    }
    if (ns_wanted () && tier.agent_ok && !tier.ns_ok
        && tier_effective_mode () == TIER_CACHE_REQUIRED) {
        slurm_error ("tier: --tier-cache=required: %s", tier.ns_error);
        return -1;
    }
    if (tier.stage_n < 0) {
        /* endpoint inputs that cannot be staged fail the job */
        slurm_error ("tier: %s", tier.ns_error);
        return -1;
    }
    if (tier.stage_started) {
        uint32_t local = 1;
        (void) spank_get_item (sp, S_TASK_ID, &local);
        /* the node's first task asks slurmctld; the others look for its
         * marker (one RPC per node, not per task) */
        if (stage_wait (tier.conf, tier.conf_path, tier.job_id,
                        tier.stage_plan.parts, local == 0,
                        local == 0 ? gone_ask : gone_marker, &error)
            < 0) {
            slurm_error ("tier: %s", error.text);
            return -1;
        }
    }
    if (tier.ns_ok)
        note_keep ();
    if (tier.ns_ok && ns_join (&error) < 0) {
        if (tier_effective_mode () == TIER_CACHE_REQUIRED
            || tier.stage_started) {
            slurm_error ("tier: %s", error.text);
            return -1;
        }
        slurm_spank_log ("tier: warning: %s", error.text);
        return 0;
    }
    if (tier.stage_started
        && stage_bind (sp, tier.conf, tier.job_id, tier.stage_items,
                       tier.stage_plan.index, tier.stage_n, &error)
               < 0) {
        slurm_error ("tier: %s", error.text);
        return -1;
    }
    return 0;
}

#define BATCH_STEP 0xfffffffbU

int slurm_spank_task_exit (spank_t sp, int ac, char **av)
{
    uint32_t step = 0, task = 1;
    int status = 0;
    char env[32];

    if (spank_context () != S_CTX_REMOTE || !tier.ns_ok
        || spank_get_item (sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS
        || spank_get_item (sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS)
        return 0;
    if (step == BATCH_STEP) {
        tier.batch_status = status ? 1 : 0;
        return 0;
    }
    /* a step outside a batch script (an srun job, or a step of salloc):
     * its first task tells where the data will be kept, since only
     * task_exit still reaches srun's stderr (the batch step tells in
     * exit) -- on-failure when that task failed */
    if (spank_get_item (sp, S_TASK_GLOBAL_ID, &task) == ESPANK_SUCCESS
        && task == 0
        && !(spank_getenv (sp, "ENVIRONMENT", env, sizeof (env))
             == ESPANK_SUCCESS && !strcmp (env, "BATCH")))
        keep_announce (tier.opts.scratch, tier.opts.keep,
                       WIFEXITED (status) ? WEXITSTATUS (status) != 0 : true,
                       tier.job_id, tier.restart);
    return 0;
}

/* The batch step's end: a write cache of its own size (ns.c's outbox_fs)
 * with less than this free is full, and the job was told ENOSPC by a
 * write past it: say why. */
#define WRITE_CACHE_FULL (64 * 1024)

static void write_cache_full_warn (void)
{
    char path[PATH_MAX], box[PATH_MAX], h[32];
    struct stat st, bst;
    struct statvfs sf;

    if (!tier.write_cache || !tier.conf->nvdimm_dir[0]
        || snprintf (box, sizeof (box), "%s/.outbox", tier.conf->nvdimm_dir)
               >= (int) sizeof (box)
        || snprintf (path, sizeof (path), "%s/%u.%u", box, tier.job_id,
                     tier.restart)
               >= (int) sizeof (path)
        || stat (box, &bst) < 0 || stat (path, &st) < 0
        || st.st_dev == bst.st_dev || statvfs (path, &sf) < 0
        || (uint64_t) sf.f_bavail * sf.f_frsize >= WRITE_CACHE_FULL)
        return;
    slurm_spank_log ("tier: warning: the job's write cache on node %s "
                     "(%s: WriteCacheSize, or what the NVDIMM tier or "
                     "WriteCacheUserMax left) is full: writes to the output "
                     "directories past it fail with \"No space left on "
                     "device\"",
                     tier.conf->node,
                     tier_size_format (tier.write_cache, h, sizeof (h)));
}

/* Step end: publish what the outputs hold now.  The batch step (whose
 * exit still reaches the job's stderr) waits a little and reports what
 * could not reach the GFS.
 */
static void sync_outputs_step (spank_t sp)
{
    struct tier_stageout_left left;
    tier_error_t error;
    uint32_t step = 0;
    bool batch;

    if (!tier.conf || !tier.ns_ok || !tier.stage_out[0])
        return;
    batch = spank_get_item (sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS
            && step == BATCH_STEP;
    if (batch)
        write_cache_full_warn ();
    if (stage_out_sync (tier.conf, tier.conf_path, tier.job_id,
                        batch ? 10000 : 0, false, &left, &error)
        < 0) {
        slurm_error ("tier: job %u: stage-out: %s", tier.job_id, error.text);
        return;
    }
    if (batch && (left.failed || left.conflicts)) {
        slurm_spank_log ("tier: warning: %d output file(s) could not be "
                         "written to the GFS yet (%d in conflict with another "
                         "writer): they are kept and retried; see tierctl "
                         "outputs --job %u%s%s", left.failed + left.conflicts,
                         left.conflicts, tier.job_id,
                         left.first[0] ? "; first: " : "", left.first);
        /* the job record says so too, while the job is still running
         * (slurmctld refuses updates once it has finished) */
        tier_admin_comment (tier.job_id, tier.conf->node, &left);
    }
    else if (batch && left.stuck) {
        slurm_spank_log ("tier: warning: %d output file(s) not on the GFS "
                         "yet: the job's migrator is stuck in a GFS request "
                         "(no progress for StallTimeout); they are kept and "
                         "published once the GFS answers; see tierctl "
                         "outputs --job %u%s%s",
                         left.pending, tier.job_id,
                         left.first[0] ? "; first: " : "", left.first);
        tier_admin_comment (tier.job_id, tier.conf->node, &left);
    }
}

int slurm_spank_exit (spank_t sp, int ac, char **av)
{
    uint32_t step = 0;

    if (spank_context () == S_CTX_REMOTE)
        sync_outputs_step (sp);

    /* Tell the user where pipeline data will be kept: the batch step's
     * exit still reaches its stderr (the copy itself runs in the epilog,
     * on every node of the job). */
    if (spank_context () == S_CTX_REMOTE && tier.ns_ok
        && spank_get_item (sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS
        && step == BATCH_STEP)
        keep_announce (tier.opts.scratch, tier.opts.keep,
                       tier.batch_status == 1, tier.job_id, tier.restart);
    if (tier.conf) {
        tier_conf_destroy (tier.conf);
        tier.conf = NULL;
    }
    return 0;
}

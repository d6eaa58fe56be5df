/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tier.c - SPANK entry points, dispatched by context
 *
 * Loaded into sbatch/salloc (ALLOCATOR), srun (LOCAL), slurmstepd
 * (REMOTE), slurmd, and the prolog/epilog (JOB_SCRIPT).  Rules from
 * experiment (FACTS.md): register options in every context; never return
 * an error from job_prolog/job_epilog or the REMOTE init/init_post_opt/
 * user_init (that drains the node); fail one job cleanly from
 * task_init_privileged instead.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>

#include "lib/tjson.h"
#include "lib/jobns.h"
#include "lib/paths.h"
#include "args.h"
#include "keep.h"
#include "opts.h"
#include "spawn.h"
#include "stage.h"
#include "submit.h"
#include "tier.h"

SPANK_PLUGIN (tier, 1);

enum {
    OPT_CACHE = 1,
    OPT_BATCH,
    OPT_SCRATCH,
    OPT_STAGE_IN,
    OPT_STAGE_OUT,
    OPT_KEEP,
};

static int opt_cb (int val, const char *optarg, int remote);

static struct spank_option tier_options[] = {
    { "tier-cache", "auto|required|off",
      "Use tier's data tiers for this job (auto: run untiered with a "
      "warning if a tier cannot be provided; required: fail instead)",
      1, OPT_CACHE, opt_cb },
    { "tier-batch", "DIR[,DIR]",
      "Treat DIRs as batch-shared, read-only inputs (BB replica cache)",
      1, OPT_BATCH, opt_cb },
    { "tier-scratch", "DIR[:SIZE][:keep=W][,...]",
      "Give DIR a private node-local NVDIMM scratch view (pipeline data)",
      1, OPT_SCRATCH, opt_cb },
    { "tier-stage-in", "PATH|URL=PATH[,...]",
      "Copy PATHs (or s3://, https:// objects, shown at PATH) to the fast "
      "tier before tasks start (%A %a %j %u %x %N %n patterns)", 1,
      OPT_STAGE_IN, opt_cb },
    { "tier-stage-out", "DIR[=URL][,...]",
      "Write DIRs through a fast write cache, migrated to the GFS (or to "
      "the s3:// or https:// prefix URL) before the job completes", 1,
      OPT_STAGE_OUT, opt_cb },
    { "tier-keep", "never|on-failure|always",
      "Copy pipeline scratch data to DIR/.tier-kept/ at job end",
      1, OPT_KEEP, opt_cb },
    SPANK_OPTIONS_TABLE_END
};

/* Per-process state: each sbatch, srun and slurmstepd loads tier.so anew. */
struct tier_plugin tier = { 0 };

static int store_list (char *slot, const char *option, const char *value,
                       int flags, tier_error_t *error)
{
    if (opts_list_check (option, value, flags, NULL, error) < 0)
        return -1;
    (void) snprintf (slot, TIER_OPT_VALUE_MAX, "%s", value);
    return 0;
}

/* Called at submit (remote = 0) and again in slurmstepd (remote = 1, as
 * root, possibly twice per step): idempotent, no I/O.  On the node a bad
 * value never fails a callback (that could drain the node): it is kept
 * and the job fails cleanly in task_init_privileged.
 */
static int opt_cb (int val, const char *optarg, int remote)
{
    tier_error_t error = { { 0 } };
    int rc = -1;

    switch (val) {
        case OPT_CACHE:
            rc = opts_cache_parse (optarg, &tier.opts.cache, &error);
            break;
        case OPT_KEEP:
            rc = opts_keep_parse (optarg, &tier.opts.keep, &error);
            break;
        case OPT_BATCH:
            rc = store_list (tier.opts.batch, "--tier-batch", optarg, 0,
                             &error);
            break;
        case OPT_SCRATCH:
            rc = store_list (tier.opts.scratch, "--tier-scratch", optarg,
                             TIER_ITEM_SIZE, &error);
            if (rc == 0)
                (void) snprintf (tier.scratch_opt, sizeof (tier.scratch_opt),
                                 "%s", optarg);
            break;
        case OPT_STAGE_IN:
            rc = store_list (tier.opts.stage_in, "--tier-stage-in", optarg,
                             TIER_ITEM_PATTERNS | TIER_ITEM_URL, &error);
            break;
        case OPT_STAGE_OUT:
            rc = store_list (tier.opts.stage_out, "--tier-stage-out", optarg,
                             TIER_ITEM_PATTERNS | TIER_ITEM_URL_OUT, &error);
            break;
        default:
            (void) snprintf (error.text, sizeof (error.text),
                             "unknown option %d", val);
            break;
    }
    if (rc < 0) {
        if (remote) {
            if (!tier.opt_error[0])
                (void) snprintf (tier.opt_error, sizeof (tier.opt_error),
                                 "%s", error.text);
            return 0;
        }
        slurm_error ("tier: %s", error.text);
        return -1;
    }
    return 0;
}

enum tier_cache_mode tier_effective_mode (void)
{
    if (tier.opts.cache != TIER_CACHE_UNSET)
        return tier.opts.cache;
    if (opts_any (&tier.opts))
        return TIER_CACHE_AUTO;
    return tier.args.default_mode;
}

static int register_options (spank_t sp)
{
    for (struct spank_option *o = tier_options; o->name; o++) {
        spank_err_t rc = spank_option_register (sp, o);
        if (rc != ESPANK_SUCCESS) {
            slurm_error ("tier: cannot register --%s: %s", o->name,
                         spank_strerror (rc));
            return -1;
        }
    }
    return 0;
}

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    tier_error_t error;
    spank_context_t ctx = spank_context ();

    if (args_parse (ac, av, &tier.args, &error) < 0) {
        /* A configuration error of the site: loud in every context.  In
         * slurmd and slurmstepd returning -1 would drain the node, so
         * there the plugin disables itself instead.
         */
        slurm_error ("tier: %s", error.text);
        if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR)
            return -1;
        tier.disabled = 1;
        return 0;
    }
    tier.args_ok = 1;
    if (register_options (sp) < 0)
        return (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR) ? -1 : 0;
    return 0;
}

/* The submit side: every option is known now (command line and #SBATCH
 * lines).  Check the whole set; a refusal refuses the submission.
 */
int slurm_spank_init_post_opt (spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context ();
    tier_error_t error;
    int is_array;

    if (ctx == S_CTX_REMOTE)
        return remote_init_post_opt (sp);
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR)
        return 0;
    if (!opts_any (&tier.opts) && tier.opts.cache == TIER_CACHE_UNSET)
        return 0;
    if (ctx == S_CTX_ALLOCATOR)
        is_array = submit_is_array ();
    else
        is_array = getenv ("SLURM_ARRAY_TASK_ID") ? 1 : 0;
    if (opts_check (&tier.opts, is_array, &error) < 0) {
        slurm_error ("tier: %s", error.text);
        return -1;
    }
    /* pipeline views are per node: say so for multi-node jobs */
    if (tier.opts.scratch[0]) {
        long nodes = submit_nodes ();
        const char *nn = getenv ("SLURM_NNODES");
        if (ctx == S_CTX_LOCAL && nodes == 0 && nn)
            nodes = strtol (nn, NULL, 10);
        if (nodes > 1)
            fprintf (stderr, "%s: warning: tier: --tier-scratch gives each of "
                     "the %ld nodes its own private view: a file written on "
                     "one node is not visible on the others\n",
                     program_invocation_short_name, nodes);
    }
    return 0;
}

/* Is dir one of the items of the list (both normalised)? */
static bool listed (const char *list, const char *dir)
{
    char item[PATH_MAX + 64], d[PATH_MAX + 64], a[PATH_MAX], b[PATH_MAX];
    const char *p = list;
    uint64_t size;
    tier_error_t e;

    if (tier_path_normalize (dir, b, sizeof (b)) < 0)
        return false;
    while ((p = opts_next_item (p, item, sizeof (item))))
        if (opts_split_size (item, d, sizeof (d), &size, &e) == 0
            && tier_path_normalize (d, a, sizeof (a)) == 0 && !strcmp (a, b))
            return true;
    return false;
}

/* The working directory of the task (it has joined the namespace, and
 * Slurm has changed into the job's directory) inside one of the job's
 * pipeline directories: relative paths then write to the private view.
 * One line on the job's stderr.
 */
static void warn_cwd (void)
{
    char cwd[PATH_MAX], item[PATH_MAX + 64], dir[PATH_MAX + 64];
    char norm[PATH_MAX];
    const char *p = tier.opts.scratch;
    uint64_t size;
    tier_error_t e;

    if (!getcwd (cwd, sizeof (cwd)))
        return;
    while ((p = opts_next_item (p, item, sizeof (item))))
        if (opts_split_size (item, dir, sizeof (dir), &size, &e) == 0
            && tier_path_normalize (dir, norm, sizeof (norm)) == 0
            && tier_path_under (cwd, norm)) {
            slurm_spank_log ("tier: warning: the working directory %s lies "
                             "in the pipeline directory %s: it is this "
                             "job's private view on each node, so what the "
                             "job writes there (relative paths included) "
                             "stays on the node and is discarded at job end "
                             "unless kept (--tier-keep); the -o/-e files "
                             "still reach the GFS", cwd, norm);
            return;
        }
}

/* Pipeline views are per node.  --tier-scratch is warned about at submit;
 * the directories that come from policies are known only here, on the
 * node, once the job's set is frozen: one line on the job's stderr from
 * the job's first task -- in the batch step, or in each step that is not
 * inside a batch script (srun or salloc jobs) -- when the job has more
 * than one node.  The same task warns about a working directory inside
 * one of them.
 */
int slurm_spank_task_init (spank_t sp, int ac, char **av)
{
    char item[PATH_MAX + 64], dir[PATH_MAX + 64], env[32], dirs[1024] = "";
    const char *p = tier.opts.scratch;
    uint32_t task = 1, step = 0;
    size_t o = 0;
    uint64_t size;
    tier_error_t e;
    long nodes;

    if (spank_context () != S_CTX_REMOTE || !tier.ns_ok
        || !tier.opts.scratch[0]
        || spank_get_item (sp, S_TASK_GLOBAL_ID, &task) != ESPANK_SUCCESS
        || task != 0
        || spank_get_item (sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
        return 0;
    if (step != SLURM_BATCH_SCRIPT
        && spank_getenv (sp, "ENVIRONMENT", env, sizeof (env))
           == ESPANK_SUCCESS && !strcmp (env, "BATCH"))
        return 0;                       /* the batch step said it */
    warn_cwd ();
    if (spank_getenv (sp, "SLURM_JOB_NUM_NODES", env, sizeof (env))
        != ESPANK_SUCCESS || (nodes = strtol (env, NULL, 10)) < 2)
        return 0;
    while ((p = opts_next_item (p, item, sizeof (item)))) {
        int n;
        if (opts_split_size (item, dir, sizeof (dir), &size, &e) < 0
            || listed (tier.scratch_opt, dir))
            continue;
        n = snprintf (dirs + o, sizeof (dirs) - o, "%s%s", o ? ", " : "",
                      dir);
        if (n < 0 || (size_t) n >= sizeof (dirs) - o) {
            (void) snprintf (dirs + sizeof (dirs) - 5, 5, "...");
            break;
        }
        o += (size_t) n;
    }
    if (dirs[0])
        slurm_spank_log ("tier: warning: the pipeline directories of your "
                         "policies (%s) give each of the %ld nodes of this "
                         "job its own private view: a file written on one "
                         "node is not visible on the others", dirs, nodes);
    return 0;
}

/* Did the job fail?  From the job record (one RPC per job and node, in
 * the epilog only): the batch script's exit status, or a failed state.
 * If slurmctld cannot tell, the data is kept (losing it would be worse).
 */
bool tier_job_failed (uint32_t job_id)
{
    job_info_msg_t *msg = NULL;
    bool failed = true;

    if (slurm_load_job (&msg, job_id, SHOW_ALL) != SLURM_SUCCESS || !msg)
        return true;
    for (uint32_t i = 0; i < msg->record_count; i++) {
        job_info_t *j = &msg->job_array[i];
        uint32_t base = j->job_state & JOB_STATE_BASE;
        if (j->job_id != job_id)
            continue;
        failed = j->exit_code != 0
                 || (base != JOB_RUNNING && base != JOB_COMPLETE
                     && base != JOB_PENDING);
    }
    slurm_free_job_info_msg (msg);
    return failed;
}

/* How often the job was requeued (0 if slurmctld cannot tell). */
uint32_t tier_job_restarts (uint32_t job_id)
{
    job_info_msg_t *msg = NULL;
    uint32_t n = 0;

    if (slurm_load_job (&msg, job_id, SHOW_ALL) != SLURM_SUCCESS || !msg)
        return 0;
    for (uint32_t i = 0; i < msg->record_count; i++)
        if (msg->job_array[i].job_id == job_id)
            n = msg->job_array[i].restart_cnt;
    slurm_free_job_info_msg (msg);
    return n;
}

/* Is the job over (cancelled, failed, completing)?  From the job record. */
bool tier_job_gone (uint32_t job_id)
{
    job_info_msg_t *msg = NULL;
    bool gone = false;

    if (slurm_load_job (&msg, job_id, SHOW_ALL) != SLURM_SUCCESS || !msg)
        return false;                   /* cannot tell: keep waiting */
    for (uint32_t i = 0; i < msg->record_count; i++) {
        job_info_t *j = &msg->job_array[i];
        uint32_t base = j->job_state & JOB_STATE_BASE;
        if (j->job_id == job_id)
            gone = (base != JOB_RUNNING && base != JOB_PENDING)
                   || (j->job_state & JOB_COMPLETING);
    }
    slurm_free_job_info_msg (msg);
    return gone;
}

/* Fill tier.opts from spank_option_getopt (JOB_SCRIPT context, where the
 * option callbacks do not run).  A bad value leaves the job untiered here;
 * the job itself fails in task_init_privileged.
 */
static void getopt_all (spank_t sp)
{
    for (struct spank_option *o = tier_options; o->name; o++) {
        char *v = NULL;
        if (spank_option_getopt (sp, o, &v) == ESPANK_SUCCESS && v)
            (void) opt_cb (o->val, v, 1);
    }
}

/* Start stage-in from the prolog: the earliest point (with
 * PrologFlags=Alloc, at allocation on every node).  The prolog has no
 * array items: one job-record lookup gives them, and the node's index.
 */
static void prolog_stage_in (const struct tier_conf *conf, uint32_t job_id,
                             uid_t uid, gid_t gid)
{
    static char items[TIER_STAGE_ITEMS_MAX][PATH_MAX];
    struct tier_pattern_ctx ctx = { .job_id = job_id, .node_name = conf->node };
    job_info_msg_t *msg = NULL;
    struct passwd pw, *pwp = NULL;
    char buf[4096], name[256] = "job", user[64] = "";
    tier_error_t error;
    int n;

    if (slurm_load_job (&msg, job_id, SHOW_ALL) != SLURM_SUCCESS || !msg)
        return;                         /* the first step starts it */
    for (uint32_t i = 0; i < msg->record_count; i++) {
        job_info_t *j = &msg->job_array[i];
        if (j->job_id != job_id)
            continue;
        ctx.is_array = j->array_job_id != 0;
        ctx.array_job_id = j->array_job_id ? j->array_job_id : job_id;
        ctx.array_task_id = j->array_task_id;
        if (j->name)
            (void) snprintf (name, sizeof (name), "%s", j->name);
        if (j->nodes) {
            hostlist_t hl = slurm_hostlist_create (j->nodes);
            if (hl) {
                int idx = slurm_hostlist_find (hl, conf->node);
                ctx.node_index = idx > 0 ? (uint32_t) idx : 0;
                slurm_hostlist_destroy (hl);
            }
        }
    }
    slurm_free_job_info_msg (msg);
    if (getpwuid_r (uid, &pw, buf, sizeof (buf), &pwp) == 0 && pwp)
        (void) snprintf (user, sizeof (user), "%s", pw.pw_name);
    ctx.job_name = name;
    ctx.user = user;
    if ((n = stage_expand (tier.opts.stage_in, &ctx, items,
                           TIER_STAGE_ITEMS_MAX, &error))
            < 0
        || stage_start (conf, tier.conf_path, job_id, uid, gid, items, n, NULL,
                        &error)
               < 0)
        slurm_error ("tier: prolog of job %u: stage-in: %s", job_id,
                     error.text);
}

/* The prolog runs once per job per node, as root, in the host namespace
 * (with PrologFlags=Alloc at allocation on every node; without, when the
 * job reaches the node).  Start the agent early.  Always returns 0: a
 * failing prolog drains the node.
 */
int slurm_spank_job_prolog (spank_t sp, int ac, char **av)
{
    tier_error_t error;
    struct tier_conf *conf;

    if (args_parse (ac, av, &tier.args, &error) < 0) {
        slurm_error ("tier: %s", error.text);
        return 0;
    }
    getopt_all (sp);
    if (tier_effective_mode () == TIER_CACHE_OFF)
        return 0;
    if (!(conf = remote_load_conf (&error))) {
        slurm_error ("tier: prolog: %s", error.text);
        return 0;
    }
    if (conf->enabled
        && spawn_ensure (conf, tier.conf_path, conf->node, 5000, &error) < 0)
        slurm_error ("tier: prolog: %s", error.text);
    if (conf->enabled && ns_wanted ()) {
        uint32_t job_id = 0;
        uid_t uid = 0;
        gid_t gid = 0;
        if (spank_get_item (sp, S_JOB_ID, &job_id) == ESPANK_SUCCESS
            && spank_get_item (sp, S_JOB_UID, &uid) == ESPANK_SUCCESS
            && spank_get_item (sp, S_JOB_GID, &gid) == ESPANK_SUCCESS) {
            if (ns_prolog (conf, job_id, uid, &error) < 0)
                slurm_error ("tier: prolog of job %u: %s", job_id,
                             error.text);
            else if (tier.opts.stage_in[0])
                prolog_stage_in (conf, job_id, uid, gid);
        }
    }
    tier_conf_destroy (conf);
    return 0;
}

/* Say in the job record (AdminComment) what did not reach the GFS, with
 * the first file that failed and why (the job's owner sees it in
 * scontrol show job: the path is theirs).  Only while slurmctld still
 * takes updates: from the batch step's end; at the epilog the job has
 * usually finished already (then tierctl outputs and the agent's log say
 * it).
 */
void tier_admin_comment (uint32_t job_id, const char *node,
                         const struct tier_stageout_left *left)
{
    char note[512];
    job_desc_msg_t desc;

    if (left->unreachable)
        (void) snprintf (note, sizeof (note),
                         "tier: on node %s, no tierd "
                         "answered within StageOutTimeout: the outputs may "
                         "not be on the GFS; kept and staged out once it "
                         "runs, see tierctl outputs --job %u",
                         node, job_id);
    else
        (void) snprintf (note, sizeof (note),
                         "tier: on node %s, %d output "
                         "file(s) not on the GFS (%d failed, %d in "
                         "conflict)%s%s; kept and retried, see tierctl "
                         "outputs --job %u",
                         node, left->pending + left->failed + left->conflicts,
                         left->failed, left->conflicts,
                         left->first[0] ? ": " : "", left->first, job_id);
    slurm_init_job_desc_msg (&desc);
    desc.job_id = job_id;
    desc.admin_comment = note;
    if (slurm_update_job (&desc) != SLURM_SUCCESS)
        slurm_info ("tier: job %u: AdminComment not set: %s", job_id,
                    slurm_strerror (slurm_get_errno ()));
}

/* Job end on this node: every output must reach the GFS before the job
 * completes (afterok dependents wait for the epilogs), within
 * StageOutTimeout, and so must the node's manifest of them (the agent
 * answers once it is written).  What is left is kept and retried by the
 * agent, and shown in the job record (AdminComment) while Slurm keeps it.
 */
static void sync_outputs_end (const struct tier_conf *conf, uint32_t job_id)
{
    static char list[TIER_OPT_VALUE_MAX];
    struct tier_stageout_left left;
    tier_error_t error;
    uint32_t restart = 0;
    char r[32];

    if (tier_ns_read (conf->namespace_dir, job_id, TIER_NS_RESTART, r,
                      sizeof (r))
        == 0)
        restart = (uint32_t) strtoul (r, NULL, 10);
    if (tier_ns_read (conf->namespace_dir, job_id, TIER_NS_STAGEOUT, list,
                      sizeof (list)) < 0 || !list[0])
        return;
    if (stage_out_sync_end (conf, tier.conf_path, job_id, restart, list,
                            (int64_t) conf->stage_out_timeout * 1000, &left,
                            &error)
        < 0) {
        slurm_error ("tier: epilog of job %u: stage-out: %s", job_id,
                     error.text);
        return;
    }
    if (left.lost)
        slurm_info ("tier: epilog of job %u: tierd went away %d time(s) "
                    "while the outputs were staged out; %s",
                    job_id, left.lost,
                    left.unreachable ? "none answered again"
                                     : "the restarted "
                                       "agent resumed them");
    if (left.unreachable) {
        slurm_error ("tier: on node %s, the outputs of job %u are not known "
                     "to be on the GFS at job end: no tierd answered within "
                     "StageOutTimeout (%llu s); kept in the write cache and "
                     "staged out once tierd runs again",
                     conf->node, job_id,
                     (unsigned long long) conf->stage_out_timeout);
        tier_admin_comment (job_id, conf->node, &left);
    }
    else if (left.pending || left.failed || left.conflicts) {
        slurm_error ("tier: on node %s, %d output file(s) of job %u not on "
                     "the GFS at job end (%d failed, %d in conflict%s)%s%s: "
                     "kept and retried", conf->node,
                     left.pending + left.failed + left.conflicts, job_id,
                     left.failed, left.conflicts,
                     left.timed_out ? ", StageOutTimeout passed" : "",
                     left.first[0] ? "; first: " : "", left.first);
        tier_admin_comment (job_id, conf->node, &left);
    }
}

/* The epilog runs on every node of the job.  Tell the agent the job
 * ended (starting it if it died: it then reconciles what it missed).
 * Always returns 0.
 */
/* A job whose batch script has no --tier option (with the plugstack
 * default off) may still have used tier on this node through its srun
 * steps, whose options the epilog never sees: what they left says so. */
static bool job_left_traces (const struct tier_conf *conf, uint32_t job_id)
{
    char prefix[32], path[PATH_MAX];
    struct dirent *de;
    bool found = false;
    DIR *d;

    if (tier_ns_exists (conf->namespace_dir, job_id))
        return true;
    (void) snprintf (prefix, sizeof (prefix), "%u.", job_id);
    if (!conf->nvdimm_dir[0]
        || snprintf (path, sizeof (path), "%s/.outbox", conf->nvdimm_dir)
               >= (int) sizeof (path)
        || !(d = opendir (path)))
        return false;
    while (!found && (de = readdir (d)))
        found = !strncmp (de->d_name, prefix, strlen (prefix));
    closedir (d);
    return found;
}

/* Such a job may also be registered with no trace on disk (its steps
 * used only the replica cache): end its record, if the node's agent
 * runs and has one; never start an agent for it, never wait long. */
static void end_quietly (const struct tier_conf *conf, uint32_t job_id)
{
    char body[64], *reply = NULL;
    tier_error_t e;

    (void) snprintf (body, sizeof (body), "{\"op\":\"job.end\",\"job_id\":%u}",
                     job_id);
    (void) spawn_call (conf, body, &reply, 2000, &e);
    free (reply);
}

/* The job's writes in its block cache on this node (if it has one)
 * reach the GFS before the job ends: an afterok dependent reads them. */
static void sync_blog_end (const struct tier_conf *conf, uint32_t job_id)
{
    char body[160], *reply = NULL;
    tier_error_t error;
    int64_t pending = 0;
    bool drained = false, none = false;
    int timeout_ms = (int) (conf->stage_out_timeout > 3600
                                ? 3600 * 1000
                                : conf->stage_out_timeout * 1000);

    (void) snprintf (body, sizeof (body),
                     "{\"op\":\"blog.sync\",\"job_id\":%u,\"end\":true,"
                     "\"timeout_ms\":%d}",
                     job_id, timeout_ms);
    if (spawn_call_ex (conf, body, &reply,
                       timeout_ms + (int) conf->agent_timeout_ms, NULL, &error)
        < 0) {
        slurm_error ("tier: epilog of job %u: its block cache: %s", job_id,
                     error.text);
        return;
    }
    (void) tier_jr_get_bool (reply, strlen (reply), "none", &none);
    (void) tier_jr_get_bool (reply, strlen (reply), "drained", &drained);
    (void) tier_jr_get_int (reply, strlen (reply), "pending", &pending);
    if (!none && !drained)
        slurm_error ("tier: on node %s, %lld bytes of job %u's writes in "
                     "its block cache are not on the GFS at job end (see "
                     "tierctl status); kept and drained later",
                     conf->node, (long long) pending, job_id);
    free (reply);
}

int slurm_spank_job_epilog (spank_t sp, int ac, char **av)
{
    tier_error_t error;
    struct tier_conf *conf;
    uint32_t job_id = 0;
    char body[512], *reply = NULL;
    bool wanted;

    if (args_parse (ac, av, &tier.args, &error) < 0)
        return 0;
    getopt_all (sp);
    wanted = tier_effective_mode () != TIER_CACHE_OFF;
    if (spank_get_item (sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
        return 0;
    if (!(conf = remote_load_conf (&error))) {
        if (wanted)
            slurm_error ("tier: epilog: %s", error.text);
        return 0;
    }
    if (!wanted && !job_left_traces (conf, job_id)) {
        end_quietly (conf, job_id);
        tier_conf_destroy (conf);
        return 0;
    }
    /* what the job left in scratch; kept on the GFS if asked */
    {
        static char scratch[TIER_OPT_VALUE_MAX];
        struct tier_scratch_stats st = { 0 };
        char r[32], name[32];
        uint32_t restart = 0;

        /* this run of the job (a requeued one keeps beside the first) */
        if (tier_ns_read (conf->namespace_dir, job_id, TIER_NS_RESTART, r,
                          sizeof (r)) == 0)
            restart = (uint32_t) strtoul (r, NULL, 10);
        keep_name (job_id, restart, name, sizeof (name));

        /* the directories mounted, each with the keep= of its frozen
         * policy; --tier-keep for those without: the batch script's, or
         * the strongest a step gave (TIER_NS_KEEP: the epilog sees only
         * the batch script's options) */
        if (tier_ns_read (conf->namespace_dir, job_id, TIER_NS_KEEP, r,
                          sizeof (r))
            == 0) {
            enum tier_keep k = TIER_KEEP_UNSET;
            if (opts_keep_parse (r, &k, &error) == 0 && k > tier.opts.keep)
                tier.opts.keep = k;
        }
        if (tier_ns_read (conf->namespace_dir, job_id, TIER_NS_SCRATCH, scratch,
                          sizeof (scratch))
                == 0
            && scratch[0]) {
            if (keep_scratch_finish (sp, conf, job_id, restart, scratch,
                                     tier.opts.keep, tier_job_failed, &st,
                                     &error)
                < 0)
                slurm_error ("tier: epilog of job %u: %s", job_id,
                             error.text);
            if (st.kept_dirs)
                slurm_info ("tier: job %u: kept %llu files of pipeline data "
                            "of %llu directories under .tier-kept/%s/%s/",
                            job_id, (unsigned long long) st.kept_files,
                            (unsigned long long) st.kept_dirs, name,
                            conf->node);
        }
        (void) snprintf (body, sizeof (body),
                         "{\"op\":\"job.end\",\"job_id\":%u,"
                         "\"scratch_files\":%llu,\"scratch_bytes\":%llu,"
                         "\"copyups\":%llu,\"copyup_bytes\":%llu,"
                         "\"kept_bytes\":%llu}", job_id,
                         (unsigned long long) st.files,
                         (unsigned long long) st.bytes,
                         (unsigned long long) st.copyups,
                         (unsigned long long) st.copyup_bytes,
                         (unsigned long long) st.kept_bytes);
    }

    sync_outputs_end (conf, job_id);
    sync_blog_end (conf, job_id);
    if (spawn_call_sure (conf, tier.conf_path, job_id, "job end", body, &reply,
                         &error)
            < 0
        && !(errno == ENOENT && strstr (error.text, "not registered")))
        slurm_error ("tier: epilog of job %u: %s", job_id, error.text);
    free (reply);
    /* then the namespace and the job's tier data (the agent has stopped a
     * stage-in still running); if something is still inside, the agent
     * retries once it is gone (the mark tells it that this run ended:
     * an unmarked namespace made after the run's end is a new run's) */
    {
        int rc;
        (void) tier_ns_mark (conf->namespace_dir, job_id, TIER_NS_ENDED);
        rc = tier_job_reclaim (conf->namespace_dir, conf->nvdimm_dir,
                                   job_id, &error);
        if (rc != 0)
            slurm_error ("tier: epilog of job %u: %s", job_id, error.text);
    }
    tier_conf_destroy (conf);
    return 0;
}

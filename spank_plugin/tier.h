/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* tier.h - state shared by the plugin's per-context files */
#ifndef TIER_SPANK_TIER_H
#define TIER_SPANK_TIER_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <slurm/spank.h>

#include "lib/conf.h"
#include "args.h"
#include "opts.h"
#include "stage.h"

struct tier_plugin {
    struct tier_args args;      /* from plugstack.conf */
    int args_ok;
    int disabled;               /* a site configuration error on the node */
    struct tier_opts opts;      /* the --tier-* options */
    char scratch_opt[TIER_OPT_VALUE_MAX];   /* --tier-scratch as given (on
                                 * the node, opts.scratch becomes the
                                 * frozen set's pipeline directories) */
    char opt_error[512];        /* a bad option value seen on the node */

    /* REMOTE: this step on this node */
    struct tier_conf *conf;     /* tier.conf, loaded as root */
    char conf_path[PATH_MAX];   /* conf= with %n expanded (remote_load_conf) */
    int wanted;                 /* the job asked for tier */
    int agent_ok;               /* registered with the node's agent */
    char agent_error[600];      /* why not, for the user */
    uint32_t job_id;
    uint32_t batch_id;          /* array job id, or the job id */
    int is_array;
    int ns_ok;                  /* the job's namespace is ready to join */
    int ns_no_agent;            /* ... made by an earlier step; the agent
                                 * did not answer this one */
    int scratch_denied;         /* the agent refused the reservation */
    int batch_status;           /* batch script: 1 failed, 0 ok */
    int stage_n;                /* --tier-stage-in items, expanded, then
                                 * the policies' input directories */
    char stage_items[64][PATH_MAX];
    struct tier_stage_plan stage_plan;  /* where the agent copies them */
    int stage_started;          /* the agent was asked to copy them */
    char refused[2048];         /* job options the policies refused */
    char window_dirs[TIER_OPT_VALUE_MAX]; /* "D1:D2": the block cache's
                                           * (TIER_WINDOW_DIRS) */
    char batch_dirs[TIER_OPT_VALUE_MAX];  /* "D1:D2:!D3" for the
                                           * interposer (agent's reply) */
    char binds[TIER_OPT_VALUE_MAX];  /* "DIR=TREE:..." mirrors to bind
                                      * (eager mode, agent's reply) */
    char bound[TIER_OPT_VALUE_MAX];  /* "DIR:..." bound on this node */
    char bind_error[1024];      /* why a mirror was not bound */
    char outbox_error[1024];    /* why a write cache was not mounted */
    char outbox_denied[256];    /* why the agent gives the job no write
                                 * cache (WriteCacheUserMax), or "" */
    uint32_t restart;           /* the job's restart count */
    uint64_t write_cache;       /* its write cache's size on this node
                                 * (agent's reply; 0: not limited) */
    char policy_out[TIER_OPT_VALUE_MAX];  /* endpoint dirs (agent's reply) */
    char policy_in[TIER_OPT_VALUE_MAX];   /* endpoint input dirs (stage =
                                           * in; agent's reply) */
    char stage_out[TIER_OPT_VALUE_MAX];   /* this job's output directories:
                                           * expanded options + policies */
    char ns_error[600];         /* why not */
};

extern struct tier_plugin tier;

/* --tier-cache as it applies: the option, else implied by other options
 * (auto), else the plugstack default.
 */
enum tier_cache_mode tier_effective_mode (void);

/* remote.c: slurmstepd */
int remote_init_post_opt (spank_t sp);
struct tier_stageout_left;
void tier_admin_comment (uint32_t job_id, const char *node,
                         const struct tier_stageout_left *left);
struct tier_conf *remote_load_conf (tier_error_t *error);

bool tier_job_failed (uint32_t job_id);
bool tier_job_gone (uint32_t job_id);
uint32_t tier_job_restarts (uint32_t job_id);

/* ns.c: the job's mount namespace */
bool ns_wanted (void);
int ns_prolog (const struct tier_conf *conf, uint32_t job_id, uid_t uid,
               tier_error_t *error);
int ns_setup (spank_t sp, tier_error_t *error);
int ns_join (tier_error_t *error);

#endif /* !TIER_SPANK_TIER_H */

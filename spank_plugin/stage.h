/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage.h - the plugin's side of stage-in (libc only) */
#ifndef TIER_SPANK_STAGE_H
#define TIER_SPANK_STAGE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <slurm/spank.h>

#include "lib/conf.h"
#include "lib/error.h"
#include "opts.h"

#define TIER_STAGE_ITEMS_MAX 64

/* Expand the --tier-stage-in list for this job; returns the count. */
int stage_expand (const char *list, const struct tier_pattern_ctx *ctx,
                  char items[][PATH_MAX], int max, tier_error_t *error);

/* Where the agent stages a job's items on the node: the copy of
 * items[i] is in NvdimmDir/JOBID/stage/index[i]/, and the job's stage-in
 * has parts parts to wait for (the items of the first request -- the
 * prolog's or the first step's --, then each later request that added
 * some: the endpoint policies' inputs, known from the first step on). */
struct tier_stage_plan {
    int index[TIER_STAGE_ITEMS_MAX];
    int parts;
};

/* Ask the node's agent to copy the items (once per job and item: what a
 * request adds is staged as another part); plan (may be NULL) gets its
 * answer. */
int stage_start (const struct tier_conf *conf, const char *conf_path,
                 uint32_t job_id, uid_t uid, gid_t gid, char items[][PATH_MAX],
                 int n, struct tier_stage_plan *plan, tier_error_t *error);

/* Wait until the copies of every part are done (progress every 10 s when
 * report), up to StageInTimeout, or until gone(job_id) says the job was
 * cancelled (asked every 3 s).  A part whose stager is gone unfinished
 * (killed) is started again by the agent (conf_path: to start one where
 * none answers), a few times.  -1 with the failure (naming the path)
 * otherwise.
 */
int stage_wait (const struct tier_conf *conf, const char *conf_path,
                uint32_t job_id, int parts, bool report,
                bool (*gone) (uint32_t job_id), tier_error_t *error);

/* Bind the copies read-only over their paths, once per job and node (the
 * caller is in the job's namespace; each target is resolved with the
 * credentials of sp's job, ns_job_cred).
 */
int stage_bind (spank_t sp, const struct tier_conf *conf, uint32_t job_id,
                char items[][PATH_MAX], const int *index, int n,
                tier_error_t *error);

/* Stage-out: the list of the job's output directories on this node --
 * the --tier-stage-out items expanded for this job (DIR or DIR=URL, the
 * URL checked again), then the frozen policies' endpoint directories
 * (policy_dirs, as the agent sent it), each directory normalised and
 * once -- as a ',' list with '\' escapes.  -1 with the failure.
 */
int stage_out_dirs (const char *option, const char *policy_dirs,
                    const struct tier_pattern_ctx *ctx, char *out, size_t size,
                    tier_error_t *error);

/* One item of that list: the GFS directory into dir, and the URL its
 * files go to into url ("" when they go to the directory itself).
 * Returns 0, or -1 with errno set.
 */
int stage_out_item (const char *item, char *dir, size_t dirsize, char *url,
                    size_t urlsize);

/* Start the job's migrator on this node (its output overlays are
 * mounted). */
int stage_out_start (const struct tier_conf *conf, const char *conf_path,
                     uint32_t job_id, uint32_t restart, const char *list,
                     tier_error_t *error);

/* Publish what the outputs hold now; wait up to timeout_ms for every
 * output to reach the GFS (0: do not wait).  With end (the epilog), the
 * job has ended on this node: the wait covers its manifest too.  The
 * counts of what is left.  Asked again for AgentTimeout while the agent
 * restarts (one started where the plugin starts agents: conf_path).
 */
struct tier_stageout_left {
    int pending, failed, conflicts;
    bool timed_out;
    bool stuck;                 /* the job's migrator is stuck in a GFS
                                 * request (StallTimeout): nothing moves
                                 * until the GFS answers */
    char first[320];            /* "PATH: REASON" of the first output that
                                 * failed (cut, no control characters), or
                                 * "" */
    bool unreachable;           /* stage_out_sync_end: no agent answered
                                 * before the bound (the counts are 0:
                                 * unknown) */
    int lost;                   /* and how often the agent went away */
};
int stage_out_sync (const struct tier_conf *conf, const char *conf_path,
                    uint32_t job_id, int64_t timeout_ms, bool end,
                    struct tier_stageout_left *left, tier_error_t *error);

/* The epilog's stage_out_sync (with end), across restarts of the agent:
 * when it cannot be reached or dies while it waits, start one (if the
 * plugin starts agents) and ask the restarted one, whose resumed
 * migrations answer -- all within timeout_ms.  An agent that never
 * heard of the job's write caches (they are there) is told of them
 * (list, as for stage_out_start) first.  Returns 0 with what is
 * left (left->unreachable: no agent answered before the bound), or -1
 * with an error the agent answered.
 */
int stage_out_sync_end (const struct tier_conf *conf, const char *conf_path,
                        uint32_t job_id, uint32_t restart, const char *list,
                        int64_t timeout_ms, struct tier_stageout_left *left,
                        tier_error_t *error);

#endif /* !TIER_SPANK_STAGE_H */

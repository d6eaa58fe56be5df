/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy.h - the agent's side of directory policies: freezing a job's
 * effective set when it starts, and the requests about it */
#ifndef TIER_AGENT_POLICY_H
#define TIER_AGENT_POLICY_H

#include <jansson.h>

#include "lib/error.h"
#include "policies/policy.h"
#include "agent.h"

/* Freeze job's effective policy set (site + the user's store + the job's
 * options), once for the whole job: the first node to write
 * SharedStateDir/users/USER/jobs/JOB.RESTART/policy.json wins and every
 * other node reads that one; each node keeps a copy with its registry
 * (StateDir/policies/).  Never fails the registration: problems are
 * logged and recorded in the set.  The work in the user's directory runs
 * in children (policy_freezer.h), off the loop: done hears a summary for
 * the job.register reply (its own; NULL if out of memory), exactly once
 * -- possibly before this returns.  job is needed only during the call.
 */
typedef void (*policy_freeze_f) (struct agent *a, json_t *summary, void *arg);
void policy_job_freeze (struct agent *a, const struct store_job *job,
                        policy_freeze_f done, void *arg);

/* Add the summary pol (consumed) to the job.register reply res as
 * "policy"; returns res.
 */
json_t *policy_reply (json_t *pol, json_t *res);

/* The frozen set's pipeline directories as "DIR[:SIZE],..." and the sum of
 * their reservations, and why any of the job's own options were refused
 * ("; "-separated); -1 if the job has no frozen set on this node.
 */
int policy_job_pipeline (struct agent *a, const struct store_job *job,
                         char *out, size_t size, uint64_t *reserve,
                         char *refused, size_t rsize);

/* job.policy {job_id, restart?}: the frozen set of a job on this node
 * (its owner, root and SlurmUser).
 */
json_t *op_job_policy (struct agent *a, struct conn *c, json_t *req,
                       tier_error_t *error);

/* user.ensure {}: make the caller's own directory in SharedStateDir (the
 * uid from SO_PEERCRED, never a claimed name), as at job registration.
 */
json_t *op_user_ensure (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error);

/* The effective policy of path in a running job's frozen set (out->role
 * is TIER_POLICY_NONE when none covers it; out's strings are not set).
 * -1 with errno ENOENT if the job has no frozen set on this node.
 */
int policy_job_resolve (struct agent *a, const struct store_job *job,
                        const char *path, struct tier_policy *out);

/* The job's batch directories for the interposer, "D1:D2:!D3" (!D: a
 * directory inside a batch directory that is not batch). -1 if the job
 * has no frozen set on this node.
 */
int policy_job_batch (struct agent *a, const struct store_job *job,
                      char *out, size_t size);

/* The job's endpoint output directories (output overlays: stage = out,
 * the default), a ',' list with '\' escapes; -1 if the job has no frozen
 * set on this node.
 */
int policy_job_endpoint (struct agent *a, const struct store_job *job,
                         char *out, size_t size);

/* The job's endpoint input directories (stage = in: staged in as
 * read-only snapshots when its first step registers), as
 * policy_job_endpoint.
 */
int policy_job_inputs (struct agent *a, const struct store_job *job,
                       char *out, size_t size);
/* The block cache's directories of a job (endpoint, window, stage none),
 * for the interposer: "D1:D2" (directories with ':' left out). */
int policy_job_window (struct agent *a, const struct store_job *job, char *out,
                       size_t size);

/* The set a user's next job would freeze, without the job layer (for
 * requests from outside a job), from the user policies the freezer read
 * (kind a POLMSG_* of policy_msg.h, text its text or NULL).  NULL on
 * failure.
 */
struct tier_policy_set *policy_user_set (struct agent *a, uid_t uid,
                                         const char *user, int kind,
                                         const char *text);

#endif /* !TIER_AGENT_POLICY_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* store.h - the agent's durable state in LMDB: the job registry, the
 * counters and the replica index.  Only the agent opens the environment (StateDir/registry,
 * node-local, root 0700); clients ask the agent.
 */
#ifndef TIER_STORE_H
#define TIER_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/counters.h"
#include "lib/cred.h"
#include "lib/error.h"

#define STORE_MAPSIZE_DEFAULT (1UL << 30)    /* sparse: only used pages */
#define STORE_NO_TASK 0xfffffffeU            /* not an array task */

enum store_job_state {
    STORE_JOB_RUNNING = 1,      /* registered, its epilog has not run */
    STORE_JOB_ENDED,            /* its epilog ran */
    STORE_JOB_RECONCILED,       /* ended while the agent was down */
};

struct store_job {
    uint32_t job_id;
    uint32_t restart;           /* requeued jobs reuse the id */
    uint32_t batch_id;          /* array job id, or the job id */
    uint32_t array_task_id;     /* STORE_NO_TASK if not an array task */
    uint32_t uid;
    uint32_t gid;
    char user[64];
    char node[64];
    enum store_job_state state;
    int64_t registered;         /* seconds since the epoch */
    int64_t ended;              /* 0 while running */
    int32_t steps;              /* steps that registered on this node */
    uint64_t reserved;          /* NVDIMM scratch bytes reserved */
    uint64_t write_cache;       /* NVDIMM bytes reserved for the job's
                                 * write cache (its outputs) */
    int32_t scratch_denied;     /* the reservation did not fit */
    int32_t exit_code;          /* the batch script's wait status, or -1 */
    char options[2048];         /* the job's --tier options, as JSON */
    int32_t ngroups;            /* the job's group list, as Slurm gave it
                                 * to a step that registered (jobs_cred),
                                 * or -1: not known (a zeroed record says
                                 * "none": set -1 unless a list is known) */
    uint32_t groups[TIER_CRED_GROUPS_MAX];
};

/* Take the job's group list from a JSON array (a registration's "groups",
 * a record's): at most TIER_CRED_GROUPS_MAX integers, each a gid from 0
 * to 2^32 - 2 ((gid_t) -1 is no group).  Anything else is refused (-1,
 * errno EINVAL or E2BIG, and a text) and leaves job unchanged.
 */
int store_job_set_groups (struct store_job *job, const json_t *groups,
                          tier_error_t *error);

struct store;

struct store *store_open (const char *dir, size_t mapsize,
                          tier_error_t *error);
void store_close (struct store *st);

/* Empty every database (jobs, counters, replicas, outputs, uploads) in
 * one transaction; the environment stays open.
 */
int store_clear (struct store *st, tier_error_t *error);

/* Insert or replace the record of (job_id, restart). */
int store_job_put (struct store *st, const struct store_job *job,
                   tier_error_t *error);

/* Get one record; -1 with errno ENOENT if absent. */
int store_job_get (struct store *st, uint32_t job_id, uint32_t restart,
                   struct store_job *job, tier_error_t *error);

/* The record of job_id with the highest restart count. */
int store_job_latest (struct store *st, uint32_t job_id,
                      struct store_job *job, tier_error_t *error);

int store_job_delete (struct store *st, uint32_t job_id, uint32_t restart,
                      tier_error_t *error);

/* Call cb for every record in key order (cb returns non-zero to stop). */
typedef int (*store_job_f) (const struct store_job *job, void *arg);
int store_job_foreach (struct store *st, store_job_f cb, void *arg,
                       tier_error_t *error);

/* Counters.  ids: a job is (job_id << 32 | restart), a batch its id, the
 * node 0.
 */
static inline uint64_t store_job_key (uint32_t job_id, uint32_t restart)
{
    return ((uint64_t) job_id << 32) | restart;
}

struct store_delta {
    enum tier_scope scope;
    uint64_t id;
    struct tier_counters c;
};

/* Add n deltas to the stored counters in one transaction. */
int store_counters_add (struct store *st, const struct store_delta *d,
                        int n, tier_error_t *error);

/* Stored counters of one key (zeros if none; returns 0 either way). */
int store_counters_get (struct store *st, enum tier_scope scope, uint64_t id,
                        struct tier_counters *c, tier_error_t *error);

/* Delete the counters of one key (retention). */
int store_counters_delete (struct store *st, enum tier_scope scope,
                           uint64_t id, tier_error_t *error);

/* Replica records (replica.c): a key (text) and a JSON value.  apply
 * puts (val set) and deletes (val NULL) n records in one transaction.
 */
struct store_kv {
    const char *key;
    const char *val;
};

int store_replica_apply (struct store *st, const struct store_kv *kv, int n,
                         tier_error_t *error);

typedef int (*store_kv_f) (const char *key, const void *val, size_t len,
                           void *arg);
int store_replica_foreach (struct store *st, store_kv_f cb, void *arg,
                           tier_error_t *error);

/* The stage-out manifest (migrate.c): one record per output file, keyed
 * "JOB.RESTART/K/REL".
 */
int store_output_apply (struct store *st, const struct store_kv *kv, int n,
                        tier_error_t *error);
int store_output_foreach (struct store *st, store_kv_f cb, void *arg,
                          tier_error_t *error);
/* One record (malloc'd, NUL-terminated); -1 with ENOENT if none. */
int store_output_get (struct store *st, const char *key, char **val,
                      size_t *len, tier_error_t *error);

/* Multipart uploads of object-store outputs in flight (migrate.c): their
 * upload ids and the ETags of their parts, so that an upload resumes
 * after a crash.  Keys "JOB.RESTART/K/REL u" and "JOB.RESTART/K/REL pN"
 * (REL escaped: no blank in it).  foreach and delete act on the keys
 * starting with prefix.
 */
int store_upload_apply (struct store *st, const struct store_kv *kv, int n,
                        tier_error_t *error);
int store_upload_foreach (struct store *st, const char *prefix,
                          store_kv_f cb, void *arg, tier_error_t *error);
int store_upload_delete (struct store *st, const char *prefix,
                         tier_error_t *error);

#endif /* !TIER_STORE_H */

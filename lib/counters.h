/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* counters.h - the one counter schema of every tier.
 *
 * Counters are kept per job (job id + restart count), per batch (the array
 * job id; the job id for a non-array job) and per node, each split by the
 * role of the data (endpoint, pipeline, batch).  Job and batch keys live
 * in different scopes, so an array's id (which equals its last task's job
 * id) never collides with that task's job counters.
 *
 * A counter is either a sum (events, bytes, milliseconds) or a maximum
 * (peaks); aggregating nodes or jobs adds sums and takes the maximum of
 * maxima.  Libc only: tierctl, the agent and tests share the names.
 */
#ifndef TIER_COUNTERS_H
#define TIER_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

enum tier_role {
    TIER_ROLE_ENDPOINT = 0,
    TIER_ROLE_PIPELINE,
    TIER_ROLE_BATCH,
    TIER_ROLE_COUNT,
};

enum tier_ctr {
    TIER_CTR_OPS = 0,           /* operations a tier handled */
    TIER_CTR_HITS,              /* served from a tier */
    TIER_CTR_MISSES,            /* had to fetch from the GFS first */
    TIER_CTR_FALLTHROUGHS,      /* served by the GFS directly (tier full...) */
    TIER_CTR_FAILURES,          /* operations that failed */
    TIER_CTR_BYTES_BB,          /* bytes held or served on the burst buffer */
    TIER_CTR_BYTES_NVDIMM,      /* bytes held or served on the NVDIMM tier */
    TIER_CTR_GFS_BYTES_READ,    /* bytes tier read from the GFS */
    TIER_CTR_GFS_BYTES_WRITTEN, /* bytes tier wrote to the GFS */
    TIER_CTR_GFS_META_OPS,      /* GFS metadata operations tier caused */
    TIER_CTR_GFS_BYTES_AVOIDED, /* bytes the GFS would otherwise have served */
    TIER_CTR_STAGE_IN_FILES,
    TIER_CTR_STAGE_IN_BYTES,
    TIER_CTR_STAGE_IN_MS,
    TIER_CTR_STAGE_OUT_FILES,
    TIER_CTR_STAGE_OUT_BYTES,
    TIER_CTR_STAGE_OUT_MS,
    TIER_CTR_MIGRATIONS_PENDING,
    TIER_CTR_MIGRATIONS_FAILED,
    TIER_CTR_CONFLICTS,
    TIER_CTR_SCRATCH_FILES,
    TIER_CTR_SCRATCH_BYTES,
    TIER_CTR_SCRATCH_PEAK,      /* maximum */
    TIER_CTR_COPYUPS,           /* GFS files copied up into scratch */
    TIER_CTR_COUNT,
};

enum tier_scope {
    TIER_SCOPE_JOB = 1,
    TIER_SCOPE_BATCH = 2,
    TIER_SCOPE_NODE = 3,
};

struct tier_counters {
    uint64_t v[TIER_ROLE_COUNT][TIER_CTR_COUNT];
};

/* "endpoint", "pipeline", "batch"; NULL out of range. */
const char *tier_role_name (enum tier_role role);
int tier_role_parse (const char *name);         /* -1 if unknown */

/* "ops", "hits", ..., as used in JSON and tables; NULL out of range. */
const char *tier_ctr_name (enum tier_ctr ctr);
int tier_ctr_parse (const char *name);          /* -1 if unknown */
bool tier_ctr_is_max (enum tier_ctr ctr);

/* dst += src, counter by counter (max for maxima). */
void tier_counters_merge (struct tier_counters *dst,
                          const struct tier_counters *src);

/* Add delta to one counter (for a maximum: keep the larger). */
void tier_counters_add (struct tier_counters *c, enum tier_role role,
                        enum tier_ctr ctr, uint64_t delta);

/* Sum of one counter over the roles. */
uint64_t tier_counters_total (const struct tier_counters *c,
                              enum tier_ctr ctr);

#endif /* !TIER_COUNTERS_H */

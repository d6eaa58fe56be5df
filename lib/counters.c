/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* counters.c - the counter schema's names and arithmetic */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <string.h>

#include "counters.h"

static const char *role_names[TIER_ROLE_COUNT] = {
    "endpoint", "pipeline", "batch",
};

static const char *ctr_names[TIER_CTR_COUNT] = {
    [TIER_CTR_OPS] = "ops",
    [TIER_CTR_HITS] = "hits",
    [TIER_CTR_MISSES] = "misses",
    [TIER_CTR_FALLTHROUGHS] = "fallthroughs",
    [TIER_CTR_FAILURES] = "failures",
    [TIER_CTR_BYTES_BB] = "bytes_bb",
    [TIER_CTR_BYTES_NVDIMM] = "bytes_nvdimm",
    [TIER_CTR_GFS_BYTES_READ] = "gfs_bytes_read",
    [TIER_CTR_GFS_BYTES_WRITTEN] = "gfs_bytes_written",
    [TIER_CTR_GFS_META_OPS] = "gfs_meta_ops",
    [TIER_CTR_GFS_BYTES_AVOIDED] = "gfs_bytes_avoided",
    [TIER_CTR_STAGE_IN_FILES] = "stage_in_files",
    [TIER_CTR_STAGE_IN_BYTES] = "stage_in_bytes",
    [TIER_CTR_STAGE_IN_MS] = "stage_in_ms",
    [TIER_CTR_STAGE_OUT_FILES] = "stage_out_files",
    [TIER_CTR_STAGE_OUT_BYTES] = "stage_out_bytes",
    [TIER_CTR_STAGE_OUT_MS] = "stage_out_ms",
    [TIER_CTR_MIGRATIONS_PENDING] = "migrations_pending",
    [TIER_CTR_MIGRATIONS_FAILED] = "migrations_failed",
    [TIER_CTR_CONFLICTS] = "conflicts",
    [TIER_CTR_SCRATCH_FILES] = "scratch_files",
    [TIER_CTR_SCRATCH_BYTES] = "scratch_bytes",
    [TIER_CTR_SCRATCH_PEAK] = "scratch_peak",
    [TIER_CTR_COPYUPS] = "copyups",
};

const char *tier_role_name (enum tier_role role)
{
    return (unsigned) role < TIER_ROLE_COUNT ? role_names[role] : NULL;
}

int tier_role_parse (const char *name)
{
    for (int i = 0; name && i < TIER_ROLE_COUNT; i++)
        if (!strcmp (name, role_names[i]))
            return i;
    return -1;
}

const char *tier_ctr_name (enum tier_ctr ctr)
{
    return (unsigned) ctr < TIER_CTR_COUNT ? ctr_names[ctr] : NULL;
}

int tier_ctr_parse (const char *name)
{
    for (int i = 0; name && i < TIER_CTR_COUNT; i++)
        if (!strcmp (name, ctr_names[i]))
            return i;
    return -1;
}

bool tier_ctr_is_max (enum tier_ctr ctr)
{
    return ctr == TIER_CTR_SCRATCH_PEAK;
}

void tier_counters_add (struct tier_counters *c, enum tier_role role,
                        enum tier_ctr ctr, uint64_t delta)
{
    if ((unsigned) role >= TIER_ROLE_COUNT || (unsigned) ctr >= TIER_CTR_COUNT)
        return;
    if (tier_ctr_is_max (ctr)) {
        if (delta > c->v[role][ctr])
            c->v[role][ctr] = delta;
    }
    else
        c->v[role][ctr] += delta;
}

void tier_counters_merge (struct tier_counters *dst,
                          const struct tier_counters *src)
{
    for (int r = 0; r < TIER_ROLE_COUNT; r++)
        for (int k = 0; k < TIER_CTR_COUNT; k++)
            tier_counters_add (dst, r, k, src->v[r][k]);
}

uint64_t tier_counters_total (const struct tier_counters *c,
                              enum tier_ctr ctr)
{
    uint64_t t = 0;

    for (int r = 0; r < TIER_ROLE_COUNT; r++) {
        if (tier_ctr_is_max (ctr))
            t = c->v[r][ctr] > t ? c->v[r][ctr] : t;
        else
            t += c->v[r][ctr];
    }
    return t;
}

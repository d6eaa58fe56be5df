/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* keep.h - scratch at job end: statistics and --tier-keep */
#ifndef TIER_SPANK_KEEP_H
#define TIER_SPANK_KEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/error.h"
#include "ns.h"

struct tier_scratch_stats {
    uint64_t files;             /* regular files in the upper layers */
    uint64_t bytes;             /* their bytes: GFS writes avoided */
    uint64_t copyups;           /* of them, copied up from the GFS */
    uint64_t kept_files;        /* copied to DIR/.tier-kept/ */
    uint64_t kept_bytes;
};

/* Kill what is left in the job's namespace, count each scratch upper
 * layer, and with keep copy it to DIR/.tier-kept/JOBID/NODE/.  Returns 0,
 * or -1 with error (the statistics gathered are still filled in).
 */
int tier_scratch_finish (const struct tier_conf *conf, uint32_t job_id,
                         uid_t uid, gid_t gid, const char *scratch, bool keep,
                         struct tier_scratch_stats *st, tier_error_t *error);

#endif /* !TIER_SPANK_KEEP_H */

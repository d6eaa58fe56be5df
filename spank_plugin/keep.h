/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* keep.h - scratch at job end: statistics, and keeping its data */
#ifndef TIER_SPANK_KEEP_H
#define TIER_SPANK_KEEP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/error.h"
#include "ns.h"
#include "opts.h"

struct tier_scratch_stats {
    uint64_t files;             /* regular files in the upper layers */
    uint64_t bytes;             /* their bytes: GFS writes avoided */
    uint64_t copyups;           /* of them, copied up from the GFS */
    uint64_t copyup_bytes;      /* what those copy-ups read from the GFS */
    uint64_t kept_dirs;         /* scratch directories kept */
    uint64_t kept_files;        /* copied to DIR/.tier-kept/ */
    uint64_t kept_bytes;
};

/* Where a run of a job keeps its data under DIR/.tier-kept/: "JOBID" for
 * its first run, "JOBID.RESTART" for a requeued one (the same job id). */
void keep_name (uint32_t job_id, uint32_t restart, char *buf, size_t size);

/* Kill what is left in the job's namespace, count each scratch upper
 * layer, and copy it to DIR/.tier-kept/NAME/NODE/ (keep_name) when
 * its keep says so:
 * the item's own keep= (a policy's, or the one --tier-keep gave the
 * job's own items through the frozen set), else dflt (--tier-keep).
 * failed (asked at most once) tells whether the job failed, for
 * on-failure.  The copies run as the job's owner (sp: the epilog's, so
 * its groups come from NSS, ns_job_cred).  Returns 0, or -1 with error
 * (the statistics gathered are still filled in).
 */
int keep_scratch_finish (spank_t sp, const struct tier_conf *conf,
                         uint32_t job_id, uint32_t restart, const char *scratch,
                         enum tier_keep dflt, bool (*failed) (uint32_t),
                         struct tier_scratch_stats *st, tier_error_t *error);

/* What keep means for one scratch item: true if its data is kept, given
 * dflt and whether the job failed (failed < 0: not known yet, then
 * *ask is set when it would decide).
 */
bool keep_item (enum tier_keep item, enum tier_keep dflt, int failed,
                bool *ask);

/* On the job's stderr (the batch step's, or an srun job's): where each
 * kept directory's pipeline data will be, given whether the job failed.
 */
void keep_announce (const char *scratch, enum tier_keep dflt, bool failed,
                    uint32_t job_id, uint32_t restart);

#endif /* !TIER_SPANK_KEEP_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ns.h - what ns.c, keep.c and stage.c share: the job's credentials
 * and the resolution of a user's directory (libc only) */
#ifndef TIER_SPANK_NS_H
#define TIER_SPANK_NS_H

#include <stdint.h>
#include <sys/types.h>
#include <slurm/spank.h>

#include "lib/conf.h"
#include "lib/cred.h"
#include "lib/error.h"

struct mount_ctx {
    const struct tier_conf *conf;
    uint32_t job_id;
    struct tier_cred cred;      /* the job's owner and group list: the
                                 * mounts' checks run in TIER_CRED_DATA */
    const char *scratch;        /* --tier-scratch items */
    const char *binds;          /* "DIR=TREE:...": mirrors to bind */
    const char *stage_out;      /* output directories (escaped, ',') */
    const char *outbox_denied;  /* why no write cache, or "" */
    uint64_t write_cache;       /* its size, as the agent reserved it (0:
                                 * not limited) */
    int outbox_fs;              /* a detached copy of the write cache's
                                 * file system (outbox_fs), or -1 */
    uint32_t restart;           /* the job's restart count */
};

/* The job's owner and group list, for work on its data (lib/cred.h
 * TIER_CRED_DATA), before forking.  In slurmstepd (REMOTE) the list is
 * the one Slurm gives the job's tasks, S_JOB_SUPPLEMENTARY_GIDS: no NSS
 * call per job.  Slurm has no list for the prolog and epilog (JOB_SCRIPT
 * context): there, and only there, the user's groups come from NSS
 * (tier_cred_lookup).
 */
int ns_job_cred (spank_t sp, struct tier_cred *cred, tier_error_t *error);

/* Resolve dir as the user beneath its allowed root: an O_PATH descriptor
 * of a directory the user may write, or -1 with a message naming option.
 */
int ns_resolve_dir (const struct mount_ctx *m, const char *option,
                    const char *dir, tier_error_t *error);

/* The same for any path: TIER_RESOLVE_DIR requires a directory,
 * TIER_RESOLVE_WRITABLE that the user may write it.  Every mount target
 * goes through here: beneath AllowedRoots, never one of tier's own
 * directories, no symlink leading out (a bind over /etc/passwd in a job
 * with set-user-ID binaries would be root).
 */
enum {
    TIER_RESOLVE_DIR = 1,
    TIER_RESOLVE_WRITABLE = 2,
};
int ns_resolve_path (const struct mount_ctx *m, const char *option,
                     const char *path, int flags, tier_error_t *error);

#endif /* !TIER_SPANK_NS_H */

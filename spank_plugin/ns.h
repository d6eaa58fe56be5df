/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* ns.h - what ns.c and keep.c share: the user's credentials and the
 * resolution of a user's directory (libc only) */
#ifndef TIER_SPANK_NS_H
#define TIER_SPANK_NS_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/error.h"

#define TIER_GROUPS_MAX 256

struct mount_ctx {
    const struct tier_conf *conf;
    uint32_t job_id;
    uid_t uid;
    gid_t gid;
    gid_t groups[TIER_GROUPS_MAX];
    int ngroups;
    const char *scratch;        /* --tier-scratch items */
    const char *binds;          /* "DIR=TREE:...": mirrors to bind */
    const char *stage_out;      /* output directories (escaped, ',') */
    uint32_t restart;           /* the job's restart count */
};

/* Fill uid, gid and the user's groups (before forking: NSS lookups). */
int ns_ctx_lookup (struct mount_ctx *m, uid_t uid, gid_t gid,
                   tier_error_t *error);

/* In a single-threaded child: take the user's fs credentials and groups,
 * and give them back.
 */
int tier_as_user (const struct mount_ctx *m);
void tier_as_root (void);

/* Resolve dir as the user beneath its allowed root: an O_PATH descriptor
 * of a directory the user may write, or -1 with a message naming option.
 */
int ns_resolve_dir (const struct mount_ctx *m, const char *option,
                    const char *dir, tier_error_t *error);

/* The same for any path: TIER_RESOLVE_DIR requires a directory,
 * TIER_RESOLVE_WRITABLE that the user may write it.  Every mount target
 * goes through here: beneath AllowedRoots, never one of tier's own
 * directories, no symlink leading out (a bind over /etc/passwd in a job
 * with setuid binaries would be root).
 */
enum {
    TIER_RESOLVE_DIR = 1,
    TIER_RESOLVE_WRITABLE = 2,
};
int ns_resolve_path (const struct mount_ctx *m, const char *option,
                     const char *path, int flags, tier_error_t *error);

#endif /* !TIER_SPANK_NS_H */

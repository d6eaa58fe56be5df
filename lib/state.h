/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* state.h - the shared state directory (SharedStateDir) and its trust
 * rules; see doc/state.md.
 *
 *   SharedStateDir/          root-owned, not writable by group or others
 *     users/                 root-owned 0755
 *       USER/                made by root, owned by USER, 0700
 *         policies.json      the user's policies (tierctl set policy)
 *         credentials        endpoint credentials (0600, the user's)
 *         jobs/JOB.RESTART/  a job's frozen policy set and manifests
 *         stats/BATCH/       per-batch snapshots, one per node
 *         stage-refs/        references to stage-in mount point files
 *     stats/                 root-owned 0755 (per-batch snapshots)
 *
 * This module is the only code that knows these names: everyone else
 * asks for a path (tier_state_user_path) or a descriptor
 * (tier_state_user_open, tier_state_user_dir) by the TIER_STATE_* names.
 *
 * Every component is opened with O_NOFOLLOW|O_DIRECTORY beneath the
 * previous one; a symlink, a directory owned by someone else, or one that
 * others may write, is refused rather than used or repaired.
 */
#ifndef TIER_STATE_H
#define TIER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* The names in a user's directory. */
#define TIER_STATE_POLICIES    "policies.json"
#define TIER_STATE_CREDENTIALS "credentials"
#define TIER_STATE_JOBS        "jobs"
#define TIER_STATE_STATS       "stats"
#define TIER_STATE_STAGE_REFS  "stage-refs"

/* root/users/USER, or root/users/USER/SUB (SUB may have several
 * components: "jobs/42.0"), into buf.  -1 with errno EINVAL (no root, a
 * bad user name) or ENAMETOOLONG. */
int tier_state_user_path (const char *root, const char *user,
                          const char *sub, char *buf, size_t size);

/* The name of a job's directory under TIER_STATE_JOBS ("JOB.RESTART")
 * and of a node's manifest in it ("outputs-NODE.json"). */
void tier_state_job_name (uint32_t job_id, uint32_t restart, char *buf,
                          size_t size);
void tier_state_manifest_name (const char *node, char *buf, size_t size);

/* Open root/users/USER[/SUB] as the user (a forked child with the
 * user's own credentials, lib/cred.h TIER_CRED_OWN) or as root: the
 * root and users/ under lib/trust.h's ROOT_DIR rule, USER and every
 * component of SUB under its USER_PRIVATE rule for uid (a directory:
 * O_DIRECTORY), each made 0700 if missing when create is set.  Returns a
 * descriptor or -1 with errno and a text.
 */
int tier_state_user_open (const char *root, const char *user, uid_t uid,
                          const char *sub, bool create, tier_error_t *error);

/* Open (creating it if missing, as root) the root and its "users" and
 * "stats" directories.  Returns a descriptor of the root, or -1.
 */
int tier_state_open_root (const char *root, tier_error_t *error);

/* Open USER's directory under rootfd/users, creating it (root: mkdir,
 * then fchown to uid:gid, mode 0700) if missing.  An existing one must be
 * a real directory owned by uid with no group/other access, else it is
 * refused (EPERM): someone else made it.  Returns a descriptor or -1.
 */
int tier_state_user_dir (int rootfd, const char *user, uid_t uid, gid_t gid,
                         tier_error_t *error);

/* Write text to ROOT/users/USER/DIR/SUB/NAME atomically (a unique
 * temporary, fsync, rename), making DIR and SUB (0700) if missing.  Called
 * with the user's credentials (a forked child), which own everything
 * from USER down: opened as tier_state_user_open does, so a component
 * owned by anyone else, open to others, or a symlink, is refused
 * (EPERM).  Returns 0, or -1 with errno set.
 */
int tier_state_publish (const char *root, const char *user, uid_t uid,
                        const char *dir, const char *sub, const char *name,
                        const char *text);

/* True if name is usable as one path component for a user name. */
int tier_state_name_valid (const char *name);

#endif /* !TIER_STATE_H */

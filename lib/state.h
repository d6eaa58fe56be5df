/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* state.h - the shared state directory (SharedStateDir) and its trust
 * rules; see doc/state.md.
 *
 *   SharedStateDir/          root-owned, not writable by group or others
 *     users/                 root-owned 0755
 *       USER/                made by root, owned by USER, 0700
 *     stats/                 root-owned 0755 (per-batch snapshots)
 *
 * Every component is opened with O_NOFOLLOW|O_DIRECTORY beneath the
 * previous one; a symlink, a directory owned by someone else, or one that
 * others may write, is refused rather than used or repaired.
 */
#ifndef TIER_STATE_H
#define TIER_STATE_H

#include <sys/types.h>

#include "error.h"

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
 * from USER down: a component owned by anyone else, or a symlink, is
 * refused (EPERM, ELOOP).  Returns 0, or -1 with errno set.
 */
int tier_state_publish (const char *root, const char *user, uid_t uid,
                        const char *dir, const char *sub, const char *name,
                        const char *text);

/* True if name is usable as one path component for a user name. */
int tier_state_name_valid (const char *name);

#endif /* !TIER_STATE_H */

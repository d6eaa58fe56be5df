/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* files.h - policy files on disk: the site directory, the user store,
 * frozen sets.  The only I/O of policies/ (libtierpolicy_files.la), kept
 * apart from the pure model (libtierpolicy.la); tierd and tierctl only.
 *
 *   SitePolicyDir/NAME.json  site layer: root-owned, not writable by group
 *                            or others (else refused), read in name order;
 *                            the directory and those above it root's
 *                            (lib/trust.h ROOT_DIR, ROOT_FILE)
 *   SharedStateDir/users/USER/policies.json         the user layer (0600)
 *   SharedStateDir/users/USER/jobs/JOB.RESTART/policy.json   frozen sets
 */
#ifndef TIER_POLICY_FILES_H
#define TIER_POLICY_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/error.h"
#include "lib/state.h"
#include "policy.h"

#define TIER_POLICY_USER_FILE TIER_STATE_POLICIES /* in the user's dir */
#define TIER_POLICY_FROZEN_FILE "policy.json"

typedef void (*tier_policy_report_f) (void *arg, const char *text);

/* Add the site layer from every NAME.json file of dir, in name order (names
 * starting with '.' are ignored).  A file that is not a regular file
 * owned by root and unwritable by group and others, or that does not
 * parse, is reported (file and key) and skipped; so is a directory
 * writable by others.  A missing dir is no policies.  Returns the number
 * of files skipped.
 */
int tier_policy_load_site (struct tier_policy_set *set, const char *dir,
                           tier_policy_report_f report, void *arg);

/* Read the regular file name beneath dirfd (not following a symlink)
 * into *text (malloc'd, NUL-terminated), at most TIER_POLICY_TEXT_MAX.
 * Returns 0, or -1 with errno (ENOENT if missing) and error.
 */
int tier_policy_read_at (int dirfd, const char *name, char **text,
                         size_t *len, tier_error_t *error);

/* Write text to name beneath dirfd: a unique temporary there (mode),
 * fsync, then rename -- or with noreplace link(), so an existing name is
 * never replaced (-1 with errno EEXIST).  The temporary never remains.
 */
int tier_policy_write_at (int dirfd, const char *name, const char *text,
                          mode_t mode, bool noreplace, tier_error_t *error);

/* Open the user's directory in SharedStateDir root as the caller
 * (tier_state_user_open: root and users/ root's, the user's own owned by
 * uid with no group or other access; someone else's is refused, EPERM;
 * ENOENT if it does not exist yet).  Returns a descriptor or -1.
 */
int tier_policy_user_dir (const char *root, const char *user, uid_t uid,
                          tier_error_t *error);

/* Open (creating with mode 0700 if missing) the subdirectory name of
 * dirfd, refusing a symlink.  Returns a descriptor or -1.
 */
int tier_policy_subdir (int dirfd, const char *name, bool create,
                        tier_error_t *error);

/* Where policies may act, from tier.conf: AllowedRoots, and tier's own
 * directories (NvdimmDir, BBDir for user, NamespaceDir, StateDir,
 * SocketDir, SharedStateDir).  rb holds the storage for rb->roots.
 */
struct tier_policy_conf_roots {
    char bb[4096];
    const char *own[8];
    struct tier_policy_roots roots;
};

void tier_policy_roots_from_conf (const struct tier_conf *conf,
                                  const char *user,
                                  struct tier_policy_conf_roots *rb);

#endif /* !TIER_POLICY_FILES_H */

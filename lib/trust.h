/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* trust.h - every owner and mode check of a path that root relies on
 * (libc only; the rules are also in doc/state.md)
 *
 * Root code opens what it trusts here, and nowhere else: tier.conf, the
 * site's policies, the socket, state, log and namespace directories, the
 * tier roots, the shared state directory and each user's directory in
 * it.  Each call returns a descriptor: everything beneath it is then
 * opened with *at() calls, so nothing is resolved by name twice.
 *
 *   TIER_TRUST_ROOT_DIR      a directory that root relies on: owned by
 *                            root (or the one other owner the caller
 *                            allows: SlurmUser), writable by nobody
 *                            else; a symlink is refused
 *   TIER_TRUST_ROOT_FILE     the same for a regular file
 *   TIER_TRUST_USER_PRIVATE  a user's own directory or file: owned by
 *                            that user, no access for group or others
 *
 * A path given whole (tier_trust_open) must be absolute without "..";
 * every directory above the last component must be one nobody else can
 * change: a real directory (no symlink anywhere: each component is
 * opened O_NOFOLLOW), owned by root, and either not writable by group
 * and others or sticky, as /dev/shm and /tmp are (others may add names
 * there, but never rename root's).  Beneath a descriptor
 * (tier_trust_openat) each intermediate directory must pass the kind's
 * own rule (ROOT_FILE: ROOT_DIR's).
 *
 * Errors (-1 with errno and a text naming the path): EPERM for a rule
 * broken (wrong owner, writable by others, a symlink, the wrong type),
 * EINVAL for a path that is not absolute or has "..", others from the
 * system calls.  A caller that words a refusal itself (a message tests
 * or admins know) learns which rule was broken through .why.
 */
#ifndef TIER_TRUST_H
#define TIER_TRUST_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

enum tier_trust_kind {
    TIER_TRUST_ROOT_DIR = 1,
    TIER_TRUST_ROOT_FILE,
    TIER_TRUST_USER_PRIVATE,
};

/* Which rule a refusal (EPERM) broke; 0 when none was. */
enum tier_trust_why {
    TIER_TRUST_PARENT = 1, /* a directory above the last component */
    TIER_TRUST_LINK,       /* a symlink, or a non-directory on the way */
    TIER_TRUST_TYPE,       /* the last component: not the kind's type */
    TIER_TRUST_OWNER,      /* ... not owned as the kind says */
    TIER_TRUST_MODE,       /* ... open to others, or a .deny bit */
};

struct tier_trust {
    enum tier_trust_kind kind;
    /* USER_PRIVATE: its owner.  ROOT_*: another owner the last component
     * may have (SlurmUser; 0, as in a zeroed struct, adds none). */
    uid_t uid;
    /* Create the last component when it is missing, with this mode
     * (directories: mkdir; files: O_CREAT without O_EXCL; 0: it must
     * exist).  A USER_PRIVATE one made by root is given to uid:gid. */
    mode_t create;
    gid_t gid;
    bool parents;       /* create missing parents too (root's, 0755) */
    mode_t deny;        /* bits that must be clear besides the kind's own:
                         * 077 for a directory only root may enter */
    int flags;          /* open flags: O_PATH, O_WRONLY | O_APPEND, ...
                         * (O_RDONLY by default; O_NOFOLLOW, O_CLOEXEC,
                         * O_NOCTTY and O_DIRECTORY are added as fit) */
    enum tier_trust_why *why; /* if set: which rule a call refused by */
};

/* Open the absolute path under the rules of t (see above). */
int tier_trust_open (const char *path, const struct tier_trust *t,
                     tier_error_t *error);

/* Open rel (relative, one or more components, no "..") beneath the
 * trusted directory dirfd.  shown is how the directory is named in
 * errors (its path).
 */
int tier_trust_openat (int dirfd, const char *shown, const char *rel,
                       const struct tier_trust *t, tier_error_t *error);

/* Check an open descriptor against the rule for its last component. */
int tier_trust_check (int fd, const char *shown, const struct tier_trust *t,
                      tier_error_t *error);

/* May a directory be a parent of something root trusts (see above)? */
struct stat;
bool tier_trust_safe_parent (const struct stat *st);

#endif /* !TIER_TRUST_H */

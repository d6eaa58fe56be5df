/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* creds.h - act as the calling user in one thread of a root daemon */
#ifndef GFSEMU_CREDS_H
#define GFSEMU_CREDS_H

#include <sys/types.h>

#define CREDS_NOBODY 65534

/* Who a request acts as.  With root_squash, uid 0 becomes squash_uid
 * (with squash_gid and no supplementary groups), and gid 0 becomes
 * squash_gid for every other caller too (primary or supplementary), as
 * Linux nfsd does.
 */
struct creds_map {
    int root_squash;
    uid_t squash_uid;
    gid_t squash_gid;
};

/* The identity the backing file system sees for one request. */
struct creds {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t *groups;
    gid_t groups_buf[32];
};

/* Switch the calling thread (only it: raw syscalls, not glibc's
 * process-wide setgroups) to the fs identity c: supplementary groups,
 * then fsgid, then fsuid.  Leaving fsuid 0 drops the fs capabilities
 * (CAP_DAC_OVERRIDE and friends), so the backing file system checks
 * permissions as for that user.  Returns 0 or -1 with errno set (and the
 * thread back at root).
 */
int creds_become (const struct creds *c);

/* Back to fsuid/fsgid 0 and no supplementary groups. */
void creds_restore (void);

/* Apply the root-squash mapping to uid/gid and a group list (in place;
 * returns the new group count).
 */
int creds_squash (const struct creds_map *map, uid_t *uid, gid_t *gid,
                  gid_t *groups, int ngroups);

#endif /* !GFSEMU_CREDS_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* creds.c - act as the calling user in one thread of a root daemon */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "creds.h"

/* setfsuid/setfsgid return the previous id and cannot report failure;
 * asking with an invalid id (-1) returns the current one. */
static int set_fsuid (uid_t uid)
{
    syscall (SYS_setfsuid, uid);
    if ((uid_t)syscall (SYS_setfsuid, (uid_t)-1) != uid) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

static int set_fsgid (gid_t gid)
{
    syscall (SYS_setfsgid, gid);
    if ((gid_t)syscall (SYS_setfsgid, (gid_t)-1) != gid) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

void creds_restore (void)
{
    int saved_errno = errno;

    syscall (SYS_setfsuid, 0);
    syscall (SYS_setfsgid, 0);
    syscall (SYS_setgroups, 0, NULL);
    errno = saved_errno;
}

int creds_become (const struct creds *c)
{
    if (syscall (SYS_setgroups, (size_t)c->ngroups, c->groups) < 0
        || set_fsgid (c->gid) < 0
        || set_fsuid (c->uid) < 0) {
        creds_restore ();
        return -1;
    }
    return 0;
}

int creds_squash (const struct creds_map *map, uid_t *uid, gid_t *gid,
                  gid_t *groups, int ngroups)
{
    int i;

    if (!map->root_squash)
        return ngroups;
    if (*uid == 0) {
        *uid = map->squash_uid;
        *gid = map->squash_gid;
        return 0;
    }
    if (*gid == 0)
        *gid = map->squash_gid;
    for (i = 0; i < ngroups; i++) {
        if (groups[i] == 0)
            groups[i] = map->squash_gid;
    }
    return ngroups;
}

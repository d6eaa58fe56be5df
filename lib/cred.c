/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cred.c - taking a user's credentials; the rules are in cred.h */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cred.h"

void tier_cred_init (struct tier_cred *c, uid_t uid, gid_t gid)
{
    c->uid = uid;
    c->gid = gid;
    c->ngroups = -1;
}

int tier_cred_set_groups (struct tier_cred *c, const gid_t *groups, int n)
{
    if (n < 0 || (n > 0 && !groups)) {
        errno = EINVAL;
        return -1;
    }
    if (n > TIER_CRED_GROUPS_MAX) {
        errno = E2BIG;
        return -1;
    }
    if (n > 0)
        memcpy (c->groups, groups, (size_t) n * sizeof (gid_t));
    c->ngroups = n;
    return 0;
}

bool tier_cred_has_groups (const struct tier_cred *c)
{
    return c->ngroups >= 0;
}

int tier_cred_lookup (struct tier_cred *c, const char *user)
{
    gid_t groups[TIER_CRED_GROUPS_MAX];
    int n = TIER_CRED_GROUPS_MAX;

    if (!user || !user[0]) {
        errno = EINVAL;
        return -1;
    }
    errno = 0;
    if (getgrouplist (user, c->gid, groups, &n) < 0) {
        /* n now says how many there are */
        errno = n > TIER_CRED_GROUPS_MAX ? E2BIG : errno ? errno : ENOENT;
        return -1;
    }
    return tier_cred_set_groups (c, groups, n);
}

/* The groups the mode gives: the job's list, or none but the primary. */
static int mode_groups (const struct tier_cred *c, enum tier_cred_mode mode,
                        const gid_t **groups, size_t *n)
{
    switch (mode) {
        case TIER_CRED_DATA:
            if (c->ngroups < 0) {
                errno = EINVAL;         /* not known: look them up first */
                return -1;
            }
            *groups = c->groups;
            *n = (size_t) c->ngroups;
            return 0;
        case TIER_CRED_OWN:
            *groups = NULL;
            *n = 0;
            return 0;
    }
    errno = EINVAL;
    return -1;
}

/* True if the process holds exactly these groups (in any order). */
static bool groups_are (const gid_t *want, size_t n)
{
    gid_t have[TIER_CRED_GROUPS_MAX + 1];
    int got = getgroups (TIER_CRED_GROUPS_MAX + 1, have);

    if (got < 0)
        return false;
    for (int i = 0; i < got; i++) {
        bool found = false;
        for (size_t j = 0; j < n && !found; j++)
            found = have[i] == want[j];
        if (!found)
            return false;
    }
    for (size_t j = 0; j < n; j++) {
        bool found = false;
        for (int i = 0; i < got && !found; i++)
            found = have[i] == want[j];
        if (!found)
            return false;
    }
    return true;
}

int tier_cred_drop (const struct tier_cred *c, enum tier_cred_mode mode)
{
    const gid_t *groups;
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    size_t n;

    if (mode_groups (c, mode, &groups, &n) < 0)
        return -1;
    /* groups and gid first: without root they could not be changed */
    if (setgroups (n, groups) < 0 || setresgid (c->gid, c->gid, c->gid) < 0
        || setresuid (c->uid, c->uid, c->uid) < 0)
        return -1;
    if (getresuid (&ru, &eu, &su) < 0 || getresgid (&rg, &eg, &sg) < 0)
        return -1;
    if (ru != c->uid || eu != c->uid || su != c->uid || rg != c->gid
        || eg != c->gid || sg != c->gid || !groups_are (groups, n)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

int tier_cred_fs_enter (const struct tier_cred *c, enum tier_cred_mode mode)
{
    const gid_t *groups;
    size_t n;

    if (mode_groups (c, mode, &groups, &n) < 0)
        return -1;
    /* the raw call: glibc's setgroups would change every thread */
    if (syscall (SYS_setgroups, n, groups) < 0)
        return -1;
    (void) setfsgid (c->gid);
    (void) setfsuid (c->uid);
    /* setfsuid returns the previous value, never an error: ask again */
    if ((uid_t) setfsuid ((uid_t) -1) != c->uid
        || (gid_t) setfsgid ((gid_t) -1) != c->gid) {
        tier_cred_fs_leave ();
        errno = EPERM;
        return -1;
    }
    return 0;
}

void tier_cred_fs_leave (void)
{
    (void) setfsuid (0);
    (void) setfsgid (0);
    (void) syscall (SYS_setgroups, 0, NULL);
}

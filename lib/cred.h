/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* cred.h - the only code in tier that changes credentials (libc only)
 *
 * Root code never touches a user's paths with root's rights: it forks,
 * takes the user's credentials here, and works.  Which supplementary
 * groups the process gets is a rule, not a choice of each call site:
 *
 *   TIER_CRED_DATA  work on a job's data on the GFS, the BB or the tiers
 *                   (stage-in, stage-out, mirror walks, keep copies,
 *                   resolving and mounting a job's directories): the
 *                   job's own group list, as Slurm gave it to the job
 *                   (S_JOB_SUPPLEMENTARY_GIDS, which the plugin sends when
 *                   a step registers and the agent stores with the job),
 *                   so that tier reads and writes exactly what the job's
 *                   own processes can.  Where no job gave one (a prolog
 *                   before any step registered, tierctl prefetch outside
 *                   a job), the user's groups from NSS: tier_cred_lookup.
 *   TIER_CRED_OWN   the user's own directory in SharedStateDir (policies,
 *                   frozen sets, manifests, statistics, credentials) and
 *                   becoming root again (a daemon leaving slurmstepd):
 *                   the primary group only.  That directory is the
 *                   user's, mode 0700: no group grants anything in it,
 *                   so the process holds none (least privilege).
 *
 * Two ways to take them:
 *
 *   tier_cred_drop      for good, in a forked child: setgroups, setresgid,
 *                       setresuid, then getresuid/getresgid/getgroups
 *                       prove that nothing of the old identity is left.
 *                       There is no way back.  The kernel clears the
 *                       parent-death signal on a credential change: the
 *                       agent's children re-arm it (agent/child.c).
 *   tier_cred_fs_enter  this thread's fsuid and fsgid, and its groups
 *                       through the raw SYS_setgroups (per thread, unlike
 *                       glibc's setgroups, which changes every thread),
 *                       for a single-threaded process that needs file
 *                       access as the user and then root again (the
 *                       plugin's mount code); tier_cred_fs_leave is the way
 *                       back, and exists only for this mode.  The real
 *                       and effective uid stay root: the user cannot
 *                       signal or ptrace the process.
 *
 * Every function returns 0, or -1 with errno set, and changes nothing
 * that it does not report.
 */
#ifndef TIER_CRED_H
#define TIER_CRED_H

#include <stdbool.h>
#include <sys/types.h>

/* More groups than this (Linux allows 65536) fail with E2BIG: tier then
 * refuses the work rather than run it with fewer groups than the job. */
#define TIER_CRED_GROUPS_MAX 256

enum tier_cred_mode {
    TIER_CRED_DATA = 1,         /* the job's group list */
    TIER_CRED_OWN,              /* the primary group only */
};

struct tier_cred {
    uid_t uid;
    gid_t gid;                  /* the primary group */
    int ngroups;                /* the job's supplementary groups, or -1: */
    gid_t groups[TIER_CRED_GROUPS_MAX];     /* not known (see has_groups) */
};

/* uid and gid with the groups not known yet. */
void tier_cred_init (struct tier_cred *c, uid_t uid, gid_t gid);

/* The job's list (from Slurm).  E2BIG past TIER_CRED_GROUPS_MAX. */
int tier_cred_set_groups (struct tier_cred *c, const gid_t *groups, int n);

bool tier_cred_has_groups (const struct tier_cred *c);

/* The user's groups from NSS (getgrouplist), for work that no job's list
 * covers.  user is the name of c->uid.  ENOENT if NSS does not know it,
 * E2BIG past TIER_CRED_GROUPS_MAX.
 */
int tier_cred_lookup (struct tier_cred *c, const char *user);

/* Take c for good (see above).  DATA needs the groups (EINVAL if not
 * known: call tier_cred_lookup first).  EPERM if the check afterwards
 * finds any other id (the process must then exit).
 */
int tier_cred_drop (const struct tier_cred *c, enum tier_cred_mode mode);

/* This thread's fsuid/fsgid and groups (see above); EPERM if the kernel
 * did not take them (setfsuid reports no error).
 */
int tier_cred_fs_enter (const struct tier_cred *c, enum tier_cred_mode mode);

/* Back to root's file access: fsuid/fsgid 0, no supplementary groups. */
void tier_cred_fs_leave (void);

#endif /* !TIER_CRED_H */

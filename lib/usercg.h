/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* usercg.h - the work tier does for a user, charged to that user's cgroup
 *
 * A process that works for a user (agent/child.h: a child of the agent
 * with the uid of spec->cred, or spec->for_uid for one that stays root
 * -- the fetcher, the stager; the epilog's keep copy, spank_plugin/keep.c)
 * joins, first thing in the new process, that user's cgroup in each
 * cgroup hierarchy the node has of cpu, cpuacct, memory, pids or blkio
 * (v1), or in the unified one where it has controllers (v2):
 *
 *     MOUNT/UserCgroupDir/uid_UID
 *
 * made by the first child of the user with the user's limits
 * (UserCgroupTasks in pids.max, UserCgroupMemory in memory.max or
 * memory.limit_in_bytes).  Every user's cgroup has the default CPU and
 * I/O weight, so users share the CPU and the disks tier uses for them
 * equally, whatever number of children each one has; and the CPU time,
 * memory and I/O of that work is accounted to the user (cpuacct.usage,
 * memory.max_usage_in_bytes, ...), not to the agent.  Children of a
 * child (the stager's copier) are in their parent's cgroup already.
 *
 * tier_usercg_find finds the hierarchies (/proc/self/mountinfo) and, in
 * the agent, makes UserCgroupDir in each (on v2, with the controllers
 * enabled down to it); the agent then removes the empty user cgroups an
 * earlier agent left (tier_usercg_sweep).  UserCgroupDir "" turns it
 * off; a node without cgroups, or where the directory cannot be made,
 * runs as before (the agent says so once: agent/main.c).
 *
 * libc only: the plugin links it.  The directories under cgroupfs are
 * the kernel's, made and owned by root: nothing a user controls is on
 * these paths.
 */
#ifndef TIER_USERCG_H
#define TIER_USERCG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"

#define TIER_USERCG_CPU 0x01
#define TIER_USERCG_CPUACCT 0x02
#define TIER_USERCG_MEMORY 0x04
#define TIER_USERCG_PIDS 0x08
#define TIER_USERCG_BLKIO 0x10
#define TIER_USERCG_V2 0x80 /* the unified hierarchy */

#define TIER_USERCG_TREES 8

struct tier_usercg_tree {
    char base[PATH_MAX - 48]; /* MOUNT/UserCgroupDir */
    unsigned ctrls;           /* TIER_USERCG_*; on v2, those enabled */
};

struct tier_usercg {
    struct tier_usercg_tree trees[TIER_USERCG_TREES];
    int ntrees;
    uint64_t mem_limit;   /* UserCgroupMemory */
    unsigned tasks_limit; /* UserCgroupTasks */
};

/* One line of /proc/self/mountinfo: if it mounts a cgroup hierarchy,
 * its mount point (octal escapes undone) in mnt and what it holds in
 * *ctrls (TIER_USERCG_*: for v2 only TIER_USERCG_V2, its controllers
 * are in the directory); 0.  -1 for any other line.
 */
int tier_usercg_parse_mount (const char *line, char *mnt, size_t len,
                             unsigned *ctrls);

/* The hierarchies of conf's UserCgroupDir into u (how many: 0 when it is
 * off or there is none); with make, UserCgroupDir is made in each (as
 * root).  A hierarchy where it cannot be made or is missing is left
 * out, with a line in text (size len) that names it and says why.
 */
int tier_usercg_find (struct tier_usercg *u, const struct tier_conf *conf,
                      bool make, char *text, size_t len);

/* Remove the empty user cgroups of u's hierarchies (a busy one stays). */
void tier_usercg_sweep (const struct tier_usercg *u);

/* In a new process, as root, before anything else: move the calling
 * process into uid's cgroups of u, making them on first use with u's
 * limits.  Only system calls (a fork of a threaded agent): how many it
 * joined. */
int tier_usercg_join (const struct tier_usercg *u, uid_t uid);

#endif

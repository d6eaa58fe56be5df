/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* usercg.h - the work tierd does for a user, charged to that user's cgroup
 *
 * A child that works for a user (child.h: the uid of spec->cred, or
 * spec->for_uid for one that stays root -- the fetcher, the stager)
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
 * usercg_init finds the hierarchies (/proc/self/mountinfo), makes
 * UserCgroupDir in each (on v2, with the controllers enabled down to
 * it) and removes the empty user cgroups an earlier agent left.
 * UserCgroupDir "" turns it off; a node without cgroups, or where the
 * directory cannot be made, runs as before (the agent says so once).
 */
#ifndef TIER_AGENT_USERCG_H
#define TIER_AGENT_USERCG_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/conf.h"

#define USERCG_CPU 0x01
#define USERCG_CPUACCT 0x02
#define USERCG_MEMORY 0x04
#define USERCG_PIDS 0x08
#define USERCG_BLKIO 0x10
#define USERCG_V2 0x80 /* the unified hierarchy */

/* One line of /proc/self/mountinfo: if it mounts a cgroup hierarchy,
 * its mount point (octal escapes undone) in mnt and what it holds in
 * *ctrls (USERCG_*: for v2 only USERCG_V2, its controllers are in the
 * directory); 0.  -1 for any other line.
 */
int usercg_parse_mount (const char *line, char *mnt, size_t len,
                        unsigned *ctrls);

/* In the agent, as root, once: the hierarchies to use (how many). */
int usercg_init (const struct tier_conf *conf);

/* In a new child, as root, before anything else: move the calling
 * process into uid's cgroups, making them on first use.  Only system
 * calls (a fork of a threaded agent): how many it joined. */
int usercg_join (uid_t uid);

#endif

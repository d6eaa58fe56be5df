/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* proc.h - a process's identity from /proc, for kill paths that must
 * never hit a pid the kernel gave again
 *
 * A pid alone names whatever process has it now.  A pid with its start
 * time (field 22 of /proc/PID/stat, clock ticks since boot) names one
 * process for ever: a record of both, checked after pidfd_open, is how
 * the agent and the plugin signal a process another one started.
 */
#ifndef TIER_PROC_H
#define TIER_PROC_H

#include <sys/types.h>

/* pid's start time, or 0 if there is no such process. */
unsigned long long tier_proc_start (pid_t pid);

#endif

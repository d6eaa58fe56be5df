/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* procfd.h - the files a process has open, as /proc shows them
 *
 * What a stuck child (asleep in the kernel on a GFS request that is
 * never answered) is stuck on: the agent names that file in its log and
 * the job's messages.  Only /proc is read, never the file system that
 * does not answer.  Calls libc only.
 */
#ifndef TIER_AGENT_PROCFD_H
#define TIER_AGENT_PROCFD_H

#include <stdbool.h>
#include <sys/types.h>

/* fn (target, flags, arg) for each descriptor of pid: its target as
 * /proc/PID/fd shows it, its open flags from /proc/PID/fdinfo (O_PATH,
 * O_DIRECTORY and the access mode among them); until fn returns true.
 * false if pid's descriptors cannot be read, or fn never said true. */
typedef bool (*procfd_f) (const char *target, unsigned long flags, void *arg);
bool procfd_each (pid_t pid, procfd_f fn, void *arg);

#endif /* !TIER_AGENT_PROCFD_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* peer.h - which job a client process belongs to, as the kernel says.
 *
 * The agent never trusts a job id a client claims.  It takes the peer's
 * pid from SO_PEERCRED and walks its ancestors in /proc until it finds a
 * slurmstepd: a process whose real, effective, saved and filesystem uids
 * are all 0 and whose title is "slurmstepd: [JOBID.STEP]".  A user cannot
 * create such a process, and a process that escaped its job (setsid and a
 * double fork reparent it to init) has none, so it is refused.
 */
#ifndef TIER_AGENT_PEER_H
#define TIER_AGENT_PEER_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

struct peer_job {
    uint32_t job_id;
    char step[32];              /* "batch", "extern", "0", ... */
    pid_t stepd;                /* the slurmstepd found */
};

/* Parse a slurmstepd title ("slurmstepd: [12.batch]").  Returns 0 or -1. */
int peer_parse_title (const char *title, uint32_t *job_id, char *step,
                      size_t size);

/* Find the job of pid (root directory of /proc given for tests: NULL =
 * "/proc").  Returns 0, or -1 with errno ESRCH (no such process) or
 * ENOENT (not inside a Slurm job step).
 */
int peer_job_of (const char *proc, pid_t pid, struct peer_job *pj,
                 tier_error_t *error);

#endif /* !TIER_AGENT_PEER_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* holder.h - one writer per file: an OFD lock with its holder's record,
 * and the end of a holder that an earlier agent left behind
 *
 * A writer of files that no other process may write at the same time (a
 * migrator and its job's outbox) takes an OFD write lock (F_OFD_SETLK)
 * on a lock file and writes its record into it:
 *
 *     pid=PID start=STARTTIME
 *
 * (STARTTIME: field 22 of /proc/PID/stat).  The kernel releases the lock
 * when the holder's last descriptor of it closes: when it dies, however
 * it dies.  A new writer that finds the lock held reads the record; a
 * holder that is alive with that start time, has the comm it was given,
 * and is a child neither of the new writer's parent nor of the new
 * writer is a child of an earlier agent (one that should have died with it, e.g. one asleep in
 * the kernel when its agent was killed): the new writer ends it with
 * SIGKILL sent by pidfd (no pid reused meanwhile can be hit) and waits
 * for the lock.  A holder of the same agent is waited for, never ended.
 * No two writers of one file, ever: the one that cannot take the lock in
 * time does not write.
 *
 * Owns the record's format.  Calls libc only.
 */
#ifndef TIER_AGENT_HOLDER_H
#define TIER_AGENT_HOLDER_H

#include <stdbool.h>
#include <sys/types.h>

#include "lib/proc.h" /* tier_proc_start: a holder's start */

/* pid, if it is alive with that start time and comm, and a child
 * neither of our parent nor of us: end it by pidfd with SIGKILL.
 * Returns a pidfd of it (to poll for its end: readable once it exited),
 * or -1 (errno ESRCH: not that process, EPERM: a child of our parent or
 * of us; else pidfd_open's or pidfd_send_signal's). */
int holder_end_orphan (pid_t pid, unsigned long long start, const char *comm);

/* Take the OFD write lock on fd (a regular file open for writing) and
 * write our record into it, waiting up to wait_ms for a holder, and
 * ending the holder as above (comm: the name the holder has).  Returns
 * 0; or -1 with errno EWOULDBLOCK when it is still held after wait_ms
 * (*holder: its pid, 0 if its record could not be read), or another
 * errno of fcntl.  *ended: the pid ended on the way, 0 if none.  A
 * record that cannot be written (a full file system) does not fail it:
 * the lock holds, and a later writer, which finds no record, waits for
 * us instead of ending us. */
int holder_lock (int fd, const char *comm, int wait_ms, pid_t *holder,
                 pid_t *ended);

#endif

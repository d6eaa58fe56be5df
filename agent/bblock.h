/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bblock.h - the cross-node lock of one fetch on the burst buffer
 *
 * The nodes share the BB; one of them copies a replica, the others wait
 * for it.  Who copies is decided by a lock file made with O_EXCL beside
 * the replica (BBDir/replicas/SCOPE/KEY.lock, root 0600).  It names its
 * holder, for the holder's node and for humans:
 *
 *     node=NODE boot=BOOT_ID pid=PID start=STARTTIME
 *
 * (STARTTIME: field 22 of /proc/PID/stat), and its mtime is the
 * holder's heartbeat: a thread refreshes it every BBLockStale/4 seconds
 * (at least every second) while the copy runs.  A waiter polls with
 * backoff (50 ms doubling to 1 s) and breaks the lock, by renaming it
 * away and removing it, when
 *
 *   - its holder is of this node and is gone: another boot, or no
 *     process PID with that start time (a dead or reused pid);
 *   - or its text and mtime have not changed for BBLockStale by the
 *     waiter's own clock (clocks of other nodes are never compared).
 *
 * A holder of this node that is alive but was left by an earlier agent
 * (a process of the waiter's name whose parent is another: holder.h) is
 * ended by pidfd first, so that it is gone at the next look.
 *
 * Breaking a live lock by mistake only costs a second copy: publication
 * is a rename of a complete file.  A holder releases the lock only while
 * it still holds the text it wrote (a waiter may have broken it and
 * another taken it meanwhile).
 *
 * Owns the lock file's format, the wait, the heartbeat thread.  Calls
 * libc, pthreads, lib/clock and holder.c only: nothing of the agent's
 * state (the fetcher process and the unit test use it alike).
 */
#ifndef TIER_AGENT_BBLOCK_H
#define TIER_AGENT_BBLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lib/conf.h"

#define BBLOCK_HOLDER_MAX 256 /* the lock file's text */
#define BBLOCK_NAME_MAX 200   /* "KEY.lock" */

struct bblock_holder {
    char node[TIER_NODENAME_MAX]; /* "": not a holder text tier wrote */
    char boot[64];
    long pid;
    unsigned long long start;
};

/* The work the lock guards is done (by another node): stop waiting. */
typedef bool (*bblock_done_f) (void *arg);

struct bblock {
    /* the caller's */
    int dirfd;                  /* the directory of the lock file */
    char name[BBLOCK_NAME_MAX]; /* its name */
    const char *node;           /* this node */
    const char *boot;           /* this boot's id */
    uint64_t stale_s;           /* BBLockStale (>= 1) */
    uint64_t wait_s;            /* how long to wait for a holder */
    bblock_done_f done;         /* may be NULL */
    void *done_arg;
    /* bblock.c's */
    char comm[16]; /* this process's name (holder.h's orphans) */
    int fd;        /* the lock, while held */
    char mine[BBLOCK_HOLDER_MAX];
    pthread_t thread;
    bool beating;
    volatile int stop;
};

/* Fill l for the lock name in dirfd (nothing held yet). */
void bblock_init (struct bblock *l, int dirfd, const char *name,
                  const char *node, const char *boot, uint64_t stale_s,
                  uint64_t wait_s);

/* Wait until this process holds the lock (0), or done() says the work
 * is done (1, nothing held), or time runs out (-1, errno ETIMEDOUT) or
 * the lock cannot be made (-1 with errno).  err gets the reason of a -1.
 */
int bblock_take (struct bblock *l, char *err, size_t errsize);

/* Start the heartbeat thread of a held lock (0, or -1 with errno: the
 * lock is still held, without a heartbeat). */
int bblock_beat (struct bblock *l);

/* Stop the heartbeat; remove the lock file if it is still ours; close. */
void bblock_release (struct bblock *l);

/* The lock file name in dfd: its holder (h->node "" if the text is not
 * one bblock wrote), mtime and raw text.  -1 with errno if it cannot be
 * read (ENOENT: gone). */
int bblock_holder_read (int dfd, const char *name, struct bblock_holder *h,
                        struct timespec *mtime, char *raw, size_t rawsize);

#endif /* !TIER_AGENT_BBLOCK_H */

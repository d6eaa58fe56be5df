/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* jobns.h - one mount namespace per job per node: create, hold, join,
 * extend, tear down (libc only: the plugin and the agent share it).
 *
 *   NamespaceDir/                 bind-mounted onto itself, MS_PRIVATE
 *     JOBID/                      root 0700: the files of the job below,
 *                                 every one root's, mode 0600, named by
 *                                 the TIER_NS_* macros here and nowhere
 *                                 else, written whole under a temporary
 *                                 name and renamed (never seen half),
 *                                 read under lib/trust.h's rules
 *
 * This directory is the one channel between the plugin (in slurmstepd
 * and the prolog and epilog) and the agent that is not a message: the
 * plugin leaves what a later step, the epilog or a restarted agent must
 * find, and the agent's stager leaves its progress for the waiting
 * tasks.
 *
 * The namespace is made by a forked child (slurmstepd is multithreaded and
 * cannot unshare or setns itself): unshare(CLONE_NEWNS), then
 * MS_SLAVE|MS_REC on "/" so that host mounts made later still reach the
 * job while nothing of the job leaks out; the parent binds the child's
 * ns file onto the holder, which keeps it alive after the child exits.
 * Work inside it (mounts) is done by a forked single-threaded child that
 * joins it (tier_ns_run).
 */
#ifndef TIER_JOBNS_H
#define TIER_JOBNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define TIER_NS_PIDS_MAX 4096

/* The files of a job's directory, and who writes them. */
#define TIER_NS_HOLDER      "mnt"       /* tier_ns_create: /proc/PID/ns/mnt
                                         * bound here holds the namespace */
#define TIER_NS_LOCK        "lock"      /* tier_ns_lock: flock, one creator
                                         * or extender at a time */
#define TIER_NS_UID         "uid"       /* tier_ns_create: the owner */
#define TIER_NS_MARK \
    "mark" /* tier_ns_create: a directory with
                                         * a tmpfs of its own in the job's
                                         * namespace only */
#define TIER_NS_MARK_DEV \
    "mark.dev"                          /* tier_ns_create: that tmpfs's
                                         * device, MAJOR:MINOR */
#define TIER_NS_RESTART     "restart"   /* plugin: the restart count of the
                                         * run that made the namespace */
#define TIER_NS_READY       "ready"     /* plugin: the job's mounts are made */
#define TIER_NS_FAILED      "failed"    /* plugin: they could not be */
#define TIER_NS_SCRATCH     "scratch"   /* plugin: the pipeline directories
                                         * mounted, for the epilog */
#define TIER_NS_KEEP \
    "keep"                              /* plugin: the strongest --tier-keep
                                         * a step of the job gave */
#define TIER_NS_BOUND       "bound"     /* plugin: the eager-mode binds */
#define TIER_NS_BIND_ERROR  "bind.error" /* plugin: why one was not made */
#define TIER_NS_STAGEOUT    "stageout"  /* plugin: the write caches mounted */
#define TIER_NS_OUTBOX_ERROR "outbox.error" /* plugin: why one was not */
#define TIER_NS_STAGED      "staged"    /* plugin: stage-in was asked for */
#define TIER_NS_CANCELLED   "cancelled" /* plugin: the job is being killed */
#define TIER_NS_ENDED       "ended"     /* epilog or agent: the job ended */
#define TIER_NS_STAGE_ITEMS "stage.items" /* agent: the stage-in plan */
/* Per part P of the job's stage-in (part 0: "stage.WHAT", else
 * "stage.P.WHAT"), written by the agent's stager: */
#define TIER_NS_STAGE_STATUS "status"   /* progress and outcome (JSON) */
#define TIER_NS_STAGE_MADE   "made"     /* mount point files it created */
#define TIER_NS_STAGE_PID    "pid"      /* the stager */
#define TIER_NS_NAME_MAX    48

/* The name of part's file what ("status", ...) into buf. */
void tier_ns_part_name (int part, const char *what, char *buf, size_t size);

/* Open a tier root (NvdimmDir, BBDir), creating it root 0700 (and its
 * missing parents 0755) if needed: every parent must be a root-owned
 * directory that others cannot rename entries in (not group- or
 * other-writable, or sticky like /dev/shm), no component may be a
 * symlink, and the root itself must be root's with mode 0700 -- a root
 * someone else made is refused (it may sit under /dev/shm).  Walks with
 * descriptors; returns an O_RDONLY|O_DIRECTORY descriptor, or -1.
 */
int tier_root_open (const char *path, tier_error_t *error);

/* Make base (created 0700 with its parents if missing; lib/trust.h's
 * ROOT_DIR: root-owned, not writable by others, no symlink, its parents
 * under the parent rule) a private bind mount of itself, once.  Returns
 * 0 or -1.
 */
int tier_ns_base_prepare (const char *base, tier_error_t *error);

/* The job's directory and holder paths. */
int tier_ns_paths (const char *base, uint32_t job_id, char *dir,
                   char *holder, size_t size);

/* True if the job's holder is a live namespace (bound). */
bool tier_ns_exists (const char *base, uint32_t job_id);

/* Create the job's namespace (a stale one of an earlier run of the same
 * job id is torn down first when fresh is true).  Also records uid.
 * Returns 0 (made or already there), or -1.
 */
int tier_ns_create (const char *base, uint32_t job_id, uid_t uid,
                    bool fresh, tier_error_t *error);

/* Join the job's namespace (single-threaded callers only). */
int tier_ns_enter (const char *base, uint32_t job_id, tier_error_t *error);

/* Run fn(arg, error) in a forked child that joined the namespace; the
 * child's error text comes back.  Returns fn's result (0 or -1).
 */
typedef int (*tier_ns_fn) (void *arg, tier_error_t *error);
int tier_ns_run (const char *base, uint32_t job_id, tier_ns_fn fn, void *arg,
                 tier_error_t *error);

/* Per-job exclusive lock (flock on JOBID/lock); returns an fd or -1. */
int tier_ns_lock (const char *base, uint32_t job_id, tier_error_t *error);

/* Marker files in the job's directory (TIER_NS_READY): empty files. */
int tier_ns_mark (const char *base, uint32_t job_id, const char *name);
bool tier_ns_marked (const char *base, uint32_t job_id, const char *name);

/* A small file of the job's directory (TIER_NS_SCRATCH, ...): replaced
 * whole (a unique temporary, then rename), or read whole into buf
 * (NUL-terminated; EFBIG if it does not fit).  The job's directory must
 * pass lib/trust.h's ROOT_DIR rule with mode 0700 and the file be a
 * root-owned regular file, else EPERM.  Returns 0 or -1 with errno.
 */
int tier_ns_write (const char *base, uint32_t job_id, const char *name,
                   const char *text);
int tier_ns_read (const char *base, uint32_t job_id, const char *name,
                  char *buf, size_t size);
/* Remove one (ENOENT is not an error). */
int tier_ns_remove (const char *base, uint32_t job_id, const char *name);

/* Processes inside the job's namespace (from /proc/PID/ns/mnt), not
 * those in namespaces made from it (tier_ns_kill finds those too: it
 * reads their mountinfo); returns how many were found (up to max), -1 if
 * the holder is gone.
 */
int tier_ns_pids (const char *base, uint32_t job_id, pid_t *pids, int max);

/* SIGKILL every process inside the namespace, waiting up to wait_ms for
 * them to go; returns how many remain (the holder stays).
 */
int tier_ns_kill (const char *base, uint32_t job_id, int wait_ms);

/* Tear the namespace down: kill what is still inside (SIGKILL, waiting up
 * to wait_ms for it to go), unmount the holder, remove the job's
 * directory.  Returns 0 when gone, 1 when processes remain (the caller
 * must keep the tier data the namespace still uses and retry later), -1
 * on error.  Nothing mounted is ever deleted.
 */
int tier_ns_teardown (const char *base, uint32_t job_id, int wait_ms,
                      tier_error_t *error);

/* Everything of a job on this node: its namespace (tier_ns_teardown),
 * then its data on the NVDIMM tier (nvdimm_dir/JOBID).  Returns 0, 1
 * (deferred: processes remain; nothing was deleted), or -1.
 */
int tier_job_reclaim (const char *ns_base, const char *nvdimm_dir,
                      uint32_t job_id, tier_error_t *error);

/* Job ids with a directory under base (for a restarted agent). */
int tier_ns_list (const char *base, uint32_t *ids, int max);

/* Remove name beneath dirfd recursively: never follows a symlink, never
 * crosses into another file system (a mount point is left alone and the
 * call fails with EBUSY).
 */
int tier_rmtree_at (int dirfd, const char *name, tier_error_t *error);

/* Overlay (lower = lowerfd, upper/work on the tier) mounted on top of
 * the directory targetfd, from descriptors only: no option string is
 * ever built from a user's path.  Options are set explicitly:
 * redirect_dir=on (renaming a directory from the GFS works), index=off
 * and xino=off (no file-handle or inode-number games with network or
 * FUSE lowers), metacopy=off (a copy-up copies data: no metadata-only
 * copies pointing into a lower the user may change), uuid=null.
 * MOUNT_ATTR_NOSUID|MOUNT_ATTR_NODEV always.
 */
int tier_ovl_mount (int lowerfd, int upperfd, int workfd, int targetfd,
                    tier_error_t *error);

/* Make the upper and work directories of one overlay beneath dirfd,
 * root 0700, and open them.  Both must be new: one that exists already
 * (a leftover of an earlier mount on a tier that is not a fresh tmpfs)
 * is refused with EEXIST, so that two overlays never share an upper
 * layer.  Returns 0 with both descriptors, or -1.
 */
int tier_ovl_dirs (int dirfd, int *upperfd, int *workfd,
                   tier_error_t *error);

/* A tmpfs of size bytes (0: no limit), root 0700, nosuid,nodev, on top
 * of targetfd: a job's reservation on a DRAM-emulated NVDIMM tier, so
 * that writing past it gives ENOSPC there and nowhere else.
 */
int tier_tmpfs_mount (int targetfd, uint64_t size, tier_error_t *error);

/* The same mount seen in two mount namespaces: in the caller's,
 * tier_mount_clone gives a detached copy of the mount at dirfd (-1 with
 * *error if dirfd is not a mount's root), which tier_mount_attach puts
 * on targetfd in another namespace the caller joined since.  Both show
 * one file system: a job's write cache, written through the job's
 * overlays in its namespace and read by the agent on the host.
 */
int tier_mount_clone (int dirfd, tier_error_t *error);
int tier_mount_attach (int clonefd, int targetfd, tier_error_t *error);

/* A read-only, nosuid, nodev bind of srcfd on top of targetfd. */
int tier_bind_ro (int srcfd, int targetfd, tier_error_t *error);

#endif /* !TIER_JOBNS_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* copy.h - the copy engine: files and trees, published atomically
 *
 * Every tier moves data with this engine: stage-in (GFS to the fast tier),
 * stage-out migrations (write cache to GFS), batch replicas (GFS to BB) and
 * keeping pipeline data (NVDIMM upper layer to GFS).
 *
 * Why not cp or rsync: they open by path (root following a user's symlink)
 * and offer no descriptors in, atomic publication with change detection,
 * a shared bandwidth limit or cancellation.  sendfile and copy_file_range
 * are what the engine uses underneath (below).
 *
 * The engine works on descriptors only: the caller opens the source and
 * the destination directory under the right credentials and beneath the
 * right roots (tier_path_open_beneath); the engine never resolves a path
 * with more than one component and never follows a symlink.
 *
 * Publishing.  A file is written under a unique temporary name in the
 * destination directory, ".NAME.tier-XXXXXX.part" (created O_EXCL, mode
 * 0600 while it is written), then its mode, times (and with
 * TIER_COPY_OWNER its owner) are set, it is fsync'ed, renamed to NAME and
 * the directory is fsync'ed.  On any error or cancellation the temporary
 * is unlinked: nothing partial is ever visible under the final name, and an
 * existing file under that name is left untouched.  Only a crash of the
 * process can leave a temporary behind; recognise those with
 * tier_copy_is_temp_name() (e.g. in a recovery sweep of the tier's roots).
 *
 * Data path.  copy_file_range (server-side copy or reflink where the file
 * system can), falling back to sendfile, then to pread/pwrite, when the
 * kernel or file system refuses (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP, EBADF).
 * Data is moved in chunks (opts->chunk_size): cancellation, the bandwidth
 * limit and the progress callback act between chunks.  Holes are found
 * with SEEK_DATA/SEEK_HOLE and skipped (neither read nor written), and the
 * destination is truncated to the source's size, so a sparse source stays
 * sparse.  On request, a file larger than opts->split_size is cut into
 * ranges of that size that several threads copy at once (useful where one
 * stream does not fill the storage, e.g. striped parallel file systems).
 *
 * Change detection.  The source is fstat'ed before and after the copy; if
 * its inode, size, mtime or ctime (to the nanosecond) differ, or it ends
 * early, the copy fails with errno ESTALE and nothing is published.  A
 * caller that named the copy by a version it saw earlier (a replica key)
 * passes that stat as opts->expect: a source that is no longer that
 * version when the copy starts fails with ESTALE too, so the copy is
 * always of the version it is named by.  A
 * writer that changes the file through a shared mmap without the kernel
 * updating mtime cannot be detected (no file system tells).
 *
 * Threads.  Single files are copied in the calling thread unless split.
 * Tree copies and split files use a pool of opts->threads threads created
 * for the call (with every signal blocked) and joined before it returns.
 *
 * Errors are -1 with errno set and a text in *error ("NAME: op: reason");
 * the distinct codes are ESTALE (source changed), ECANCELED (cancelled),
 * EEXIST (TIER_COPY_NOREPLACE and the target exists), ENOSPC/EDQUOT (the
 * destination is full).
 */
#ifndef TIER_COPY_H
#define TIER_COPY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "error.h"

/* Data paths, as bits: opts->methods restricts them, res->methods says
 * which ones moved data.  The fallback order is the order of the bits.
 */
enum tier_copy_method {
    TIER_COPY_CFR = 0x1,            /* copy_file_range */
    TIER_COPY_SENDFILE = 0x2,       /* sendfile (never for split files) */
    TIER_COPY_RW = 0x4,             /* pread/pwrite through a buffer */
};
#define TIER_COPY_METHODS_ALL (TIER_COPY_CFR | TIER_COPY_SENDFILE \
                               | TIER_COPY_RW)

enum tier_copy_flags {
    /* Never replace an existing target: fail with EEXIST instead
     * (renameat2 RENAME_NOREPLACE, else link+unlink, both atomic).  In a
     * tree, existing directories are still merged into. */
    TIER_COPY_NOREPLACE = 0x01,
    /* Do not fsync files and directories (data that need not survive a
     * crash, e.g. node-local pipeline scratch). */
    TIER_COPY_NOSYNC = 0x02,
    /* Give copies the source's uid and gid (needs CAP_CHOWN) and keep the
     * set-user-ID and set-group-ID bits.  Without it, copies belong to the
     * caller and those two bits are dropped, so that a root daemon never
     * turns a user's set-id file into a root-owned one. */
    TIER_COPY_OWNER = 0x04,
    /* Publish regular files with opts->mode instead of the source's
     * permission bits (e.g. read-only replicas). */
    TIER_COPY_MODE = 0x08,
    /* Copy holes as zeros (the copy is fully allocated). */
    TIER_COPY_NOSPARSE = 0x10,
    /* Tree: an entry that fails is reported (TIER_COPY_FAILED), counted in
     * res->errors and the rest is still copied; the call still returns -1
     * with the first error.  Without it, the first error stops the copy. */
    TIER_COPY_KEEP_GOING = 0x20,
    /* Tree: skip symlinks (reported, counted in res->skipped) instead of
     * copying them as symlinks. */
    TIER_COPY_SKIP_SYMLINKS = 0x40,
};

enum tier_copy_event {
    TIER_COPY_SKIPPED,              /* an entry was deliberately not copied */
    TIER_COPY_FAILED,               /* an entry failed (TIER_COPY_KEEP_GOING) */
};

/* Progress: done and total are logical bytes (holes count as done when
 * they are skipped), summed over every file of the call.  Called after
 * each chunk, from the thread that copied it (a worker thread of the pool,
 * or the caller's); calls are serialised and done never decreases.  A call
 * is skipped while another thread is inside the callback, so keep it short
 * and never block in it.  A last call is made when the copy ends, from the
 * calling thread.  In a tree copy, total grows while the walk discovers
 * files.
 */
typedef void (*tier_copy_progress_f) (uint64_t done, uint64_t total,
                                      void *arg);

/* Report an entry that was skipped or failed; path is relative to the
 * source root; errnum is 0 for a skipped entry.  Calls are serialised. */
typedef void (*tier_copy_report_f) (enum tier_copy_event event,
                                    const char *path, int errnum,
                                    const char *text, void *arg);

/* Called for each file once its temporary is complete and synced, just
 * before it is renamed to its final name, with its fstat (the inode the
 * final name will have: rename keeps it).  Returning an errno value
 * instead of 0 stops the copy with it (the temporary is removed).  A
 * caller records there what it needs to recognise its own file after a
 * crash between the rename and its next step. */
typedef int (*tier_copy_publish_f) (const struct stat *tmp, void *arg);

/* A token bucket that several copies (and other GFS streams) can share to
 * stay under a bandwidth.  Thread-safe. */
struct tier_copy_limit;

#define TIER_COPY_CHUNK_DEFAULT (8u << 20)         /* 8 MiB */
#define TIER_COPY_THREADS_DEFAULT 4

/* Options; all zero (or a NULL pointer) gives the defaults: fsync,
 * replace, sparse, every method, mode and times of the source, 8 MiB
 * chunks, files not split, 4 threads for trees.
 *
 * Splitting is off by default: on local ext4 and tmpfs (2 CPUs) it gained
 * nothing measurable over one copy_file_range stream and it rules out
 * sendfile; set split_size (e.g. 256 MiB) for destinations or sources
 * where several streams are faster (striped parallel file systems). */
struct tier_copy_opts {
    unsigned int flags;             /* enum tier_copy_flags, or'ed */
    unsigned int methods;           /* enum tier_copy_method allowed; 0: all */
    unsigned int threads;           /* pool size; 0: default, 1: no threads */
    size_t chunk_size;              /* bytes per step; 0: default */
    uint64_t split_size;            /* with threads > 1, copy files above
                                     * it in ranges of it at once; 0: never
                                     * (at least chunk_size) */
    mode_t mode;                    /* with TIER_COPY_MODE */
    atomic_int *cancel;             /* if set non-zero: stop, ECANCELED */
    tier_copy_progress_f progress;
    void *progress_arg;
    tier_copy_report_f report;
    void *report_arg;
    struct tier_copy_limit *limit;  /* shared bandwidth limit, or NULL */
    const struct stat *expect;      /* tier_copy_fd: the version the copy
                                     * must be of (inode, size, mtime and
                                     * ctime in ns; not st_dev), else
                                     * ESTALE; NULL: whatever it is */
    tier_copy_publish_f before_publish; /* per file, see above */
    void *publish_arg;
};

/* Counters of one call, filled (after zeroing) whether it succeeds or
 * not. */
struct tier_copy_result {
    uint64_t bytes;                 /* data bytes moved */
    uint64_t bytes_total;           /* logical size of the files seen */
    uint64_t hole_bytes;            /* bytes of holes skipped */
    uint64_t holes;                 /* hole extents skipped (a hole that
                                     * crosses split ranges counts per
                                     * range) */
    uint64_t files;                 /* regular files published */
    uint64_t dirs;                  /* directories created (tree) */
    uint64_t symlinks;              /* symlinks published (tree) */
    uint64_t skipped;               /* entries skipped (tree) */
    uint64_t errors;                /* entries that failed (tree) */
    uint64_t elapsed_ns;            /* wall time of the call */
    unsigned int methods;           /* enum tier_copy_method that moved data */
    unsigned int threads;           /* threads that ran (the caller's too) */
    struct stat src;                /* tier_copy_fd: the source version that
                                     * was copied (checked unchanged), for
                                     * keying replicas */
};

/* Copy the regular file open for reading as srcfd to name (one component)
 * in the directory dstdirfd (may be O_PATH), as described above.  The file
 * offset of srcfd is unspecified afterwards; srcfd stays open.  opts and
 * res may be NULL.  Returns 0, or -1 with errno set (see above; EINVAL for
 * a bad name or a source that is not a regular file, EBADF for one not
 * open for reading).  If only the last step, the fsync of the directory,
 * fails, the (complete) file is already published under name and -1 is
 * returned with that error: its name may not survive a crash.
 */
int tier_copy_fd (int srcfd, int dstdirfd, const char *name,
                  const struct tier_copy_opts *opts,
                  struct tier_copy_result *res, tier_error_t *error);

/* Copy the contents of the directory srcdirfd into the existing directory
 * dstdirfd (both may be O_PATH), merging into what is there:
 *  - regular files are copied as by tier_copy_fd, several at once on the
 *    pool; hard links are not kept (each name becomes its own file);
 *  - directories are created (mode 0700 while they are filled, then the
 *    source's mode and times) or, if they exist, merged into (their mode
 *    and times are left alone; a non-directory there is an error); the
 *    walk never follows a symlink (openat O_NOFOLLOW at every step) and
 *    skips the destination directory if it lies inside the source;
 *  - symlinks are copied as symlinks with the same target text (not
 *    resolved, so one pointing outside the tree still points there), or
 *    skipped with TIER_COPY_SKIP_SYMLINKS;
 *  - fifos, sockets and devices are skipped and reported (never opened).
 * The mode and times of dstdirfd itself are not changed.  Each file is
 * published atomically on its own: after a failure or a cancellation the
 * files already published (complete and verified) and the directories
 * created stay, no temporary does.  Returns 0, or -1 with errno set and
 * the first error in *error.
 */
int tier_copy_tree (int srcdirfd, int dstdirfd,
                    const struct tier_copy_opts *opts,
                    struct tier_copy_result *res, tier_error_t *error);

/* True if name has the shape of the engine's temporary names. */
int tier_copy_is_temp_name (const char *name);

/* Name of a set of methods ("copy_file_range", "sendfile+read/write",
 * "none", ...); a static string. */
const char *tier_copy_method_name (unsigned int methods);

/* A bandwidth limit of rate bytes/s (0: unlimited) with a burst of burst
 * bytes (0: a tenth of a second's worth).  Returns NULL with errno set.
 * A shared limit lives in memory that the processes forked after it was
 * made share (MAP_SHARED): they take from one bucket (e.g. one user's
 * copies on a node, in several worker processes).  Destroy it in the
 * process that made it (children just exit).  A rate or burst change
 * applies to the next take. */
struct tier_copy_limit *tier_copy_limit_create (uint64_t rate,
                                                uint64_t burst);
struct tier_copy_limit *tier_copy_limit_create_shared (uint64_t rate,
                                                       uint64_t burst);
void tier_copy_limit_destroy (struct tier_copy_limit *limit);
void tier_copy_limit_set (struct tier_copy_limit *limit, uint64_t rate,
                          uint64_t burst);

/* The limit's own accounting, computed from the bucket (never from
 * measured sleeps), since it was made:
 *   bytes, ops                  every take (also while unlimited)
 *   delayed_bytes, delayed_ops  takes that had to wait
 *   wait_ns                     the sum of their waits (several takers at
 *                               once: more than the time that passed)
 *   stall_ns                    the length of the union of the waits: the
 *                               time during which the limit held someone
 *                               back
 * Moving X bytes at rate R with burst C stalls at least (X - C) / R less
 * the time spent moving data while no one waited; and
 * stall_ns <= delayed_bytes * 1e9 / R + delayed_ops (each take adds at
 * most its own size to the debt, +1 ns of rounding).  rate and burst are
 * the current settings. */
struct tier_copy_limit_stats {
    uint64_t bytes;
    uint64_t ops;
    uint64_t delayed_bytes;
    uint64_t delayed_ops;
    uint64_t wait_ns;
    uint64_t stall_ns;
    uint64_t rate;
    uint64_t burst;
};
void tier_copy_limit_stats (struct tier_copy_limit *limit,
                            struct tier_copy_limit_stats *out);

/* Take bytes from the bucket, sleeping as long as the rate requires
 * (for other users of the same limit, e.g. curl streams).  Returns 0, or -1
 * with errno ECANCELED if *cancel became non-zero while sleeping. */
int tier_copy_limit_take (struct tier_copy_limit *limit, uint64_t bytes,
                          atomic_int *cancel);

#endif /* !TIER_COPY_H */

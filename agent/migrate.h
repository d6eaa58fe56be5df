/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate.h - stage-out: what its modules share (not the rest of tierd,
 * which calls the functions in agent.h)
 *
 * A job's output directories (--tier-stage-out, endpoint policies) are
 * overlays in its namespace on each node: lower = the GFS directory,
 * upper = NvdimmDir/.outbox/JOB.RESTART/K/upper (host-visible, outside
 * the job's own NVDIMM directory, so that it outlives the job until
 * every file has reached the GFS).  For each job with outputs on the
 * node the agent runs one migrator, a child with the job's credentials
 * that publishes the files (migrator.c, migrator_gfs.c, migrate_obj.c).
 * It reports every outcome on its channel (migrate_msg.h); the agent
 * keeps them in LMDB, the job's records (migrate_rec.c), and writes the
 * job's manifest from them when the job is done (migrate_manifest.c).
 * A restarted agent restarts the migrators of every outbox it finds
 * (migrate_outbox.c), handing them its records: nothing acknowledged is
 * lost, nothing is published twice.
 *
 * The modules:
 *   migrate.c           the jobs' migrations in the agent: starting and
 *                       restarting migrators, their results, waiters,
 *                       the RPCs, tick, status and gauges
 *   migrate_watch.c     the agent's inotify watch of the write caches
 *   migrate_rec.c       the records of the outputs and uploads in LMDB
 *   migrate_outbox.c    the outboxes on NvdimmDir
 *   migrate_manifest.c  the job's manifest in SharedStateDir
 *   migrate_msg.c       the channel's messages
 *   migrator.c          the child: its loop, commands, the walks, syncs
 *   migrator_gfs.c      publishing to the GFS, conflicts there
 *   migrate_obj.c       publishing to an object store (DIR=URL)
 */
#ifndef TIER_AGENT_MIGRATE_H
#define TIER_AGENT_MIGRATE_H

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "lib/conf.h"
#include "lib/url.h"
#include "agent.h"
#include "migrate_msg.h"

#define MIGRATE_DIRS_MAX 16
#define MIGRATE_WALK_DEPTH_MAX 128

/* A job's outputs on this node: what its migrator is started with. */
struct migrate_spec {
    bool resumed; /* an earlier migrator of the job died */
    uint32_t job_id, restart;
    uid_t uid;
    gid_t gid;
    int64_t job_start; /* epoch s: GFS changes after it are not
                                 * ours unless we made them */
    bool late;         /* the job ended before its outputs were all on
                                 * the GFS (its epilog gave up, or it ran
                                 * while no agent did): dependents may
                                 * have started without them */
    int ndirs;
    char gfs[MIGRATE_DIRS_MAX][PATH_MAX];
    char url[MIGRATE_DIRS_MAX][TIER_URL_MAX + 1]; /* DIR=URL, or "" */
};

/* NvdimmDir/.outbox/JOB.RESTART (k < 0) or .../K/upper, the write cache
 * of output directory k, opened: the directories above the upper are
 * root's and only root may enter them (lib/trust.h), the upper is not
 * followed if a symlink.  -1 with errno if it is not there. */
int migrate_outbox_open (const struct tier_conf *conf, uint32_t job_id,
                         uint32_t restart, int k);

/* The walks of a write cache (the migrator's, the watch's, the check
 * before an outbox goes), always beneath a descriptor: directory dfd as
 * a DIR of its own (a dup would share, and keep, the offset of the last
 * walk), or NULL (also past MIGRATE_WALK_DEPTH_MAX).
 */
static inline DIR *migrate_dir_open (int dfd, int depth)
{
    DIR *d;
    int fd;

    if (depth > MIGRATE_WALK_DEPTH_MAX
        || (fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return NULL;
    if (!(d = fdopendir (fd)))
        close (fd);
    return d;
}

/* The next entry of d but "." and "..", its path below rel in sub. */
static inline struct dirent *migrate_dir_next (DIR *d, const char *rel,
                                               char *sub, size_t size)
{
    struct dirent *de;

    while ((de = readdir (d)))
        if (strcmp (de->d_name, ".") && strcmp (de->d_name, "..")) {
            (void) snprintf (sub, size, "%s%s%s", rel, rel[0] ? "/" : "",
                             de->d_name);
            return de;
        }
    return NULL;
}

/* ------------------------------------------------- the migrator (child) */

struct tier_copy_limit;

/* What the child gets (spec.arg of child_start: the child's copy of the
 * agent's memory). */
struct migrator_arg {
    const struct migrate_spec *spec;
    const struct tier_conf *conf;
    const char *node;
    const char *user;                  /* the job's user (for S3 credentials) */
    int streams_fd;                    /* the GFS streams' worker channel */
    struct tier_copy_limit *limit;     /* the user's bandwidth */
    const struct migmsg_batch *resume; /* what the agent knows */
    int upperfd[MIGRATE_DIRS_MAX];     /* as_root opens them */
};

/* child_spec.as_root: lock the job's outbox (holder.h: an earlier
 * agent's migrator is ended; if one still holds it after 10 s the child
 * exits MIGRATOR_EXIT_BUSY) and open the write caches (their parents are
 * root's). */
#define MIGRATOR_EXIT_BUSY 124
int migrator_as_root (void *arg);
/* child_spec.main: the migrator, with the job's credentials. */
int migrator_main (void *arg, int chan);

/* ----------------------------------------------------- the agent side */

struct conn;
struct child;

struct migrate_waiter {
    struct conn *c;
    uint32_t msgid;
    unsigned seq;
    int64_t deadline_ms;
    bool end; /* the epilog's */
    struct migrate_waiter *next;
};

/* One job's migration. */
struct mig {
    uint32_t job_id, restart;
    uid_t uid;
    gid_t gid;
    char user[64];
    struct child *child; /* the migrator, or NULL */
    pid_t pid;           /* its pid, or 0 */
    unsigned seq_sent, seq_done;
    int pending, failed, conflicts;
    uint64_t held;             /* bytes its write cache held (last sync) */
    uint64_t out_us;           /* migration time not yet in stage_out_ms */
    bool ended;                /* the job ended: remove when done */
    struct child *manifest;    /* the manifest's writer in flight */
    bool manifest_done;        /* the final manifest is written (or there
                                * is no SharedStateDir) */
    int64_t manifest_after_ms; /* one that failed: again from then */
    int64_t manifest_backoff_ms;
    int64_t restart_after_ms;
    uint64_t stream_id; /* its GFS streams ticket (streams_revoke) */
    unsigned stalls;    /* migrators killed by StallTimeout */
    pid_t stuck;        /* one abandoned that still holds the
                                * outbox lock (no successor until it lets
                                * go), or 0 */
    struct migrate_spec spec;
    struct migrate_waiter *waiters;
    struct mig *next;
};

/* migrate.c: send a command to g's migrator (-1 if it has none now, or
 * its queue is full: syncs are sent again from the tick). */
int migrate_tell (struct mig *g, const struct migmsg *m);
/* migrate.c: the job ended before its outputs were all on the GFS
 * (recorded in the outbox, shown in job.outputs and the manifest) */
void migrate_late (struct agent *a, struct mig *g, const char *why);
/* migrate.c: waiters, and the end of a finished job (may free g) */
void migrate_settle (struct agent *a, struct mig *g);

/* migrate_watch.c: which directories of the write caches are watched */
int migrate_watch_init (struct agent *a);
void migrate_watch_tree (struct agent *a, struct mig *g, int k,
                         const char *rel);
void migrate_watch_drop (struct mig *g);

/* migrate_rec.c: a result of g's migrator into its records and counters */
void migrate_rec_result (struct agent *a, struct mig *g,
                         const struct migmsg *m);
/* What is known of g's outputs, as the commands of a resume; *uploads
 * gets the number of multipart uploads among them. */
int migrate_rec_resume (struct agent *a, struct mig *g, struct migmsg_batch *b,
                        int *uploads);
/* The outputs of one job, with their state (for job.outputs and the
 * manifest): arr (if set) gets one object per output. */
struct migrate_list {
    uint32_t job_id, restart;
    const struct mig *g; /* adds "path" and "dir" (NULL: none) */
    json_t *arr;
    int done, pending, failed, conflicts;
    bool late; /* the job's outputs were marked late (a record of its own) */
};
int migrate_rec_list (struct agent *a, struct migrate_list *lc,
                      tier_error_t *error);
/* Record that g's outputs are late ("JOB.RESTART/late"), so that
 * tierctl outputs still says so once g is gone. */
void migrate_rec_late (struct agent *a, const struct mig *g);
/* The first max failed outputs of g: [{path, error}] (new reference). */
json_t *migrate_rec_failures (struct agent *a, const struct mig *g, size_t max);
/* Did rel of dir k reach the GFS at this size (or stay in conflict)? */
bool migrate_rec_arrived (struct agent *a, const struct mig *g, int k,
                          const char *rel, off_t size);

/* migrate_outbox.c */
int migrate_outbox_parse_dirs (json_t *dirs, json_t *urls,
                               struct migrate_spec *s, tier_error_t *error);
int migrate_outbox_write_dirs (struct agent *a, const struct mig *g);
/* Regular files of g's write caches with no record of arrival: their
 * number, and the first (its GFS path) into first.  At most max_entries
 * entries are looked at (< 0: all); one not seen counts as missing. */
int migrate_outbox_missing (struct agent *a, const struct mig *g, char *first,
                            size_t size, long max_entries);
void migrate_outbox_remove (struct agent *a, const struct mig *g);
/* Call fn for every outbox a previous life left (with its job and dirs). */
typedef void (*migrate_outbox_f) (struct agent *a, const struct store_job *job,
                                  const struct migrate_spec *s);
void migrate_outbox_foreach (struct agent *a, migrate_outbox_f fn);

/* migrate_manifest.c: write g's manifest as its user (asynchronously:
 * settle is called again once written, with manifest_done set, or once
 * it failed, with manifest_after_ms set: written again then, with
 * backoff); -1 if there is no SharedStateDir. */
int migrate_manifest_start (struct agent *a, struct mig *g);

#endif /* !TIER_AGENT_MIGRATE_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage.h - what stage-in's modules share (see stage.c)
 *
 *   stage.c        the agent's side: the plan in NamespaceDir/JOBID/
 *                  stage.items, op_stage_in (starts a stager per part),
 *                  stage_job_end (stops it, counts it, drops the made
 *                  files and the user's stage cache)
 *   stage_child.c  the stager (root, its own process group) and its
 *                  copier (the job's credentials): the stage directories,
 *                  the stage cache, the copies, stage.status, stage.made
 *   stage_url.c    URL inputs: their targets and mount point files, S3
 *                  credentials, the fetch through lib/endpoint.h, and the
 *                  mount point remover at job end
 *   stage_msg.c    the messages of these children (stage_msg.h)
 *
 * Not for the rest of the agent: agent.h has op_stage_in and
 * stage_job_end.
 */
#ifndef TIER_AGENT_STAGE_H
#define TIER_AGENT_STAGE_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/conf.h"
#include "lib/cred.h"
#include "lib/error.h"
#include "store.h"

#define STAGE_ITEMS_MAX 64

struct tier_copy_limit;
struct tier_creds;
struct tier_url;

/* One part of a job's stage-in, as the agent hands it to the stager (the
 * fork's copy of the agent's memory). */
struct stage_req {
    const struct tier_conf *conf;
    uint32_t job_id;
    uid_t uid;
    gid_t gid;
    char user[64];
    struct tier_cred cred; /* the copier's: the job's groups (DATA) */
    int nitems;
    char items[STAGE_ITEMS_MAX][PATH_MAX]; /* the GFS path (URL: target) */
    char urls[STAGE_ITEMS_MAX][PATH_MAX];  /* the URL, or "" */
    int streamfd;                  /* the copier's GFS stream channel, or -1 */
    struct tier_copy_limit *limit; /* the user's bandwidth (shared) */
    int part;                      /* which part of the job's stage-in */
    int base;                      /* the stage directory of items[0] */
    uint64_t room;                 /* NVDIMM bytes it may stage (0: no
                                    * bound: no NvdimmCapacity) */
    uint64_t capacity, taken;      /* for the message: NvdimmCapacity and
                                    * what reservations and other stage-ins
                                    * hold of it */
};

/* A part's NamespaceDir/JOBID/stage[.P].status (replaced atomically). */
struct stage_status {
    const char *state; /* queued, copying, done, failed */
    uint64_t done, total, files, gfs, meta;
    int64_t ms;
    bool queued;       /* waiting for a GFS stream */
    const char *error; /* failed: why */
};

void stage_status_write (const struct tier_conf *conf, uint32_t job, int part,
                         const struct stage_status *st);

/* stage_child.c: the stager (a child_main_f; arg: a struct stage_req). */
int stager_main (void *arg, int chan);

/* stage_child.c, in the copier: progress to the stager on chan, at most
 * every 200 ms (base: the bytes of the items before). */
struct stage_progress {
    int chan;
    uint64_t base;
    int64_t last_ms;
};
void stage_on_progress (uint64_t done, uint64_t total, void *arg);

/* stage_child.c, in the copier: an error message to the stager; returns
 * -1 (for "return stage_say (...)"). */
/* The part's inputs need more than r->room: what to say. */
void stage_room_text (const struct stage_req *r, uint64_t need, char *buf,
                      size_t size);
int stage_say (int chan, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* stage_url.c: the allowed root that path is under (NULL: none). */
const char *stage_allowed_root (const struct tier_conf *conf, const char *path);
/* rel's directory (beneath rootfd; "" is the root) as an O_PATH
 * descriptor, and its last component in *base. */
int stage_open_parent (int rootfd, const char *rel, const char **base);
/* The text of an open error beneath an allowed root. */
const char *stage_open_error (int e);

/* stage_url.c, in the copier, for URL=PATH item k: the user's stage-refs
 * directory (-1: none), the target (made if missing: *mode is the copy's
 * mode), S3's credentials, and the fetch into dstfd.  Each failure sends
 * an error to the stager on chan first (NULL or -1). */
int stage_refs_open (const struct stage_req *r);
int stage_url_target (const struct stage_req *r, int k, int refsfd, int chan,
                      mode_t *mode);
struct tier_creds *stage_url_creds (const struct stage_req *r,
                                    const struct tier_url *u, int chan);
int stage_url_fetch (const struct stage_req *r, const struct tier_url *u,
                     const struct tier_creds *creds, int dstfd,
                     const char *name, mode_t mode, struct stage_progress *prog,
                     uint64_t *total, uint64_t *bytes, tier_error_t *error);

/* stage_url.c: the mount point remover (a child_main_f; arg: a struct
 * stage_unmake), with the job's credentials: drop this job's reference
 * to each file of made, then remove the file if no other job holds one
 * and it still is the empty file tier made; answers "removed". */
struct stage_unmake {
    const struct tier_conf *conf;
    const struct store_job *job;
    json_t *made; /* [{path, dev, ino, ref}] */
};
int stage_unmake_main (void *arg, int chan);

#endif /* !TIER_AGENT_STAGE_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica.h - the batch replica cache: what its modules share (not the
 * rest of tierd, which calls the functions in agent.h)
 *
 * The design and the layout on the BB are in replica.c.  The modules:
 *   replica.c           the RPCs (replica.open, .report, .prefetch,
 *                       .evict, .list), the checks of a request's
 *                       descriptor, serving a request (hit, wait, fetch),
 *                       the replies, status, the directories, start/stop
 *   replica_index.c     the record table and its LMDB persistence
 *   replica_fetch.c     the fetch queue, its waiters, the fetcher child
 *                       (child.c) and its results
 *   replica_evict.c     LRU, the budget and the free-space floor, ttl
 *   replica_msg.c       the fetcher's and the mirror walker's messages
 *   bblock.c            the cross-node lock of a fetch, with heartbeat
 *   mirror.c            eager mode: mirrors of fully prefetched
 *                       directories
 *
 * Everything here lives in struct replicas, the agent's a->replicas
 * (agent.h's shared state is the only global).
 */
#ifndef TIER_AGENT_REPLICA_H
#define TIER_AGENT_REPLICA_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lib/log.h"
#include "agent.h"

#define REPLICA_BUCKETS 4096
#define REPLICA_ID_MAX 200 /* "uUID/KEY" */
#define REPLICA_KEY_MAX 160
#define REPLICA_SCOPES_MAX 64

/* A replica this node knows of (the index). */
struct replica {
    char id[REPLICA_ID_MAX];
    char *path;   /* the source, as fetched */
    uint32_t uid; /* the scope's user (world: the fetcher's) */
    uint64_t size;
    int64_t fetched, used, expires; /* epoch seconds; expires 0: never */
    uint32_t batch;                 /* the last batch that opened it */
    uint64_t opens;
    bool owner; /* fetched by this node: it evicts it */
    bool dirty; /* not yet in LMDB as it is now */
    struct replica *next;
};

/* A request waiting for a fetch (its reply is deferred). */
struct waiter {
    struct conn *c;
    uint32_t msgid;
    bool miss; /* the request that started the fetch */
    bool has_job;
    struct store_job job;
    int revalidate;
    bool want_fd; /* the interposer's: the replica as a descriptor */
    struct waiter *next;
};

struct child;
struct stream_ticket;

/* A copy queued or running. */
struct fetch {
    char id[REPLICA_ID_MAX];
    char scope[24];
    char key[REPLICA_KEY_MAX];
    char *path;
    uint32_t uid; /* who asked first (fairness) */
    uint64_t size;
    uint64_t ttl;
    uint32_t batch;
    mode_t mode;    /* 0444, or 0555 for executables */
    struct stat st; /* the source when asked: what key names */
    int srcfd;
    struct child *child;          /* its fetcher; NULL while queued */
    struct stream_ticket *ticket; /* its GFS stream (streams.c) */
    bool done;
    struct waiter *waiters;
    struct fetch *next;
};

/* A replica cache whose BB directories could not be made (a full BB,
 * one not mounted yet) is tried again this often. */
#define REPLICA_RETRY_S 10

struct replicas {
    bool enabled;
    bool retry;               /* not enabled, tried again (replica_tick) */
    char why[PATH_MAX + 128]; /* why not, for replies and status */
    char bb[2048];            /* BBDir (longer ones are refused) */
    char boot[64];
    struct replica *tab[REPLICA_BUCKETS];
    uint64_t owned_bytes, owned_files, known_files;
    struct fetch *fetches; /* running and queued, in arrival order */
    int running;
    int64_t last_tick;
    uint64_t fallthroughs, fetched_bytes;
    char scopes_ok[REPLICA_SCOPES_MAX][24]; /* scope directories made */
    int nscopes_ok;
    struct tier_log_limit log_full; /* opens that fell through: BB full */
    struct tier_log_limit
        log_queue;                 /* opens that fell through: FetchesPerUser */
    struct tier_log_limit log_big; /* ... a file larger than the BB */
};

/* replica_index.c: the table; what is in LMDB follows it. */
struct replica *replica_index_find (struct replicas *r, const char *id);
struct replica *replica_index_add (struct replicas *r, const char *id);
/* Count x's bytes in (sign > 0) or out of this node's own. */
void replica_index_account (struct replicas *r, struct replica *x, int sign);
/* Out of the table (and freed), not out of LMDB. */
void replica_index_unlink (struct replicas *r, struct replica *x);
/* Write x to LMDB now (on failure it stays dirty, for replica_flush). */
void replica_index_store (struct agent *a, struct replica *x);
/* Out of LMDB and the table (and freed). */
void replica_index_forget (struct agent *a, struct replica *x);
/* The replica's file: BBDir/replicas/ID. */
void replica_index_file (const struct replicas *r, const char *id, char *buf,
                         size_t size);
/* Load the records of LMDB whose files are still there; drop the others. */
void replica_index_load (struct agent *a);
json_t *replica_index_json (const struct replica *x);

/* replica_evict.c */
/* Remove the replica's file (safe while open: readers keep theirs), its
 * mirrors and its record. */
void replica_evict_one (struct agent *a, struct replica *x, const char *why);
/* Make room for size bytes that uid asks for, or -1 with why (see
 * replica_evict.c: the BB is shared fairly between users). */
int replica_evict_make_room (struct agent *a, uint32_t uid, uint64_t size,
                             char *why, size_t whysize);
/* The largest file this node may make a replica of (0: no bound known);
 * what says which bound, for messages. */
uint64_t replica_evict_size_bound (struct agent *a, char *what,
                                   size_t whatsize);
/* Free bytes on the BB (UINT64_MAX if not known). */
uint64_t replica_evict_bb_free (const struct replicas *r);

/* replica_fetch.c */
/* The fetch of id queued or running, or NULL. */
struct fetch *replica_fetch_find (struct replicas *r, const char *id);
/* Queue a new fetch (it takes w as its first waiter, and f->srcfd). */
void replica_fetch_queue (struct agent *a, struct fetch *f, struct waiter *w);
/* Kill every fetcher and forget every fetch (replica_fini). */
void replica_fetch_fini (struct agent *a);

/* replica.c: the replies */
char *replica_reply (struct replicas *r, const char *id, uint64_t size,
                     int revalidate, bool hit);
/* The published replica id as a descriptor (O_PATH, close-on-exec) if it
 * is a regular file of size bytes; else -1. */
int replica_open_published (struct replicas *r, const char *id, uint64_t size);
json_t *replica_fallthrough (struct agent *a, const struct store_job *job,
                             const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
void replica_count_hit (struct agent *a, const struct store_job *job,
                        uint64_t size);
/* The caller's policy of path: by its job's frozen set when it runs in
 * one (*in_job, *job), else by the site and user layers its next job
 * would follow (role TIER_POLICY_NONE where none applies), as read for
 * the request (c->upol: run it with userpol_call).  -1 with errno EIO if
 * the user's policies could not be read. */
struct tier_policy;
int replica_caller_policy (struct agent *a, struct conn *c, const char *path,
                           struct store_job *job, bool *in_job,
                           struct tier_policy *pol, tier_error_t *error);

#endif /* !TIER_AGENT_REPLICA_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* agent.h - tierd's shared state */
#ifndef TIER_AGENT_H
#define TIER_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "lib/clock.h"
#include "lib/conf.h"
#include "lib/counters.h"
#include "lib/proto.h"
#include "store.h"

/* Connections: AGENT_CONNS_MAX in all, of which the last
 * AGENT_CONNS_RESERVED only for root and SlurmUser (the plugin's
 * registrations); each other user may hold ClientsPerUser (tier.conf).  A
 * new connection must send its first request whole within
 * AGENT_FIRST_TIMEOUT_MS, so that silent ones do not keep their slots.
 */
#define AGENT_CONNS_MAX 512
#define AGENT_CONNS_RESERVED 64
#define AGENT_FIRST_TIMEOUT_MS 5000    /* the first request must arrive */
#define AGENT_MSG_TIMEOUT_MS 5000      /* a message must arrive whole */
#define AGENT_IDLE_TIMEOUT_MS 120000   /* an idle connection is closed */
#define AGENT_FLUSH_MS 2000            /* counters reach LMDB this often */
#define AGENT_RECLAIM_MS 5000          /* retry deferred job teardowns */
#define AGENT_WQUEUE_MAX (256 * 1024)  /* replies queued: stop reading */
#define AGENT_CONN_WAITING_MAX 16      /* deferred requests: stop reading */
/* epoll tags of the GFS streams' worker channels (streams.c): far below
 * any connection's address, which is the tag of a connection */
#define AGENT_EV_STREAM0 (1u << 20)
#define AGENT_STREAMS_MAX 4096
/* epoll tags of the children's channels (child.c): CHILD_MAX of them */
#define AGENT_EV_CHILD0 (1u << 21)

struct conn {
    int fd;
    struct ucred cred;          /* SO_PEERCRED at accept */
    struct tier_msgreader rd;
    struct tier_msgwriter wr;
    int64_t accepted_ms;        /* when it was accepted */
    int64_t last_ms;            /* last activity */
    bool spoke;                 /* a whole request has arrived */
    int64_t partial_ms;         /* when a partial message began, or 0 */
    bool closing;               /* close once the writer is drained */
    int waiting;                /* deferred replies still owed to it */
    int *req_fds;               /* the request's descriptors: a handler */
    int req_nfds;               /* takes one by setting it to -1 */
    uint32_t req_id;            /* the request's id (for deferred replies) */
    int reply_fd;               /* sent with the next reply, then closed */
    const struct user_pols *upol; /* the caller's, read for this request */
    struct conn *prev, *next;
};

struct agent {
    const char *conf_path;
    struct tier_conf *conf;
    char node[TIER_NODENAME_MAX];
    bool foreground;
    int64_t started_ms;
    uid_t slurm_uid;            /* SlurmUser, or (uid_t) -1 */
    bool disabled;              /* tierctl disable: jobs run untiered */
    bool nvdimm_ok;             /* the NVDIMM tier root is usable */
    bool nvdimm_pmem;           /* pmem_is_pmem says real persistent memory */
    bool nvdimm_tmpfs;          /* DRAM-emulated (tmpfs) */
    uint64_t scratch_used;      /* in running jobs' scratch tmpfs, sampled */
    int scratch_jobs;           /* running jobs with scratch in use */

    int epfd, lfd, sigfd, timerfd, lockfd;
    bool accept_paused;         /* out of descriptors: until the next tick */
    char sockpath[4096];
    struct conn *conns;
    int nconns;
    bool stop;

    struct store *store;
    struct store_delta *pending;   /* counters not yet in LMDB */
    int npending, cpending;
    int64_t last_flush_ms;
    int64_t last_reclaim_ms;
    int64_t last_stats_ms;
    struct recon *recon;        /* reconciliation in flight */
    struct replicas *replicas;  /* the batch replica cache (replica.c) */
    struct streams *streams;    /* the node's GFS streams (streams.c) */
};

/* rpc.c: the uid of the configuration's SlurmUser, or (uid_t) -1 */
uid_t agent_slurm_uid (const struct tier_conf *conf);

/* server.c */
int server_init (struct agent *a, tier_error_t *error);
void server_fini (struct agent *a);
int server_run (struct agent *a);
/* A connected client socket, watched from now on (NULL: fd is still the
 * caller's); and closing one (replies it is owed are dropped). */
struct conn *server_conn_add (struct agent *a, int fd,
                              const struct ucred *cred);
void server_conn_close (struct agent *a, struct conn *c);

/* rxfd.c: descriptors clients send.  rxfd_check: 0 if fd lies on a
 * mount of the site's, as the client pid's mount namespace has it (asks
 * no file system; EPERM on a user's FUSE mount or one the client does
 * not have).  rxfd_drop: close it on uid's closer
 * thread, never on the loop.  rxfd_busy: uid has closes pending (accept
 * no more of its descriptors).  rxfd_closing: descriptors pending, and
 * of how many users.  rxfd_wait_idle: until every closer is done (-1
 * past timeout_ms). */
int rxfd_check (pid_t peer, int fd, tier_error_t *error);
void rxfd_drop (uid_t uid, int fd);
bool rxfd_busy (uid_t uid);
int rxfd_closing (int *users);
int rxfd_wait_idle (int timeout_ms);

/* rpc.c: handle one request.  Returns the response body (malloc'd), or
 * NULL with *deferred set when a handler will answer later
 * (server_reply).
 */
char *rpc_handle (struct agent *a, struct conn *c, const char *body,
                  size_t len, int *fds, int nfds, bool *deferred);

/* The caller's own running job on this node, from its process ancestry
 * (never from what it claims); -1 with errno ENOENT or EPERM.
 */
struct peer_job;
int rpc_caller_job (struct agent *a, struct conn *c, struct store_job *job,
                    struct peer_job *pj, tier_error_t *error);

/* What a handler returns when it answers later with server_reply. */
extern json_t *const RPC_DEFERRED;

/* A request's handler. */
typedef json_t *(*rpc_f) (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error);

/* userpol.c: requests from outside a job that follow the caller's user
 * policies (tierctl prefetch, tierctl mirror).  userpol_call reads them
 * (the policy freezer, as the user, off the loop), then runs fn with
 * c->upol set to them, and answers with its result (RPC_DEFERRED when
 * the read is under way).  A caller in a job, or a node without
 * SharedStateDir, needs no read: fn runs at once.  At most a few reads
 * per user at a time (EAGAIN past them).
 */
struct user_pols {
    const char *user; /* the caller's name ("" when in a job) */
    int kind;         /* POLMSG_* of policy_msg.h */
    const char *text; /* the policies (POLMSG_USER) or why not, or NULL */
};
json_t *userpol_call (struct agent *a, struct conn *c, rpc_f fn, json_t *req,
                      tier_error_t *error);
void userpol_conn_gone (struct agent *a, struct conn *c);

/* server.c: send a deferred reply (body is consumed; NULL: out of
 * memory, the connection is closed).  The connection may be closed by
 * this call.
 */
void server_reply (struct agent *a, struct conn *c, uint32_t id, char *body);
/* The same with a descriptor (closed once queued; -1: none).  A handler
 * that answers at once sets c->reply_fd instead. */
void server_reply_fd (struct agent *a, struct conn *c, uint32_t id, char *body,
                      int fd);
/* server.c: watch fd for input; fn is called from the loop. */
int server_watch (struct agent *a, int fd, void (*fn) (struct agent *));
/* a JSON error body {"errno": N, "error": "..."} (malloc'd) */
char *rpc_error_body (int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* ctr.c: counters accumulate in memory and reach LMDB every few seconds */
void ctr_add (struct agent *a, const struct store_job *job,
              enum tier_role role, enum tier_ctr ctr, uint64_t delta);
/* what a client reported (opens its interposer served from its own
 * cache): the job's and its batch's counters only, never the node's */
void ctr_add_reported (struct agent *a, const struct store_job *job,
                       enum tier_role role, enum tier_ctr ctr, uint64_t delta);
int ctr_flush (struct agent *a);
int ctr_get (struct agent *a, enum tier_scope scope, uint64_t id,
             struct tier_counters *c);
json_t *ctr_to_json (const struct tier_counters *c);

/* stats.c: per-batch snapshots for tierctl stats, node metrics */
void stats_tick (struct agent *a, bool force);
/* Always false now: child.c reaps the publishers (to be removed). */

/* stage.c: stage-in (its modules: stage.h) */
json_t *op_stage_in (struct agent *a, struct conn *c, json_t *req,
                     tier_error_t *error);
json_t *op_stage_restart (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error);
void stage_job_end (struct agent *a, const struct store_job *job);

/* replica.c: the batch replica cache (its modules: replica.h) */
int replica_init (struct agent *a);
/* Make the BB's directories and enable the cache; else r->why says why
 * and replica_tick tries again (a full BB, one mounted late). */
void replica_enable (struct agent *a);
void replica_fini (struct agent *a);
json_t *op_replica_open (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error);
json_t *op_replica_report (struct agent *a, struct conn *c, json_t *req,
                           tier_error_t *error);
json_t *op_replica_prefetch (struct agent *a, struct conn *c, json_t *req,
                             tier_error_t *error);
json_t *op_replica_evict (struct agent *a, struct conn *c, json_t *req,
                          tier_error_t *error);
json_t *op_replica_list (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error);
json_t *replica_status_json (struct agent *a);
uint64_t replica_used (struct agent *a);    /* bytes this node fetched */
struct stat;
/* The key of a replica of the file st describes: inode, size, mtime and
 * ctime (ns), not st_dev (it differs between clients of one GFS). */
void replica_key (const struct stat *st, char *key, size_t size);
void replica_conn_gone (struct agent *a, struct conn *c);
void replica_tick (struct agent *a);
int replica_flush (struct agent *a);

/* mirror.c: eager mode, fully prefetched batch directories bound into
 * the job's namespace */
void mirror_conn_gone (struct agent *a, struct conn *c);
/* rpc.c: c closed; registrations it waits for answer nobody */
void rpc_conn_gone (struct agent *a, struct conn *c);
json_t *op_replica_mirror (struct agent *a, struct conn *c, json_t *req,
                           tier_error_t *error);
/* A job's first registration on a node is answered within this: its
 * policy freeze takes 5 s at most, its mirror check what is left.  Below
 * the default AgentTimeout (10 s), so that the step gets its answer. */
#define AGENT_REGISTER_MS 7000
/* The job's mirrors to bind ("DIR=TREE:...", malloc'd, done's; NULL if
 * none), checked off the loop by deadline (tier_now_ms): done is called
 * exactly once, possibly before this returns.  job is needed only during
 * the call. */
typedef void (*mirror_binds_f) (struct agent *a, char *binds, void *arg);
void mirror_job_binds (struct agent *a, const struct store_job *job,
                       int64_t deadline, mirror_binds_f done, void *arg);
void mirror_drop (struct agent *a, uid_t uid, const char *key,
                  const char *path);

/* migrate.c: stage-out, the write cache's migrations to the GFS (what
 * its modules share is in migrate.h) */
int migrate_init (struct agent *a);
void migrate_fini (struct agent *a);  /* forget every job's migration */
json_t *op_job_stageout (struct agent *a, struct conn *c, json_t *req,
                         tier_error_t *error);
json_t *op_job_stageout_sync (struct agent *a, struct conn *c, json_t *req,
                              tier_error_t *error);
json_t *op_job_outputs (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error);
void migrate_job_end (struct agent *a, const struct store_job *job);
void migrate_job_end_unseen (struct agent *a, const struct store_job *job);
void migrate_conn_gone (struct agent *a, struct conn *c);
/* false: its children (migrators, manifest writers) are child.c's */
void migrate_tick (struct agent *a);
/* the node's migrations; failed files only of uid's jobs (all for root
 * and SlurmUser) */
json_t *migrate_status_json (struct agent *a, uid_t uid);
/* what the write caches of ended jobs whose outputs are not all on the
 * GFS yet held at their last syncs: uid's, or everyone's ((uid_t) -1).
 * A running job's write cache is its reservation (store_job.write_cache)
 * instead. */
uint64_t migrate_held_ended (struct agent *a, uid_t uid);
/* set the endpoint role's migrations_pending/failed of c to what this
 * node's migrators hold now for batch */
void migrate_gauges (struct agent *a, uint32_t batch,
                     struct tier_counters *c);

/* tiers.c */
void tiers_init (struct agent *a);
json_t *tiers_json (struct agent *a);
json_t *op_node_enable (struct agent *a, struct conn *c, json_t *req,
                        tier_error_t *error);

/* rpc.c */
/* the running jobs' NVDIMM reservations: scratch and write caches */
uint64_t agent_reserved (struct agent *a);
/* those of jobs other than except, the staged inputs and ended jobs'
 * write caches: what the NVDIMM tier holds for others */
uint64_t agent_nvdimm_taken (struct agent *a, uint32_t except);
/* stage.c: the NVDIMM bytes the stage-ins of running jobs hold (their
 * parts' totals), but part except_part of job except_job. */
uint64_t stage_bytes_held (struct agent *a, uint32_t except_job,
                           int except_part);

/* jobs.c: reconcile the registry with slurmctld after a restart */
bool agent_privileged (struct agent *a, uid_t uid);
int jobs_reconcile_start (struct agent *a);   /* an eventfd, or -1 */
int jobs_reconcile_finish (struct agent *a);  /* jobs reconciled */
int jobs_reclaim (struct agent *a);     /* namespaces of ended jobs */
/* The credentials for work on a job's data (lib/cred.h, TIER_CRED_DATA):
 * its uid, gid and the group list Slurm gave it, stored when a step
 * registered; for a job with none yet (only its prolog ran), the user's
 * groups from NSS.  -1 with errno if neither is known. */
struct tier_cred;
int jobs_cred (const struct store_job *job, struct tier_cred *cred);
void jobs_sample (struct agent *a);     /* peak scratch use */

#endif /* !TIER_AGENT_H */

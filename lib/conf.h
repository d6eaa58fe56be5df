/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* conf.h - tier.conf: "Key = value" lines like slurm.conf.
 *
 * Libc only: the plugin (loaded into srun and slurmstepd) parses it too.
 * Keys are case-insensitive; "#" starts a comment; an unknown key, a
 * repeated key or a bad value is an error naming file:line.  In values,
 * "%n" is the node's NodeName (given by the caller: tierd -N, or
 * SLURMD_NODENAME inside Slurm), "%u" the user (expanded later, per use,
 * by tier_conf_expand_user) and "%%" a percent sign.
 * Why not inih, libconfig or Slurm's parser: the plugin links nothing but
 * libc, and libslurm's slurm_s_p_parse_file is exported but not declared
 * in Slurm's public headers.
 */
#ifndef TIER_CONF_H
#define TIER_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TIER_NODENAME_MAX 64

struct tier_conf {
    char *socket_dir;           /* SocketDir: holds tierd.sock */
    char *state_dir;            /* StateDir: node-local state (LMDB) */
    char *namespace_dir;        /* NamespaceDir: job namespace holders */
    char *shared_state_dir;     /* SharedStateDir: per-user state, stats */
    char *log_file;             /* LogFile: "" = syslog */
    int log_level;              /* LogLevel */
    char *nvdimm_dir;           /* NvdimmDir: node-local scratch tier */
    uint64_t nvdimm_capacity;   /* NvdimmCapacity (0: no reservations) */
    uint64_t scratch_default;   /* ScratchDefaultSize (0: NvdimmCapacity) */
    bool gfs_root_squash;       /* GfsRootSquash: the GFS squashes root */
    char *bb_dir;               /* BBDir: burst buffer (shared by nodes) */
    uint64_t bb_capacity;       /* BBCapacity: this node's BB budget */
    uint64_t bb_min_free;       /* BBMinFree: keep this much of the BB free */
    uint64_t bb_user_max;       /* BBUserMax: a user's replicas on this
                                 * node's budget, at most (0: no cap) */
    uint64_t write_cache_size;  /* WriteCacheSize: one job's write cache
                                    * on the node, at most (0: a quarter
                                    * of NvdimmCapacity) */
    uint64_t write_cache_user_max; /* WriteCacheUserMax: what one user's
                                    * write caches on this node may hold
                                    * before a new job gets none (0: no
                                    * limit) */
    char *user_cgroup_dir;         /* UserCgroupDir: where in each cgroup
                                 * hierarchy the agent charges the work it
                                 * does for a user ("" = not at all) */
    uint64_t user_cgroup_memory;   /* UserCgroupMemory: that cgroup's memory
                                  * limit (0: none) */
    unsigned user_cgroup_tasks;    /* UserCgroupTasks: its pids.max */
    uint64_t bb_lock_stale;     /* BBLockStale (s): a fetch lock whose
                                 * heartbeat stopped this long is broken */
    unsigned gfs_streams;       /* GfsStreams: concurrent GFS streams (a
                                 * node's replica fetches, stage-in copies
                                 * and stage-out migrations together) */
    uint64_t user_bandwidth;    /* UserBandwidth: bytes/s of one user's
                                 * GFS streams on a node (0: unlimited) */
    unsigned clients_per_user;  /* ClientsPerUser: a user's connections to
                                 * the agent at once (root: no limit) */
    unsigned fetches_per_user;  /* FetchesPerUser: a user's replica fetches
                                 * queued on the node (not yet running) */
    uint64_t replica_wait;      /* ReplicaWait (s): an open waits this long
                                 * for a replica, then reads the GFS */
    char **allowed_roots;       /* AllowedRoots: comma-separated */
    int allowed_roots_count;
    char *tierd_path;           /* TierdPath: the agent binary */
    char *slurm_user;           /* SlurmUser: may act on every job */
    char *slurm_conf;           /* SlurmConf: slurm.conf for the agent */
    bool enabled;               /* Enabled: no = every job runs untiered */
    uint64_t agent_timeout_ms;  /* AgentTimeout: client RPC timeout */
    uint64_t stage_in_timeout;  /* StageInTimeout (s): tasks wait this long */
    uint64_t stage_out_timeout; /* StageOutTimeout (s): the epilog waits this
                                 * long for outputs to reach the GFS */
    uint64_t keep_timeout;      /* KeepTimeout (s): the epilog's keep copy
                                 * of each scratch directory is killed
                                 * past this */
    uint64_t stall_timeout;     /* StallTimeout (s): a stage-in copier or a
                                 * replica fetcher that moved no data this
                                 * long is abandoned (0: never) */
    uint64_t stats_interval_ms; /* StatsInterval: snapshots this often */
    uint64_t stats_retention;   /* StatsRetention (s): ended jobs' stats */
    char *metrics_file;         /* MetricsFile: node_exporter textfile */
    char *site_policy_dir;      /* SitePolicyDir: site policies (*.json) */
    char *endpoint_ca_file;     /* EndpointCAFile: PEM CAs for https
                                 * endpoints ("": the system's store) */
    uint64_t endpoint_part_size;        /* EndpointPartSize: S3 multipart
                                         * parts (0: the library's 8 MiB) */
    uint64_t endpoint_multipart;        /* EndpointMultipartThreshold: S3
                                         * uploads above it are multipart
                                         * (0: the library's 64 MiB) */
    char *node;                 /* the NodeName %n expanded to */
};

/* A configuration with every default set (NULL on ENOMEM). */
struct tier_conf *tier_conf_create (const char *node);
void tier_conf_destroy (struct tier_conf *conf);

/* Parse text named name (a file name, for messages) into conf.
 * Returns 0, or -1 with error set to "name:line: problem".
 */
int tier_conf_parse (struct tier_conf *conf, const char *text,
                     const char *name, tier_error_t *error);

/* Read and parse path.  With check_owner, it is opened under lib/trust.h's
 * ROOT_FILE rule: a regular file owned by root and not writable by group
 * or others, no symlink, in directories nobody else may change (root
 * code must not take configuration from a file a user could change).
 */
int tier_conf_load (struct tier_conf *conf, const char *path,
                    bool check_owner, tier_error_t *error);

/* Expand %u (user) and %% in a configured value into out.
 * Returns 0, or -1 with errno ENAMETOOLONG/EINVAL.
 */
int tier_conf_expand_user (const char *value, const char *user, char *out,
                           size_t size);

/* Expand %n (node) and %% in a path such as the plugin's conf= argument
 * into out.  Returns 0, or -1 with errno EINVAL (another %-sequence, or
 * %n and no valid node) or ENAMETOOLONG.
 */
int tier_conf_expand_node (const char *value, const char *node, char *out,
                           size_t size);

/* True if name is a valid NodeName for %n ([A-Za-z0-9._-], 1..63). */
bool tier_conf_nodename_valid (const char *name);

/* The socket path: SocketDir/tierd.sock. */
int tier_conf_socket_path (const struct tier_conf *conf, char *out,
                           size_t size);

#endif /* !TIER_CONF_H */

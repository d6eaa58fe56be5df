/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* bcache.h - the block cache in the agent: jobs' write logs and their
 * drain children (bcache.c, doc/block-cache.md) */
#ifndef TIER_AGENT_BCACHE_H
#define TIER_AGENT_BCACHE_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/error.h"

struct agent;
struct conn;

json_t *op_blog_open (struct agent *a, struct conn *c, json_t *req,
                      tier_error_t *error);
json_t *op_blog_flush (struct agent *a, struct conn *c, json_t *req,
                       tier_error_t *error);
json_t *op_blog_sync (struct agent *a, struct conn *c, json_t *req,
                      tier_error_t *error);
void bcache_tick (struct agent *a);
void bcache_conn_gone (struct agent *a, struct conn *c);
/* The node's write logs: uid's jobs' (all for root and SlurmUser). */
json_t *bcache_status_json (struct agent *a, uid_t uid);
/* NVDIMM bytes the write logs of jobs other than except take. */
uint64_t bcache_held (struct agent *a, uint32_t except);

#endif /* !TIER_AGENT_BCACHE_H */

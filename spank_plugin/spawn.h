/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* spawn.h - the plugin's way to the node's agent (libc only) */
#ifndef TIER_SPANK_SPAWN_H
#define TIER_SPANK_SPAWN_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/conf.h"
#include "lib/error.h"

/* One request to the agent of conf's node; *reply is malloc'd. */
int spawn_call (const struct tier_conf *conf, const char *body, char **reply,
                int timeout_ms, tier_error_t *error);

/* The same; *unreachable (if set) tells a failure to reach the agent
 * (no socket, refused, closed before it answered: it died or is
 * restarting) from an error the agent answered or a timeout. */
int spawn_call_ex (const struct tier_conf *conf, const char *body, char **reply,
                   int timeout_ms, bool *unreachable, tier_error_t *error);

/* spawn_call, asked again while no agent answers (none listens, or it
 * closed the connection before it answered: it died or is restarting),
 * with an agent started where the plugin starts them, for AgentTimeout:
 * a step's registration, stage-in and end must not fail because the
 * agent was restarting.  Only for requests the agent handles
 * idempotently (one it handled before it died, asked again, does what it
 * did).  A timeout or an error the agent answered ends it at once.  A
 * success after retries is logged (job_id, what) to the slurmd log. */
int spawn_call_sure (const struct tier_conf *conf, const char *conf_path,
                     uint32_t job_id, const char *what, const char *body,
                     char **reply, tier_error_t *error);
/* The same, each try with its own receive timeout (a request that
 * waits: a step's output sync). */
int spawn_call_sure_ex (const struct tier_conf *conf, const char *conf_path,
                        uint32_t job_id, const char *what, const char *body,
                        char **reply, int timeout_ms, tier_error_t *error);

/* 0 if an agent answers a ping within timeout_ms. */
int spawn_ping (const struct tier_conf *conf, int timeout_ms,
                tier_error_t *error);

/* Start TierdPath detached from the caller (see spawn.c). */
int spawn_start (const struct tier_conf *conf, const char *conf_path,
                 const char *node, tier_error_t *error);

/* Ping; if nothing answers, spawn and wait up to timeout_ms. */
int spawn_ensure (const struct tier_conf *conf, const char *conf_path,
                  const char *node, int timeout_ms, tier_error_t *error);

#endif /* !TIER_SPANK_SPAWN_H */

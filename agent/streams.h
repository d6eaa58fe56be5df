/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* streams.h - the node's GFS streams (see streams.c) */
#ifndef TIER_AGENT_STREAMS_H
#define TIER_AGENT_STREAMS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

enum streams_kind {
    STREAMS_REPLICA,            /* a replica fetch (agent's child) */
    STREAMS_STAGE_IN,           /* a stage-in copier (the user's) */
    STREAMS_STAGE_OUT,          /* a stage-out migrator (the user's) */
};

const char *streams_kind_name (enum streams_kind kind);

/* The choice among waiting requests: the one whose user holds the fewest
 * streams, then whose user was served least recently (served: the grant
 * number of the user's last grant, 0 never), then the oldest (seq).
 * Returns the index of the winner in c[0..n), or -1 if n is 0. */
struct streams_cand {
    unsigned held;
    uint64_t served;
    uint64_t seq;
};
int streams_pick (const struct streams_cand *c, int n);

int streams_init (struct agent *a);     /* after server_init */
void streams_fini (struct agent *a);
void streams_tick (struct agent *a);    /* every second: reload, rates */
void streams_event (struct agent *a, int slot);         /* server.c */
json_t *streams_status_json (struct agent *a, uid_t uid);

/* The user's bucket (UserBandwidth), shared with the processes forked
 * after this call; NULL if there is none (out of memory). */
struct tier_copy_limit *streams_limit (struct agent *a, uid_t uid,
                                       const char *user);

/* Local tickets (replica fetches): go (a, arg) is called when the
 * stream is granted -- maybe from within this call -- and the holder
 * gives it back with streams_done.  *ticket is set before go is called,
 * and cleared by streams_done.  Without memory, go is called at once
 * with *ticket NULL (no stream: streams_done does nothing). */
struct stream_ticket;
typedef void (*streams_go_f) (struct agent *a, void *arg);
void streams_want (struct agent *a, uid_t uid, enum streams_kind kind,
                   const char *what, streams_go_f go, void *arg,
                   struct stream_ticket **ticket);
void streams_done (struct agent *a, struct stream_ticket **ticket);

/* Remote tickets (workers that run as the user): the worker's end of a
 * new channel, to be inherited by exactly one process (the agent's copy
 * is closed by the caller after fork), or -1: the worker then runs
 * without streams (streams_take returns 1). */
int streams_client (struct agent *a, uid_t uid, const char *user,
                    enum streams_kind kind, const char *what);
/* The same, and the ticket's id in *id (never 0), for streams_revoke. */
int streams_client_id (struct agent *a, uid_t uid, const char *user,
                       enum streams_kind kind, const char *what, uint64_t *id);
/* The worker of ticket id is stuck (killed, it does not end, and keeps
 * its end open) and abandoned: take back what it holds or waits for, and
 * log why.  true if it was revoked; false if it had ended (or its worker
 * just closed its end: then it is freed without a word). */
bool streams_revoke (struct agent *a, uint64_t id, const char *why);
/* In a forked child that is no worker of these channels: close the
 * agent's ends it inherited (so that a worker sees EOF when the agent
 * dies). */
void streams_close_agent_ends (struct agent *a);

/* In a forked child: close every descriptor from 3 on but keep[0..n)
 * (entries < 0 are ignored). */
void streams_close_except (const int *keep, int n);

/* In the worker: its channel (-1: none) and its user's bucket. */
void streams_worker_init (int fd, struct tier_copy_limit *limit);
struct tier_copy_limit *streams_worker_limit (void);
/* Wait for a stream (queued (arg, true) when told to wait, (arg, false)
 * when it comes); 0 when granted (or held already), 1 when there is no
 * agent to ask (go on without one).  streams_give gives it back. */
int streams_take (void (*queued) (void *arg, bool on), void *arg);
void streams_give (void);

#endif /* !TIER_AGENT_STREAMS_H */

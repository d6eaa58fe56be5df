/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* replica_msg.h - the messages of the replica cache's children
 *
 * Two channels (agent/chmsg.h: the client protocol's frames, a JSON body
 * {"t": NAME, "v": REPMSG_VERSION, ...}), one enum for both, and each
 * channel's table names only its own messages: a message on the wrong
 * channel is refused as unknown.
 *
 * The fetcher (root; replica_fetch.c) -> the agent, progress while it
 * waits or copies and one message at its end, repmsg_fetch_proto:
 *   progress {bytes}       alive: bytes copied so far (at most one a
 *                          second, for the agent's stall watchdog)
 *   copied {bytes}         this node copied the replica (bytes read)
 *   found {}               another node published it meanwhile
 *   failed {error}         no replica: why (the opens read the GFS)
 *
 * The mirror walker (the user's; mirror.c) -> the agent, one message,
 * repmsg_walk_proto:
 *   manifest {bytes}       the walk's lines, unsorted, as one descriptor:
 *                          a sealed memfd of exactly bytes bytes
 *                          (chmsg_text_fd; a manifest is far larger than
 *                          a message may be)
 *   error {error}          why the walk failed
 *
 * The mirror builder (root; mirror.c: it runs the walker, then builds
 * and publishes the mirror) -> the agent, one message,
 * repmsg_mirror_proto:
 *   built {files, bytes}   the mirror is in place
 *   error {error}          why not
 *
 * Owns the wire format only: calls jansson and chmsg.h, nothing of the
 * agent, so that both ends and the unit test share it.
 */
#ifndef TIER_AGENT_REPLICA_MSG_H
#define TIER_AGENT_REPLICA_MSG_H

#include <jansson.h>
#include <stdint.h>

#include "lib/error.h"
#include "chmsg.h"

#define REPMSG_VERSION 1
#define REPMSG_MANIFEST_MAX (64u << 20) /* a manifest's bytes, at most */

enum repmsg_type {
    /* the fetcher's */
    REPMSG_COPIED = 1,
    REPMSG_FOUND,
    REPMSG_FAILED,
    /* the walker's */
    REPMSG_MANIFEST,
    REPMSG_WALK_ERROR,
    /* the fetcher's, before its result */
    REPMSG_PROGRESS,
    /* the mirror builder's */
    REPMSG_BUILT,
    REPMSG_BUILD_ERROR,
    /* the mirror checker's (at a job's start) */
    REPMSG_BINDS,
};

/* Every member of every message; a message uses those listed above (the
 * rest are zero).  Decoded strings point into the body they came from.
 */
struct repmsg {
    enum repmsg_type type;
    uint64_t bytes;    /* copied, manifest, progress, built */
    uint64_t files;    /* built */
    const char *error; /* failed, error */
    const char *binds; /* binds: "DIR=TREE:..." */
};

extern const struct chmsg_proto repmsg_fetch_proto;
extern const struct chmsg_proto repmsg_walk_proto;
extern const struct chmsg_proto repmsg_mirror_proto;
extern const struct chmsg_proto repmsg_binds_proto;

#define REPMSG_BINDS_MAX 65536 /* a binds message's text, at most */

/* The channel whose message type is (NULL if none). */
const struct chmsg_proto *repmsg_proto (int type);

/* The body of m (a new reference) for chmsg_send; NULL with errno EINVAL
 * (an unknown type, no error text, a count past INT64_MAX, a manifest
 * past REPMSG_MANIFEST_MAX; or out of memory).
 */
json_t *repmsg_pack (const struct repmsg *m);

/* Fill m from a body that chmsg_decode returned for type (body stays the
 * caller's; m->error points into it).  -1 with errno EPROTO and a text
 * if a member is missing, of another type or out of range.  Members it
 * does not know are ignored.
 */
int repmsg_unpack (int type, json_t *body, struct repmsg *m,
                   tier_error_t *error);

/* In a child: send m on its channel to the parent (blocking), with the
 * descriptor fd beside it (-1: none; a manifest needs its memfd).  0, or
 * -1 with errno (EPIPE: the parent is gone).
 */
int repmsg_send (int chan, const struct repmsg *m, int fd);

#endif /* !TIER_AGENT_REPLICA_MSG_H */

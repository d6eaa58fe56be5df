/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* stage_msg.h - the messages of stage-in's children
 *
 * Three channels (agent/chmsg.h: the client protocol's frames, a JSON
 * body {"t": NAME, "v": STAGEMSG_VERSION, ...}), one enum for all of
 * them, and each channel's table names only its own messages: a message
 * on the wrong channel is refused as unknown.
 *
 * The copier (the user's) -> the stager (root), stagemsg_copier_proto:
 *   total {total}              bytes to copy, known so far
 *   progress {done}            bytes copied
 *   queued {on}                waiting for a GFS stream (true), or no
 *                              longer (false)
 *   made {k, dev, ino, ref}    item k's path is an empty file tier made
 *                              as its mount point (or one that another
 *                              job of the user made); ref: the job's
 *                              reference to it in stage-refs, "" for none
 *   source {k, path}           item k (from the GFS) is the file or tree
 *                              at path, symlinks resolved (the tasks bind
 *                              its copy there, and only there)
 *   error {error}              why the copy fails (it exits)
 *   done {files, bytes, gfs, meta}   all copied: files, bytes, bytes read
 *                              from the GFS, GFS metadata operations
 *
 * The stager -> the agent, stagemsg_stager_proto:
 *   log {level, text}          a line for the agent's log (a child has no
 *                              log of its own)
 *
 * The mount point remover (the user's, at job end) -> the agent,
 * stagemsg_unmake_proto:
 *   removed {removed}          how many of the files it removed
 *
 * Owns the wire format only: calls jansson and chmsg.h, nothing of the
 * agent, so that both ends and the unit test share it.
 */
#ifndef TIER_AGENT_STAGE_MSG_H
#define TIER_AGENT_STAGE_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "chmsg.h"

#define STAGEMSG_VERSION 1
#define STAGEMSG_REF_MAX 128 /* a reference's name, with its NUL */

enum stagemsg_type {
    /* the copier's */
    STAGEMSG_TOTAL = 1,
    STAGEMSG_PROGRESS,
    STAGEMSG_QUEUED,
    STAGEMSG_MADE,
    STAGEMSG_ERROR,
    STAGEMSG_DONE,
    STAGEMSG_SOURCE,
    /* the stager's */
    STAGEMSG_LOG,
    /* the mount point remover's */
    STAGEMSG_REMOVED,
};

/* Every member of every message; a message uses those listed above (the
 * rest are zero).  Decoded strings point into the body they came from.
 */
struct stagemsg {
    enum stagemsg_type type;
    uint64_t total;                   /* total */
    uint64_t done;                    /* progress */
    bool on;                          /* queued */
    int k;                            /* made, source: the item */
    const char *path;                 /* source */
    uint64_t dev, ino;                /* made: the file */
    const char *ref;                  /* made: "" for none */
    const char *error;                /* error */
    uint64_t files, bytes, gfs, meta; /* done */
    int level;                        /* log: a syslog level, 0..7 */
    const char *text;                 /* log */
    int removed;                      /* removed */
};

extern const struct chmsg_proto stagemsg_copier_proto;
extern const struct chmsg_proto stagemsg_stager_proto;
extern const struct chmsg_proto stagemsg_unmake_proto;

/* The channel whose message type is (NULL if none). */
const struct chmsg_proto *stagemsg_proto (int type);

/* The body of m (a new reference) for chmsg_send; NULL with errno EINVAL
 * (an unknown type, a string missing, a ref with '/' or too long, a
 * count past INT64_MAX, a level past 7; or out of memory).
 */
json_t *stagemsg_pack (const struct stagemsg *m);

/* Fill m from a body that chmsg_decode returned for type (body stays
 * the caller's; m's strings point into it).  -1 with errno EPROTO and a
 * text if a member is missing, of another type or out of range (a
 * negative count, a level past 7, a ref with '/' or too long).  Members
 * it does not know are ignored (a later version may add optional ones).
 */
int stagemsg_unpack (int type, json_t *body, struct stagemsg *m,
                     tier_error_t *error);

/* In a child: send m on its channel to the parent (blocking: the parent
 * always reads).  0, or -1 with errno (EPIPE: the parent is gone).
 */
int stagemsg_send (int fd, const struct stagemsg *m);

#endif /* !TIER_AGENT_STAGE_MSG_H */

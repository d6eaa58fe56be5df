/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* migrate_msg.h - the messages between the agent and a migrator
 *
 * One channel per migrator (agent/chmsg.h: the client protocol's frames,
 * a JSON body {"t": NAME, "v": MIGMSG_VERSION, ...}).  The agent sends
 * commands, the migrator answers with results; every message is one
 * value of enum migmsg_type, and its members are the fields of struct
 * migmsg that the table in migrate_msg.c lists for it.  Times are
 * [seconds, nanoseconds]; paths (rel) are plain JSON strings.
 *
 * Commands (agent -> migrator):
 *   sync {seq, flush}          publish what the write cache holds now
 *                              (flush: retry failures at once); answered
 *                              by synced
 *   dirty {k, rel}             a file was closed after writing, or renamed
 *                              into place
 *   scan {k, rel}              a new directory: take what it holds
 *   quit {}                    every output is on the GFS: exit
 *   noted {k, rel}             the answer to publishing: recorded
 * and the resume state of a restarted agent (its records), handed over
 * at the fork (struct migmsg_batch), before any command:
 *   known {k, rel, ours, ino, gfs_size, gfs_mtime, gfs_ctime, size,
 *          mtime}              published to the GFS, this version
 *   known_object {k, rel, size, mtime, etag}   published to its object
 *   claim {k, rel}             an upload of the object had begun
 *   upload {k, rel, upload_id, part_size, size, mtime_ns}
 *   part {k, rel, n, etag}     a multipart upload and its parts
 *   intent {k, rel, ours, size, mtime, sha256, ino, gfs_size}
 *                              a publishing that was recorded, whose
 *                              end may not be: the GFS file of inode
 *                              ino and size gfs_size is this version
 *
 * Results (migrator -> agent):
 *   ready {}                   set up: the directories are open
 *   error {error}              a setup failure (it exits) or a refused
 *                              command
 *   done {k, rel, size, sha256, ours, ino, gfs_size, gfs_mtime,
 *         gfs_ctime, us, first}   published to the GFS
 *   failed {k, rel, errno, error, first}   not published (kept, retried)
 *   conflict {k, rel, side?}   somebody else's version is there; this
 *                              job's is at side (none: it could not be
 *                              saved)
 *   gone {k, rel}              the name is no output any more
 *   synced {seq, pending, failed, conflicts, size?}   size: the bytes
 *                              the write cache holds (its files' blocks)
 *   claimed {k, rel}           an upload of the object begins
 *   upload_begun {k, rel, upload_id, part_size, size, mtime_ns}
 *   part_done {k, rel, n, etag}
 *   upload_gone {k, rel}       the multipart upload is finished or gone
 *   object_done {k, rel, size, mtime, sha256, us, first, etag}
 *   alive {}                   a beat: it is not stuck (at least every
 *                              StallTimeout / 4 while it runs or copies)
 *   queued {on}                it waits for a GFS stream (on), or has
 *                              one now: a wait that is no stall
 *   publishing {k, rel, ours, size, mtime, sha256, ino, gfs_size}
 *                              the temporary of this version is complete
 *                              as inode ino (rename keeps it): the
 *                              migrator renames it only once the agent
 *                              answered noted (a crash in between leaves
 *                              a file the next migrator knows as its own)
 *
 * Owns the wire format only: calls jansson and chmsg.h, nothing of the
 * agent, so that both ends and the unit test share it.
 */
#ifndef TIER_AGENT_MIGRATE_MSG_H
#define TIER_AGENT_MIGRATE_MSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lib/error.h"
#include "chmsg.h"

#define MIGMSG_VERSION 1

enum migmsg_type {
    /* commands */
    MIGMSG_SYNC = 1,
    MIGMSG_DIRTY,
    MIGMSG_SCAN,
    MIGMSG_QUIT,
    MIGMSG_KNOWN,
    MIGMSG_KNOWN_OBJECT,
    MIGMSG_CLAIM,
    MIGMSG_UPLOAD,
    MIGMSG_PART,
    MIGMSG_INTENT,
    MIGMSG_NOTED,
    /* results */
    MIGMSG_READY,
    MIGMSG_ERROR,
    MIGMSG_DONE,
    MIGMSG_FAILED,
    MIGMSG_CONFLICT,
    MIGMSG_GONE,
    MIGMSG_SYNCED,
    MIGMSG_CLAIMED,
    MIGMSG_UPLOAD_BEGUN,
    MIGMSG_PART_DONE,
    MIGMSG_UPLOAD_GONE,
    MIGMSG_OBJECT_DONE,
    MIGMSG_PUBLISHING,
    MIGMSG_ALIVE,
    MIGMSG_QUEUED,
};
#define MIGMSG_NTYPES MIGMSG_QUEUED

/* Who sends it. */
enum migmsg_dir {
    MIGMSG_COMMAND = 1, /* the agent */
    MIGMSG_RESULT,      /* the migrator */
};

/* Every member of every message; a message uses the ones the table
 * gives it (the rest are zero).  Decoded strings point into the body
 * they came from.
 */
struct migmsg {
    enum migmsg_type type;
    int k;                          /* the output directory (index) */
    const char *rel;                /* the file, relative to it */
    uint32_t seq;                   /* sync, synced */
    bool flush;                     /* sync: retry failures now */
    int pending, failed, conflicts; /* synced */
    const char *error;              /* error, failed */
    int err;                        /* failed: an errno value */
    bool first;                     /* the name's first publication */
    bool ours;                      /* created on the GFS by this job */
    int64_t size;                   /* the cached file's size */
    struct timespec mtime;          /* and mtime */
    const char *sha256;             /* of the cached file (hex) */
    int64_t ino, gfs_size;          /* what it became on the GFS */
    struct timespec gfs_mtime, gfs_ctime;
    int64_t us;            /* how long hashing and copying took */
    const char *etag;      /* an object's or a part's ETag */
    const char *upload_id; /* a multipart upload */
    int64_t part_size, mtime_ns;
    uint32_t n;       /* a part's number, from 1 */
    const char *side; /* conflict: where this job's version is
                                 * (NULL: nowhere) */
    bool on;          /* queued: waits for a stream */
};

extern const struct chmsg_proto migmsg_proto;

/* The direction of a type (0 if it is none). */
enum migmsg_dir migmsg_dir (int type);

/* The body of m (a new reference), for chmsg_send or child_send; NULL
 * with errno EINVAL (a type unknown, a string member missing) or ENOMEM.
 */
json_t *migmsg_pack (const struct migmsg *m);

/* Fill m from a body that chmsg_decode returned (type is its enum
 * value; body stays the caller's, and m's strings point into it).  -1
 * with errno EPROTO and a text if the type is not one that dir sends, or
 * a member is missing or of another type.  Members it does not know are
 * ignored (a later version may add optional ones).
 */
int migmsg_unpack (int type, json_t *body, enum migmsg_dir dir,
                   struct migmsg *m, tier_error_t *error);

/* The whole text of m as chmsg_encode makes it (malloc'd), or NULL. */
char *migmsg_encode (const struct migmsg *m);

/* In the migrator: send m (blocking: the agent always reads).  0, or -1
 * with errno (EPIPE: the agent is gone).
 */
int migmsg_send (int fd, const struct migmsg *m);

/* Messages kept in order as their encoded texts: the resume state that
 * the agent builds from its records before the fork, and that the
 * migrator reads from its copy of the agent's memory.  Unlike the
 * channel it holds any number of them (one per output of the job), and
 * none can come after a command.
 */
struct migmsg_batch {
    char *buf; /* NUL-terminated texts, one after the
                                 * other */
    size_t len, cap;
    int count;
};

/* Append m: 0, or -1 with errno. */
int migmsg_batch_add (struct migmsg_batch *b, const struct migmsg *m);

/* The message at *off (start with 0): its type and body (the caller's
 * to decref), and *off moves on.  1 if there is one, 0 at the end, -1
 * with errno EPROTO and a text if it does not decode.
 */
int migmsg_batch_next (const struct migmsg_batch *b, size_t *off, int *type,
                       json_t **body, tier_error_t *error);

void migmsg_batch_fini (struct migmsg_batch *b);

#endif /* !TIER_AGENT_MIGRATE_MSG_H */

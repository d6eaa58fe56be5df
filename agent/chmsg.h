/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* chmsg.h - typed messages between the agent and its children
 *
 * Every channel between tierd and a process it forked (the migrator, the
 * stager and its copier, the replica fetcher, the mirror walker, the
 * policy freezer, the statistics publisher, the manifest writer) is an
 * AF_UNIX stream socketpair carrying the frames of the client protocol
 * (lib/proto.h: magic, version, type, id, length, then the body, with
 * descriptors as SCM_RIGHTS).  The parent sends TIER_MSG_REQUEST frames,
 * the child TIER_MSG_RESPONSE frames.  A body is a JSON object:
 *
 *     {"t": "done", "v": 1, ...the message's own members...}
 *
 * "t" names the message: each channel has a C enum of its messages and a
 * table (struct chmsg_proto) that maps each value to its name, so both
 * ends switch on an enum and read named members with json_unpack: no
 * record lines, no sscanf.  "v" is the channel's version; a message of
 * another version, an unknown name or a malformed body is refused with
 * EPROTO and a text that names the channel and the message.
 *
 * Messages of the child are short (a file name, counts, an error text):
 * CHMSG_MAX bounds them, far below TIER_MSG_MAX.
 */
#ifndef TIER_AGENT_CHMSG_H
#define TIER_AGENT_CHMSG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/proto.h"

#define CHMSG_MAX (256 * 1024)

struct chmsg_type {
    int type;                   /* a value of the channel's enum (> 0) */
    const char *name;           /* its name on the wire */
};

struct chmsg_proto {
    const char *channel;        /* "migrator", shown in errors */
    int version;
    const struct chmsg_type *types;
    int ntypes;
};

#define CHMSG_NTYPES(t) ((int) (sizeof (t) / sizeof ((t)[0])))

/* The name of type in proto ("?" if it has none). */
const char *chmsg_name (const struct chmsg_proto *p, int type);

/* A message of a known type whose body is wrong: -1 with errno EPROTO
 * and "CHANNEL channel: message 'NAME' WHY[: DETAIL]" (p NULL: fallback
 * names the channel).  For each *_msg.c's unpack. */
int chmsg_refuse (const struct chmsg_proto *p, const char *fallback, int type,
                  const char *why, const char *detail, tier_error_t *error);

/* Encode {"t": NAME, "v": VERSION} + the members of body (consumed; NULL:
 * none) into a malloc'd text.  NULL with errno EINVAL (not a type of the
 * channel, or body is not an object) or ENOMEM.
 */
char *chmsg_encode (const struct chmsg_proto *p, int type, json_t *body);

/* Decode a received body: *type gets the enum value, *body the object
 * (the caller decrefs it; "t" and "v" are removed).  -1 with errno
 * EPROTO and a text on anything else.
 */
int chmsg_decode (const struct chmsg_proto *p, const char *text, size_t len,
                  int *type, json_t **body, tier_error_t *error);

/* Blocking send of one message (body consumed) with nfds descriptors,
 * within timeout_ms (-1: none).  The frame type is TIER_MSG_REQUEST from
 * the parent and TIER_MSG_RESPONSE from the child (from_child).
 */
int chmsg_send (int fd, const struct chmsg_proto *p, bool from_child,
                int type, json_t *body, const int *fds, int nfds,
                int timeout_ms, tier_error_t *error);

/* Blocking receive of one message within timeout_ms (-1: none); fds and
 * nfds may be NULL when maxfds is 0.  ECONNRESET (or ENODATA between
 * messages) when the peer has gone.
 */
int chmsg_recv (int fd, const struct chmsg_proto *p, int *type, json_t **body,
                int *fds, int *nfds, int maxfds, int timeout_ms,
                tier_error_t *error);

/* In a child: send with a format, as json_pack would build the body
 * (NULL: no members); errors are dropped (the parent sees the channel
 * close).  Returns 0 or -1.
 */
int chmsg_tell (int fd, const struct chmsg_proto *p, int type,
                const char *fmt, ...);

/* A text too large for a message (a policy set, a mirror's manifest)
 * travels beside it as one descriptor: a sealed memfd, which cannot
 * change once sent and whose reading never waits on a file system.
 * chmsg_text_fd makes one holding the len bytes of text (name: what
 * /proc shows); -1 with errno.
 */
int chmsg_text_fd (const char *name, const char *text, size_t len);

/* Read such a text: fd must be a sealed memfd of exactly size bytes, and
 * size at most max.  *text is malloc'd and NUL-terminated.  -1 with
 * errno EPROTO (not a sealed memfd of that size), EIO (it cannot be
 * read) or ENOMEM.
 */
int chmsg_text_read (int fd, uint64_t size, uint64_t max, char **text);

#endif /* !TIER_AGENT_CHMSG_H */

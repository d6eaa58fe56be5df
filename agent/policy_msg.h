/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* policy_msg.h - the messages of the policy freezer
 *
 * The freezer (policy_freezer.c: a child with the user's own
 * credentials) answers the agent with one message (agent/chmsg.h: the
 * client protocol's frames, a JSON body {"t": NAME, "v": POLMSG_VERSION,
 * ...}), polmsg_proto:
 *
 *   none {}            the user has no frozen set for the job and no
 *                      policies of their own
 *   frozen {bytes}     the job's frozen set in force
 *   user {bytes}       the user's own policies (policies.json)
 *   error {error}      why it could not tell
 *
 * frozen and user carry their text as one descriptor: a sealed memfd of
 * exactly bytes bytes (a set may be as large as a frame's whole body,
 * TIER_MSG_MAX, so it cannot be a JSON member).  The agent reads it from
 * memory: it never waits on the freezer's file system, and refuses any
 * other kind of descriptor.
 *
 * Owns the wire format only: calls jansson, libc and chmsg.h, nothing of
 * the agent, so that both ends and the unit test share it.
 */
#ifndef TIER_AGENT_POLICY_MSG_H
#define TIER_AGENT_POLICY_MSG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "chmsg.h"

#define POLMSG_VERSION 1
#define POLMSG_TEXT_MAX (4 * 1024 * 1024) /* a text, at most */

enum polmsg_type {
    POLMSG_NONE = 1,
    POLMSG_FROZEN,
    POLMSG_USER,
    POLMSG_ERROR,
};

struct polmsg {
    enum polmsg_type type;
    uint64_t bytes;    /* frozen, user: the text's length */
    const char *error; /* error (points into the body) */
};

extern const struct chmsg_proto polmsg_proto;

/* The body of m (a new reference) for chmsg_send; NULL with errno EINVAL
 * (an unknown type, no error text, bytes past POLMSG_TEXT_MAX; or out of
 * memory).
 */
json_t *polmsg_pack (const struct polmsg *m);

/* Fill m from a body that chmsg_decode returned for type (body stays the
 * caller's; m->error points into it).  -1 with errno EPROTO and a text if
 * a member is missing, of another type or out of range.  Members it does
 * not know are ignored.
 */
int polmsg_unpack (int type, json_t *body, struct polmsg *m,
                   tier_error_t *error);

/* A sealed memfd holding text (len bytes), or -1 with errno. */
int polmsg_text_fd (const char *text, size_t len);

/* The text of m (frozen or user) from the descriptor that came with it:
 * a sealed memfd of m->bytes bytes, else -1 with errno EPROTO.  *text is
 * malloc'd and NUL-terminated.
 */
int polmsg_text_read (const struct polmsg *m, int fd, char **text,
                      tier_error_t *error);

/* In the freezer: the one answer (text: the set for frozen and user, the
 * reason for error, NULL for none).  0, or -1 with errno.
 */
int polmsg_send (int fd, enum polmsg_type type, const char *text);

#endif /* !TIER_AGENT_POLICY_MSG_H */

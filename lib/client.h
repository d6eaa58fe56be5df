/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* client.h - talk to the node's tierd (libc only: plugin, interposer, ctl)
 *
 * A request is a JSON object text; so is the response.  A response with
 * a top-level "error" member is a failure, whatever the member's value:
 *   {"errno": 13, "error": "job 42 belongs to another user"}
 * A success never carries "error" (not even "error": null).
 */
#ifndef TIER_CLIENT_H
#define TIER_CLIENT_H

#include <stddef.h>

#include "error.h"

/* Connect (SOCK_STREAM, close-on-exec; returned in blocking mode) to the
 * agent's socket at path within timeout_ms (-1: no limit), then check
 * with SO_PEERCRED that root listens there: otherwise EPERM and "PATH is
 * not served by root" (a user could bind a socket of their own at a
 * path the agent left free).  Errors name the path: ENOENT (no socket),
 * ECONNREFUSED (nobody listening), ETIMEDOUT (the agent's backlog stays
 * full), ENAMETOOLONG, EINVAL.
 */
int tier_client_connect (const char *path, int timeout_ms,
                         tier_error_t *error);

/* One request/response on fd: sends body (a NUL-terminated JSON object
 * text) with a fresh request id and nfds descriptors, and waits for the
 * response with that id, all within timeout_ms (-1: no limit).  Anything
 * else (another id, a request, descriptors in the response, a body that
 * is not a JSON object) fails with EPROTO; a response of another
 * protocol version fails with EPROTO and "tierd speaks protocol version
 * X, this client Y".  An error response fails with errno set from its
 * "errno" member (EIO when absent or not in 1..4095) and the text of its
 * "error" string (control characters replaced by '?').  On success,
 * *reply is the malloc'd, NUL-terminated response body and *replylen its
 * length.  After a failure other than an error response, close fd.
 */
int tier_client_call (int fd, const char *body, const int *fds, int nfds,
                      char **reply, size_t *replylen, int timeout_ms,
                      tier_error_t *error);

/* The same, accepting up to maxrfds (<= TIER_MSG_FDS_MAX) descriptors in
 * the response: rfds[] and *rnfds get them (close-on-exec; the caller
 * closes them).  On any failure none are left open.
 */
int tier_client_call_fds (int fd, const char *body, const int *fds,
                          int nfds, char **reply, size_t *replylen,
                          int *rfds, int *rnfds, int maxrfds,
                          int timeout_ms, tier_error_t *error);

#endif /* !TIER_CLIENT_H */

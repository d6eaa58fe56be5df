/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* proto.h - framing of messages between clients and tierd (libc only)
 *
 * A message is a 16-byte header followed by len bytes of body (a JSON
 * object text) on an AF_UNIX stream socket.  Descriptors travel as
 * SCM_RIGHTS attached to the first byte of the header.  The header is in
 * host byte order: both ends are on the same host.
 *
 * Why not D-Bus, ZeroMQ or gRPC: the plugin and the interposer link
 * nothing but libc, and a fixed header, a JSON body and SCM_RIGHTS on an
 * AF_UNIX socket (peer checked with SO_PEERCRED) are all tier needs.
 *
 * The header layout (magic and version first, then type, id, len) is
 * frozen forever, so that peers of any version can read each other's
 * headers, skip the body and report a version mismatch clearly.  Only the
 * meaning of bodies may change with the version.
 *
 * Every function here fails with -1 and errno set (and a text in error
 * when it is not NULL); on failure nothing is returned to the caller:
 * descriptors received so far are closed and buffers freed.  After a
 * failure or a timeout in the middle of a message the stream is out of
 * step: close the connection.
 */
#ifndef TIER_PROTO_H
#define TIER_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TIER_PROTO_MAGIC   0x31524954u  /* "TIR1" as little-endian bytes */
#define TIER_PROTO_VERSION 1
#define TIER_MSG_MAX       (1024 * 1024) /* largest body accepted */
#define TIER_MSG_FDS_MAX   4

enum tier_msg_type {
    TIER_MSG_REQUEST = 1,
    TIER_MSG_RESPONSE = 2,
};

struct tier_msghdr {
    uint32_t magic;             /* TIER_PROTO_MAGIC */
    uint16_t version;           /* TIER_PROTO_VERSION of the sender */
    uint16_t type;              /* enum tier_msg_type */
    uint32_t id;                /* a response carries its request's id */
    uint32_t len;               /* body bytes that follow */
};

#define TIER_MSGHDR_SIZE 16

/* Check a received header: magic (EPROTO), type (EPROTO), len <= max
 * (EMSGSIZE; max is capped at TIER_MSG_MAX).  Another version is NOT an
 * error here: the caller reads the body and answers or reports it.
 */
int tier_msghdr_check (const struct tier_msghdr *h, uint32_t max,
                       tier_error_t *error);

/* Blocking send of one message: body of len bytes (body may be NULL when
 * len is 0) with nfds (0..TIER_MSG_FDS_MAX) descriptors, which the caller
 * keeps.  timeout_ms bounds the whole call (-1: none; 0: only what can be
 * sent at once).  Works on blocking and non-blocking sockets alike, is
 * EINTR-safe and never raises SIGPIPE.  Errors: EINVAL, EMSGSIZE (len >
 * TIER_MSG_MAX), ETIMEDOUT, EPIPE or ECONNRESET (peer gone), others from
 * sendmsg.
 */
int tier_msg_send (int fd, enum tier_msg_type type, uint32_t id,
                   const char *body, uint32_t len, const int *fds, int nfds,
                   int timeout_ms, tier_error_t *error);

/* Blocking receive of one message.  *hdr gets the header, *body a
 * malloc'd copy of the body with a NUL after it (hdr->len bytes), fds[]
 * up to maxfds (<= TIER_MSG_FDS_MAX) descriptors, close-on-exec, and
 * *nfds their number (fds and nfds may be NULL when maxfds is 0).  More
 * descriptors than maxfds, or truncated control data, fail with EPROTO
 * (all of them are closed); so do a bad magic and a bad type; a body
 * longer than max fails with EMSGSIZE before any of it is read.
 * ETIMEDOUT when timeout_ms (-1: none) runs out; ECONNRESET when the peer
 * closes the connection (before or inside a message).
 */
int tier_msg_recv (int fd, struct tier_msghdr *hdr, char **body, int *fds,
                   int *nfds, int maxfds, uint32_t max, int timeout_ms,
                   tier_error_t *error);

/* Non-blocking incremental reader for an event loop (the socket is
 * O_NONBLOCK, or at least read with MSG_DONTWAIT as done here).  Call
 * tier_msgreader_read whenever the socket is readable.  It reads at most
 * one message: once it returns 1, take what you need, then call
 * tier_msgreader_reset and call read again (with an edge-triggered
 * event loop, until it returns 0).
 */
struct tier_msgreader {
    uint32_t max;               /* largest body accepted */
    uint32_t hdr_got;           /* header bytes read so far */
    unsigned char hdrbuf[TIER_MSGHDR_SIZE];
    struct tier_msghdr hdr;     /* valid once the header is complete */
    char *body;                 /* hdr.len + 1 bytes once allocated */
    uint32_t body_got;          /* body bytes read so far */
    int fds[TIER_MSG_FDS_MAX];  /* descriptors received with the message */
    int nfds;
    bool ready;                 /* a whole message is here */
    /* set by the owner, kept by reset: */
    bool no_fds; /* read without room for descriptors: the
                                 * kernel drops any sent (unopened, never
                                 * closed here) and the message fails
                                 * with EPROTO */
    void (*drop_fd) (int fd, void *arg);   /* closes what the reader gives
                                          * up (NULL: close) */
    int (*check_fd) (int fd, void *arg,    /* each descriptor as it comes */
                     tier_error_t *error); /* (NULL: all); one refused is
                                            * dropped at once and the read
                                            * fails with EPROTO */
    void *drop_arg;                        /* for both */
};

void tier_msgreader_init (struct tier_msgreader *r, uint32_t max);

/* 1: a whole message is ready; 0: more is needed (EAGAIN); -1: error:
 * EPROTO (bad magic, type or control data, more than TIER_MSG_FDS_MAX
 * descriptors), EMSGSIZE (len > max, from the header alone, before any
 * body is read), ECONNRESET (EOF inside a message), ENODATA (a clean EOF
 * between messages), ENOMEM, or what recvmsg reported.
 */
int tier_msgreader_read (struct tier_msgreader *r, int fd,
                         tier_error_t *error);

/* The ready message's header (NULL if none is ready). */
const struct tier_msghdr *tier_msgreader_hdr (const struct tier_msgreader *r);

/* The ready message's body (NUL-terminated, hdr->len bytes), still owned
 * by the reader; NULL if none is ready or it was taken.
 */
const char *tier_msgreader_body (const struct tier_msgreader *r);

/* Take the ready message's body: ownership moves to the caller (free it).
 * NULL if none is ready or it was taken already.
 */
char *tier_msgreader_take_body (struct tier_msgreader *r);

/* Move the ready message's descriptors into fds[] (room for
 * TIER_MSG_FDS_MAX); returns how many (0 if not ready).  The caller
 * closes them.
 */
int tier_msgreader_take_fds (struct tier_msgreader *r,
                             int fds[TIER_MSG_FDS_MAX]);

/* Get ready for the next message: frees the body and drops (drop_fd)
 * the descriptors that were not taken.  Also clears a partial message.
 */
void tier_msgreader_reset (struct tier_msgreader *r);

void tier_msgreader_fini (struct tier_msgreader *r);

/* Non-blocking writer: queue whole messages, flush as the socket allows.
 * Messages leave in the order queued; descriptors go with the first byte
 * of their own message.  A zeroed struct is an empty writer.
 */
struct tier_msgwriter_item;

struct tier_msgwriter {
    struct tier_msgwriter_item *head;
    struct tier_msgwriter_item *tail;
    size_t bytes;               /* queued and not yet sent */
};

void tier_msgwriter_init (struct tier_msgwriter *w);

/* Copy a message into the queue (header + body; the descriptors are
 * duplicated, close-on-exec, and the duplicates closed once sent).
 * Returns 0, or -1 with errno EINVAL, EMSGSIZE, ENOMEM or EMFILE.
 */
int tier_msgwriter_queue (struct tier_msgwriter *w, enum tier_msg_type type,
                          uint32_t id, const char *body, uint32_t len,
                          const int *fds, int nfds);

/* Send what the socket takes.  1: all sent; 0: more to send (wait for
 * POLLOUT); -1: error (EPIPE, ECONNRESET, ...: close the connection).
 */
int tier_msgwriter_flush (struct tier_msgwriter *w, int fd,
                          tier_error_t *error);

bool tier_msgwriter_pending (const struct tier_msgwriter *w);

/* Bytes queued and not yet sent (to bound what a slow peer can pile up). */
size_t tier_msgwriter_bytes (const struct tier_msgwriter *w);

/* Drop what is queued (closing the duplicated descriptors). */
void tier_msgwriter_fini (struct tier_msgwriter *w);

#endif /* !TIER_PROTO_H */

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* client.c - connect to tierd (checking it is root) and make calls */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "proto.h"
#include "tjson.h"
#include "client.h"

#define ERRNO_MAX 4095          /* the kernel's errno range */

/* Request ids: unique per process, never 0.  Atomic, no lock: the
 * interposer may call from any thread.
 */
static uint32_t next_id (void)
{
    static uint32_t counter;
    uint32_t id;

    do {
        id = __atomic_add_fetch (&counter, 1, __ATOMIC_RELAXED);
    } while (id == 0);
    return id;
}

static void close_quietly (int fd)
{
    int saved = errno;

    (void) close (fd);
    errno = saved;
}

/* A non-blocking connect: AF_UNIX says EAGAIN while the listener's
 * backlog is full (retry until the deadline) and may say EINPROGRESS.
 */
static int connect_within (int fd, const struct sockaddr_un *sa,
                           int64_t deadline)
{
    int pause_ms = 1;

    for (;;) {
        if (connect (fd, (const struct sockaddr *) sa, sizeof (*sa)) == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EINPROGRESS) {
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            socklen_t len = sizeof (int);
            int n, err = 0;

            while ((n = poll (&p, 1, tier_remaining_ms (deadline))) < 0
                   && errno == EINTR)
                ;
            if (n == 0)
                errno = ETIMEDOUT;
            if (n <= 0)
                return -1;
            if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return -1;
            if (err) {
                errno = err;
                return -1;
            }
            return 0;
        }
        if (errno != EAGAIN)
            return -1;
        if (tier_remaining_ms (deadline) == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        {
            int left = tier_remaining_ms (deadline);
            struct timespec ts;

            if (left >= 0 && left < pause_ms)
                pause_ms = left;
            ts.tv_sec = pause_ms / 1000;
            ts.tv_nsec = (long) (pause_ms % 1000) * 1000000;
            (void) nanosleep (&ts, NULL);
            if (pause_ms < 50)
                pause_ms *= 2;
        }
    }
}

int tier_client_connect (const char *path, int timeout_ms,
                         tier_error_t *error)
{
    int64_t deadline = timeout_ms < 0 ? -1 : tier_now_ms () + timeout_ms;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct ucred cred;
    socklen_t len = sizeof (cred);
    int fd, flags;

    if (!path || !*path) {
        errno = EINVAL;
        return tier_errprintf (error, "no tierd socket path");
    }
    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return tier_errprintf (error, "%s: socket path too long", path);
    }
    strcpy (sa.sun_path, path);
    if ((fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                      0)) < 0)
        return tier_errprintf (error, "socket: %s", strerror (errno));
    if (connect_within (fd, &sa, deadline) < 0) {
        if (errno == ENOENT)
            tier_errprintf (error, "%s: no such socket (is tierd running?)",
                            path);
        else if (errno == ECONNREFUSED)
            tier_errprintf (error, "%s: connection refused (is tierd "
                            "running?)", path);
        else if (errno == ETIMEDOUT)
            tier_errprintf (error, "%s: timed out connecting after %d ms",
                            path, timeout_ms);
        else
            tier_errprintf (error, "%s: %s", path, strerror (errno));
        goto error;
    }
    if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        tier_errprintf (error, "%s: SO_PEERCRED: %s", path,
                        strerror (errno));
        goto error;
    }
    if (cred.uid != 0) {
        errno = EPERM;
        tier_errprintf (error, "%s is not served by root (uid %u, pid %d)",
                        path, (unsigned int) cred.uid, (int) cred.pid);
        goto error;
    }
    if ((flags = fcntl (fd, F_GETFL)) < 0
        || fcntl (fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        tier_errprintf (error, "%s: fcntl: %s", path, strerror (errno));
        goto error;
    }
    return fd;
error:
    close_quietly (fd);
    return -1;
}

/* Take the failure an error response reports. */
static int error_reply (const char *body, size_t len, tier_error_t *error)
{
    char text[TIER_ERROR_MAX];
    int64_t e;
    int err = EIO;

    if (tier_jr_get_int (body, len, "errno", &e) == 0 && e > 0
        && e <= ERRNO_MAX)
        err = (int) e;
    if (tier_jr_get_str (body, len, "error", text, sizeof (text)) < 0
        && errno != ERANGE)
        (void) strcpy (text, "tierd reported an error");
    for (char *p = text; *p; p++)
        if ((unsigned char) *p < 0x20 || *p == 0x7f)
            *p = '?';
    tier_errprintf (error, "%s", text);
    errno = err;
    return -1;
}

int tier_client_call_fds (int fd, const char *body, const int *fds,
                          int nfds, char **reply, size_t *replylen,
                          int *rfds, int *rnfds, int maxrfds,
                          int timeout_ms, tier_error_t *error)
{
    int64_t deadline = timeout_ms < 0 ? -1 : tier_now_ms () + timeout_ms;
    int got[TIER_MSG_FDS_MAX];
    int ngot = 0;
    struct tier_msghdr hdr;
    char *rbody = NULL;
    uint32_t id = next_id ();
    size_t len;

    if (!body || !reply || maxrfds < 0 || maxrfds > TIER_MSG_FDS_MAX
        || (maxrfds > 0 && (!rfds || !rnfds))) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid arguments to a tierd call");
    }
    if ((len = strlen (body)) > TIER_MSG_MAX) {
        errno = EMSGSIZE;
        return tier_errprintf (error, "a request of %zu bytes is larger "
                               "than the %d allowed", len, TIER_MSG_MAX);
    }
    if (tier_msg_send (fd, TIER_MSG_REQUEST, id, body, len, fds, nfds,
                       timeout_ms, error) < 0) {
        int saved = errno;
        tier_error_t e2;

        /* closed on us: the agent may have said why (refused) first */
        if ((saved != EPIPE && saved != ECONNRESET)
            || tier_msg_recv (fd, &hdr, &rbody, got, &ngot, 0, TIER_MSG_MAX,
                              0, &e2) < 0
            || hdr.type != TIER_MSG_RESPONSE || hdr.id != 0
            || tier_jr_validate (rbody, hdr.len) < 0
            || tier_jr_get_raw (rbody, hdr.len, "error", NULL, NULL) < 0) {
            free (rbody);
            errno = saved;
            return -1;
        }
        error_reply (rbody, hdr.len, error);
        goto error;
    }
    if (tier_msg_recv (fd, &hdr, &rbody, got, &ngot, maxrfds, TIER_MSG_MAX,
                       tier_remaining_ms (deadline), error)
        < 0)
        return -1;
    if (hdr.version != TIER_PROTO_VERSION) {
        errno = EPROTO;
        tier_errprintf (error, "tierd speaks protocol version %u, this "
                        "client %u", (unsigned int) hdr.version,
                        (unsigned int) TIER_PROTO_VERSION);
        goto error;
    }
    /* id 0: an error about the connection itself (refused, timed out) */
    if (hdr.type == TIER_MSG_RESPONSE && hdr.id == 0
        && tier_jr_validate (rbody, hdr.len) == 0
        && tier_jr_get_raw (rbody, hdr.len, "error", NULL, NULL) == 0) {
        error_reply (rbody, hdr.len, error);
        goto error;
    }
    if (hdr.type != TIER_MSG_RESPONSE || hdr.id != id) {
        errno = EPROTO;
        tier_errprintf (error, "tierd sent %s %u to request %u",
                        hdr.type == TIER_MSG_RESPONSE ? "the response"
                        : "a request", (unsigned int) hdr.id,
                        (unsigned int) id);
        goto error;
    }
    if (tier_jr_validate (rbody, hdr.len) < 0) {
        errno = EPROTO;
        tier_errprintf (error, "tierd sent a reply that is not a JSON "
                        "object");
        goto error;
    }
    if (tier_jr_get_raw (rbody, hdr.len, "error", NULL, NULL) == 0) {
        error_reply (rbody, hdr.len, error);
        goto error;
    }
    *reply = rbody;
    if (replylen)
        *replylen = hdr.len;
    if (maxrfds > 0) {
        memcpy (rfds, got, sizeof (int) * ngot);
        *rnfds = ngot;
    }
    return 0;
error:
    {
        int saved = errno;
        for (int i = 0; i < ngot; i++)
            (void) close (got[i]);
        free (rbody);
        errno = saved;
    }
    return -1;
}

int tier_client_call (int fd, const char *body, const int *fds, int nfds,
                      char **reply, size_t *replylen, int timeout_ms,
                      tier_error_t *error)
{
    return tier_client_call_fds (fd, body, fds, nfds, reply, replylen, NULL,
                                 NULL, 0, timeout_ms, error);
}

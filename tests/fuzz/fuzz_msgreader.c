/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* fuzz_msgreader.c - libFuzzer target: arbitrary bytes and descriptors
 * into the message reader (incremental or blocking) over a socketpair
 *
 * Input: one flags byte, then chunks of [control byte][data]: the control
 * byte's low 6 bits are the data length, its top 2 bits how many
 * descriptors go with the chunk's first byte (0, 1, 2 or 6 -- more than
 * TIER_MSG_FDS_MAX).  Flags: bit 0 blocking tier_msg_recv instead of the
 * incremental reader; bit 1 close the sending end at the end; bits 2-4
 * the largest body accepted.  Every message read is checked, echoed
 * through the writer and read back; no descriptor may leak.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/proto.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, \
                     __LINE__, #cond); \
            abort (); \
        } \
    } while (0)

static const uint32_t maxes[8] = {
    TIER_MSG_MAX, 0, 1, 16, 64, 256, 4096, 100,
};

static int lowest_free_fd (void)
{
    int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

    CHECK (fd >= 0);
    close (fd);
    return fd;
}

/* Send a chunk; false when the socket takes no more (its buffer holds
 * a limited number of small packets): stop feeding then.
 */
static bool send_chunk (int fd, const uint8_t *p, size_t len, int nfds,
                        int devnull)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE (sizeof (int) * 8)];
    } cb;
    struct iovec iov = { .iov_base = (void *) p, .iov_len = len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

    ssize_t n;

    if (len == 0)
        return true;
    if (nfds > 0) {
        struct cmsghdr *c;
        int fds[8];

        for (int i = 0; i < nfds; i++)
            fds[i] = devnull;
        memset (&cb, 0, sizeof (cb));
        m.msg_control = cb.buf;
        m.msg_controllen = CMSG_SPACE (sizeof (int) * nfds);
        c = CMSG_FIRSTHDR (&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN (sizeof (int) * nfds);
        memcpy (CMSG_DATA (c), fds, sizeof (int) * nfds);
    }
    n = sendmsg (fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0)
        CHECK (errno == EAGAIN || errno == ETOOMANYREFS || errno == ENOBUFS);
    return n == (ssize_t) len;
}

/* A message as read: sane, and it survives the writer unchanged. */
static void check_message (const struct tier_msghdr *h, const char *body,
                           const int *fds, int nfds, uint32_t max)
{
    struct tier_msgwriter w;
    struct tier_msghdr h2;
    tier_error_t error;
    char *body2;
    int sv[2], fds2[TIER_MSG_FDS_MAX], n2;

    CHECK (h->magic == TIER_PROTO_MAGIC);
    CHECK (h->type == TIER_MSG_REQUEST || h->type == TIER_MSG_RESPONSE);
    CHECK (h->len <= max && body && body[h->len] == '\0');
    CHECK (nfds >= 0 && nfds <= TIER_MSG_FDS_MAX);
    for (int i = 0; i < nfds; i++)
        CHECK (fcntl (fds[i], F_GETFD) & FD_CLOEXEC);

    CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    tier_msgwriter_init (&w);
    CHECK (tier_msgwriter_queue (&w, h->type, h->id, body, h->len, fds,
                                 nfds) == 0);
    CHECK (tier_msgwriter_flush (&w, sv[0], &error) == 1);
    CHECK (!tier_msgwriter_pending (&w));
    tier_msgwriter_fini (&w);
    CHECK (tier_msg_recv (sv[1], &h2, &body2, fds2, &n2, TIER_MSG_FDS_MAX,
                          max, 0, &error) == 0);
    CHECK (h2.id == h->id && h2.type == h->type && h2.len == h->len);
    CHECK (h2.version == TIER_PROTO_VERSION);
    CHECK (memcmp (body, body2, h->len + 1) == 0);
    CHECK (n2 == nfds);
    for (int i = 0; i < n2; i++)
        close (fds2[i]);
    free (body2);
    close (sv[0]);
    close (sv[1]);
}

static bool reader_errno_ok (int e)
{
    return e == EPROTO || e == EMSGSIZE || e == ECONNRESET || e == ENODATA;
}

/* Drain the reader: 0 = wants more, -1 = failed (connection dead). */
static int drain (struct tier_msgreader *r, int fd, uint32_t max)
{
    tier_error_t error;
    int rc;

    while ((rc = tier_msgreader_read (r, fd, &error)) == 1) {
        const struct tier_msghdr *h = tier_msgreader_hdr (r);
        int fds[TIER_MSG_FDS_MAX], n;

        CHECK (h);
        check_message (h, tier_msgreader_body (r), r->fds, r->nfds, max);
        if (h->id & 1) {                /* else reset closes them */
            n = tier_msgreader_take_fds (r, fds);
            CHECK (tier_msgreader_take_fds (r, fds) == 0 || n == 0);
            for (int i = 0; i < n; i++)
                close (fds[i]);
        }
        if (h->id & 2) {                /* else reset frees it */
            char *body = tier_msgreader_take_body (r);
            CHECK (body && !tier_msgreader_take_body (r));
            free (body);
        }
        tier_msgreader_reset (r);
        CHECK (!tier_msgreader_hdr (r) && r->nfds == 0 && !r->body);
    }
    if (rc < 0) {
        CHECK (reader_errno_ok (errno));
        CHECK (strnlen (error.text, sizeof (error.text))
               < sizeof (error.text));
    }
    return rc;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct tier_msgreader r;
    uint8_t flags;
    uint32_t max;
    int sv[2], devnull, before = lowest_free_fd ();
    bool blocking, dead = false;
    size_t i = 1;

    if (size < 1)
        return 0;
    flags = data[0];
    blocking = flags & 1;
    max = maxes[(flags >> 2) & 7];
    CHECK ((devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0);
    CHECK (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK (fcntl (sv[1], F_SETFL, O_NONBLOCK) == 0);
    tier_msgreader_init (&r, max);
    while (i < size && !dead) {
        uint8_t ctl = data[i++];
        size_t len = ctl & 0x3f;
        int nfds = (ctl >> 6) == 3 ? 6 : ctl >> 6;

        if (len > size - i)
            len = size - i;
        if (!send_chunk (sv[0], data + i, len, nfds, devnull))
            break;
        i += len;
        if (!blocking && drain (&r, sv[1], max) < 0)
            dead = true;
    }
    if (flags & 2) {
        close (sv[0]);
        sv[0] = -1;
    }
    if (!blocking && !dead) {
        int rc = drain (&r, sv[1], max);
        if (flags & 2)
            CHECK (rc == -1);           /* EOF, clean or not */
        else
            CHECK (rc == 0 || (errno != ENODATA && errno != ECONNRESET));
    }
    tier_msgreader_fini (&r);
    while (blocking) {
        struct tier_msghdr h;
        tier_error_t error;
        char *body;
        int fds[TIER_MSG_FDS_MAX], n;

        if (tier_msg_recv (sv[1], &h, &body, fds, &n, TIER_MSG_FDS_MAX, max,
                           0, &error) < 0) {
            CHECK (errno == ETIMEDOUT || errno == ECONNRESET
                   || errno == EPROTO || errno == EMSGSIZE);
            CHECK (errno != ETIMEDOUT || !(flags & 2));
            break;
        }
        check_message (&h, body, fds, n, max);
        for (int k = 0; k < n; k++)
            close (fds[k]);
        free (body);
    }
    if (sv[0] >= 0)
        close (sv[0]);
    close (sv[1]);
    close (devnull);
    CHECK (lowest_free_fd () == before);
    return 0;
}

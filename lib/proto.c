/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* proto.c - messages over AF_UNIX: header, body, SCM_RIGHTS descriptors */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "proto.h"

_Static_assert (sizeof (struct tier_msghdr) == TIER_MSGHDR_SIZE,
                "the header is 16 bytes on the wire");

/* Room for the descriptors we accept and, in case the agent turns on
 * SO_PASSCRED, a credentials message next to them.  Anything bigger is
 * truncated by the kernel and reported with MSG_CTRUNC.
 */
#define CMSG_BUF_SIZE \
    (CMSG_SPACE (sizeof (int) * TIER_MSG_FDS_MAX) \
     + CMSG_SPACE (sizeof (struct ucred)))

union cmsgbuf {
    struct cmsghdr align;
    char buf[CMSG_BUF_SIZE];
};

struct tier_msgwriter_item {
    struct tier_msgwriter_item *next;
    size_t len;                 /* header + body */
    size_t off;                 /* bytes sent */
    int fds[TIER_MSG_FDS_MAX];  /* duplicates, closed once sent */
    int nfds;
    unsigned char data[];
};

/* Wait until fd has events (or an error/hangup the next call will
 * report).  -1 with ETIMEDOUT when the deadline passes.
 */
static int wait_fd (int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll (&p, 1, tier_remaining_ms (deadline));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (p.revents & POLLNVAL) {
            errno = EBADF;
            return -1;
        }
        return 0;
    }
}

static void close_fds (int *fds, int *nfds)
{
    int saved = errno;

    for (int i = 0; i < *nfds; i++)
        (void) close (fds[i]);
    *nfds = 0;
    errno = saved;
}

static void hdr_encode (unsigned char *b, uint16_t type, uint32_t id,
                        uint32_t len)
{
    uint32_t magic = TIER_PROTO_MAGIC;
    uint16_t version = TIER_PROTO_VERSION;

    memcpy (b, &magic, 4);
    memcpy (b + 4, &version, 2);
    memcpy (b + 6, &type, 2);
    memcpy (b + 8, &id, 4);
    memcpy (b + 12, &len, 4);
}

static void hdr_decode (const unsigned char *b, struct tier_msghdr *h)
{
    memcpy (&h->magic, b, 4);
    memcpy (&h->version, b + 4, 2);
    memcpy (&h->type, b + 6, 2);
    memcpy (&h->id, b + 8, 4);
    memcpy (&h->len, b + 12, 4);
}

static bool type_valid (unsigned int type)
{
    return type == TIER_MSG_REQUEST || type == TIER_MSG_RESPONSE;
}

int tier_msghdr_check (const struct tier_msghdr *h, uint32_t max,
                       tier_error_t *error)
{
    if (!h) {
        errno = EINVAL;
        return tier_errprintf (error, "no message header");
    }
    if (max > TIER_MSG_MAX)
        max = TIER_MSG_MAX;
    if (h->magic != TIER_PROTO_MAGIC) {
        errno = EPROTO;
        return tier_errprintf (error, "bad magic 0x%08x: not a tier peer",
                               (unsigned int) h->magic);
    }
    if (!type_valid (h->type)) {
        errno = EPROTO;
        return tier_errprintf (error, "unknown message type %u",
                               (unsigned int) h->type);
    }
    if (h->len > max) {
        errno = EMSGSIZE;
        return tier_errprintf (error, "a message of %u bytes is larger than "
                               "the %u allowed", (unsigned int) h->len,
                               (unsigned int) max);
    }
    return 0;
}

static int check_send_args (enum tier_msg_type type, const char *body,
                            uint32_t len, const int *fds, int nfds,
                            tier_error_t *error)
{
    if (!type_valid (type) || (len > 0 && !body) || nfds < 0
        || nfds > TIER_MSG_FDS_MAX || (nfds > 0 && !fds)) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid message to send");
    }
    if (len > TIER_MSG_MAX) {
        errno = EMSGSIZE;
        return tier_errprintf (error, "a message of %u bytes is larger than "
                               "the %u allowed", (unsigned int) len,
                               (unsigned int) TIER_MSG_MAX);
    }
    return 0;
}

/* Attach nfds descriptors to m as SCM_RIGHTS (cb must outlive m). */
static void attach_fds (struct msghdr *m, union cmsgbuf *cb, const int *fds,
                        int nfds)
{
    struct cmsghdr *c;

    if (nfds <= 0)
        return;
    memset (cb, 0, sizeof (*cb));
    m->msg_control = cb->buf;
    m->msg_controllen = CMSG_SPACE (sizeof (int) * nfds);
    c = CMSG_FIRSTHDR (m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN (sizeof (int) * nfds);
    memcpy (CMSG_DATA (c), fds, sizeof (int) * nfds);
}

static int send_error (tier_error_t *error, const char *what)
{
    if (errno == ETIMEDOUT)
        return tier_errprintf (error, "%s: timed out", what);
    if (errno == EPIPE || errno == ECONNRESET)
        return tier_errprintf (error, "%s: connection closed by peer", what);
    return tier_errprintf (error, "%s: %s", what, strerror (errno));
}

int tier_msg_send (int fd, enum tier_msg_type type, uint32_t id,
                   const char *body, uint32_t len, const int *fds, int nfds,
                   int timeout_ms, tier_error_t *error)
{
    int64_t deadline = tier_deadline_ms (timeout_ms);
    unsigned char hb[TIER_MSGHDR_SIZE];
    size_t total, sent = 0;
    bool fds_sent;

    if (check_send_args (type, body, len, fds, nfds, error) < 0)
        return -1;
    hdr_encode (hb, type, id, len);
    total = sizeof (hb) + len;
    fds_sent = nfds == 0;
    while (sent < total) {
        union cmsgbuf cb;
        struct iovec iov[2];
        struct msghdr m = { .msg_iov = iov };
        ssize_t n;

        if (sent < sizeof (hb)) {
            iov[m.msg_iovlen].iov_base = hb + sent;
            iov[m.msg_iovlen++].iov_len = sizeof (hb) - sent;
            if (len > 0) {
                iov[m.msg_iovlen].iov_base = (char *) body;
                iov[m.msg_iovlen++].iov_len = len;
            }
        }
        else {
            iov[m.msg_iovlen].iov_base = (char *) body + (sent - sizeof (hb));
            iov[m.msg_iovlen++].iov_len = total - sent;
        }
        if (!fds_sent)
            attach_fds (&m, &cb, fds, nfds);
        n = sendmsg (fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_fd (fd, POLLOUT, deadline) < 0)
                    return send_error (error, "send");
                continue;
            }
            return send_error (error, "send");
        }
        fds_sent = true;
        sent += n;
    }
    return 0;
}

/* How received descriptors are given up (the reader's drop_fd, else
 * close) and checked as they come (check_fd, else all taken). */
struct dropper {
    void (*fn) (int fd, void *arg);
    int (*check) (int fd, void *arg, tier_error_t *error);
    void *arg;
};

static void drop_fds (const struct dropper *d, int *fds, int *nfds)
{
    int saved = errno;

    for (int i = 0; i < *nfds; i++)
        if (d && d->fn)
            d->fn (fds[i], d->arg);
        else
            (void) close (fds[i]);
    *nfds = 0;
    errno = saved;
}

/* One recvmsg (MSG_DONTWAIT): data into buf, descriptors appended to
 * fds[] up to maxfds.  More descriptors than that, or truncated control
 * data, drop all of them and fail with EPROTO.  With no_ctl there is no
 * room for control data: the kernel drops what came (MSG_CTRUNC), and
 * so does this with EPROTO.
 */
static ssize_t recv_some (int fd, void *buf, size_t want, int *fds, int *nfds,
                          int maxfds, bool no_ctl, const struct dropper *d,
                          tier_error_t *error)
{
    union cmsgbuf cb;
    struct iovec iov = { .iov_base = buf, .iov_len = want };
    struct msghdr m = {
        .msg_iov = &iov,
        .msg_iovlen = 1,
        .msg_control = no_ctl ? NULL : cb.buf,
        .msg_controllen = no_ctl ? 0 : sizeof (cb.buf),
    };
    struct cmsghdr *c;
    bool bad = false, refused = false;
    ssize_t n;

    if ((n = recvmsg (fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0)
        return -1;
    if (no_ctl && (m.msg_flags & MSG_CTRUNC)) {
        drop_fds (d, fds, nfds);
        errno = EPROTO;
        return tier_errprintf (error, "descriptors are not accepted on this "
                                      "connection now (only with its first "
                                      "request, and not while earlier ones of "
                                      "the same user are still being closed)");
    }
    for (c = CMSG_FIRSTHDR (&m); c; c = CMSG_NXTHDR (&m, c)) {
        const unsigned char *data = CMSG_DATA (c);
        size_t k;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS
            || c->cmsg_len < CMSG_LEN (0))
            continue;
        k = (c->cmsg_len - CMSG_LEN (0)) / sizeof (int);
        for (size_t i = 0; i < k; i++) {
            int f, one = 1;

            memcpy (&f, data + i * sizeof (int), sizeof (int));
            if (!refused && d && d->check && d->check (f, d->arg, error) < 0)
                refused = true;
            if (*nfds < maxfds && !refused)
                fds[(*nfds)++] = f;
            else {
                drop_fds (d, &f, &one);
                bad = true;
            }
        }
    }
    if (refused) {
        drop_fds (d, fds, nfds);
        errno = EPROTO;
        return -1; /* check said why */
    }
    if (m.msg_flags & MSG_CTRUNC)
        bad = true;
    if (bad) {
        drop_fds (d, fds, nfds);
        errno = EPROTO;
        return tier_errprintf (error, "more than %d descriptors or truncated "
                               "control data in a message", maxfds);
    }
    return n;
}

/* Receive exactly want bytes (blocking until deadline). */
static int recv_exact (int fd, char *buf, size_t want, int *fds, int *nfds,
                       int maxfds, int64_t deadline, bool at_start,
                       tier_error_t *error)
{
    size_t got = 0;

    while (got < want) {
        ssize_t n = recv_some (fd, buf + got, want - got, fds, nfds, maxfds,
                               false, NULL, error);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_fd (fd, POLLIN, deadline) < 0) {
                    if (errno == ETIMEDOUT)
                        return tier_errprintf (error, "receive: timed out");
                    return tier_errprintf (error, "receive: %s",
                                           strerror (errno));
                }
                continue;
            }
            if (errno == EPROTO)
                return -1;              /* recv_some said why */
            if (errno == ECONNRESET)
                return tier_errprintf (error, "receive: connection reset "
                                       "by peer");
            return tier_errprintf (error, "receive: %s", strerror (errno));
        }
        if (n == 0) {
            errno = ECONNRESET;
            if (at_start && got == 0 && *nfds == 0)
                return tier_errprintf (error, "receive: connection closed "
                                       "by peer");
            return tier_errprintf (error, "receive: connection closed inside "
                                   "a message");
        }
        got += n;
    }
    return 0;
}

int tier_msg_recv (int fd, struct tier_msghdr *hdr, char **body, int *fds,
                   int *nfds, int maxfds, uint32_t max, int timeout_ms,
                   tier_error_t *error)
{
    int64_t deadline = tier_deadline_ms (timeout_ms);
    unsigned char hb[TIER_MSGHDR_SIZE];
    int rfds[TIER_MSG_FDS_MAX];
    int rn = 0;
    struct tier_msghdr h;
    char *b = NULL;

    if (!hdr || !body || maxfds < 0 || (maxfds > 0 && (!fds || !nfds))) {
        errno = EINVAL;
        return tier_errprintf (error, "invalid arguments to receive");
    }
    if (maxfds > TIER_MSG_FDS_MAX)
        maxfds = TIER_MSG_FDS_MAX;
    if (recv_exact (fd, (char *) hb, sizeof (hb), rfds, &rn, maxfds,
                    deadline, true, error) < 0)
        goto error;
    hdr_decode (hb, &h);
    if (tier_msghdr_check (&h, max, error) < 0)
        goto error;
    if (!(b = malloc ((size_t) h.len + 1))) {
        tier_errprintf (error, "receive: out of memory");
        goto error;
    }
    if (recv_exact (fd, b, h.len, rfds, &rn, maxfds, deadline, false,
                    error) < 0)
        goto error;
    b[h.len] = '\0';
    *hdr = h;
    *body = b;
    if (maxfds > 0) {
        memcpy (fds, rfds, sizeof (int) * rn);
        *nfds = rn;
    }
    else if (nfds)
        *nfds = 0;
    return 0;
error:
    close_fds (rfds, &rn);
    {
        int saved = errno;
        free (b);
        errno = saved;
    }
    return -1;
}

void tier_msgreader_init (struct tier_msgreader *r, uint32_t max)
{
    memset (r, 0, sizeof (*r));
    r->max = max > TIER_MSG_MAX ? TIER_MSG_MAX : max;
}

int tier_msgreader_read (struct tier_msgreader *r, int fd,
                         tier_error_t *error)
{
    while (!r->ready) {
        bool in_hdr = r->hdr_got < TIER_MSGHDR_SIZE;
        char *dst;
        size_t want;
        ssize_t n;

        if (in_hdr) {
            dst = (char *) r->hdrbuf + r->hdr_got;
            want = TIER_MSGHDR_SIZE - r->hdr_got;
        }
        else {
            dst = r->body + r->body_got;
            want = r->hdr.len - r->body_got;
        }
        n = recv_some (fd, dst, want, r->fds, &r->nfds, TIER_MSG_FDS_MAX,
                       r->no_fds,
                       &(struct dropper){ r->drop_fd, r->check_fd,
                                          r->drop_arg },
                       error);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EPROTO)
                return -1;
            return tier_errprintf (error, "receive: %s", strerror (errno));
        }
        if (n == 0) {
            if (r->hdr_got == 0 && r->nfds == 0) {
                errno = ENODATA;
                return tier_errprintf (error, "connection closed");
            }
            errno = ECONNRESET;
            return tier_errprintf (error, "connection closed inside a "
                                   "message");
        }
        if (!in_hdr) {
            r->body_got += n;
            r->ready = r->body_got == r->hdr.len;
            continue;
        }
        if ((r->hdr_got += n) < TIER_MSGHDR_SIZE)
            continue;
        hdr_decode (r->hdrbuf, &r->hdr);
        if (tier_msghdr_check (&r->hdr, r->max, error) < 0)
            return -1;
        if (!(r->body = malloc ((size_t) r->hdr.len + 1)))
            return tier_errprintf (error, "receive: out of memory");
        r->body[r->hdr.len] = '\0';
        r->ready = r->hdr.len == 0;
    }
    return 1;
}

const struct tier_msghdr *tier_msgreader_hdr (const struct tier_msgreader *r)
{
    return r->ready ? &r->hdr : NULL;
}

const char *tier_msgreader_body (const struct tier_msgreader *r)
{
    return r->ready ? r->body : NULL;
}

char *tier_msgreader_take_body (struct tier_msgreader *r)
{
    char *b;

    if (!r->ready)
        return NULL;
    b = r->body;
    r->body = NULL;
    return b;
}

int tier_msgreader_take_fds (struct tier_msgreader *r,
                             int fds[TIER_MSG_FDS_MAX])
{
    int n;

    if (!r->ready)
        return 0;
    n = r->nfds;
    memcpy (fds, r->fds, sizeof (int) * n);
    r->nfds = 0;
    return n;
}

void tier_msgreader_reset (struct tier_msgreader *r)
{
    struct dropper d = { r->drop_fd, r->check_fd, r->drop_arg };
    int saved = errno;
    uint32_t max = r->max;
    bool no_fds = r->no_fds;

    drop_fds (&d, r->fds, &r->nfds);
    free (r->body);
    tier_msgreader_init (r, max);
    r->no_fds = no_fds;
    r->drop_fd = d.fn;
    r->check_fd = d.check;
    r->drop_arg = d.arg;
    errno = saved;
}

void tier_msgreader_fini (struct tier_msgreader *r)
{
    if (r)
        tier_msgreader_reset (r);
}

void tier_msgwriter_init (struct tier_msgwriter *w)
{
    memset (w, 0, sizeof (*w));
}

int tier_msgwriter_queue (struct tier_msgwriter *w, enum tier_msg_type type,
                          uint32_t id, const char *body, uint32_t len,
                          const int *fds, int nfds)
{
    struct tier_msgwriter_item *it;

    if (!w) {
        errno = EINVAL;
        return -1;
    }
    if (check_send_args (type, body, len, fds, nfds, NULL) < 0)
        return -1;
    if (!(it = malloc (sizeof (*it) + TIER_MSGHDR_SIZE + len)))
        return -1;
    it->next = NULL;
    it->len = TIER_MSGHDR_SIZE + (size_t) len;
    it->off = 0;
    it->nfds = 0;
    hdr_encode (it->data, type, id, len);
    if (len > 0)
        memcpy (it->data + TIER_MSGHDR_SIZE, body, len);
    for (int i = 0; i < nfds; i++) {
        int d = fcntl (fds[i], F_DUPFD_CLOEXEC, 0);
        if (d < 0) {
            int saved = errno;
            close_fds (it->fds, &it->nfds);
            free (it);
            errno = saved;
            return -1;
        }
        it->fds[it->nfds++] = d;
    }
    if (w->tail)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    w->bytes += it->len;
    return 0;
}

int tier_msgwriter_flush (struct tier_msgwriter *w, int fd,
                          tier_error_t *error)
{
    struct tier_msgwriter_item *it;

    while ((it = w->head)) {
        union cmsgbuf cb;
        struct iovec iov = {
            .iov_base = it->data + it->off,
            .iov_len = it->len - it->off,
        };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (it->off == 0)
            attach_fds (&m, &cb, it->fds, it->nfds);
        n = sendmsg (fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return send_error (error, "send");
        }
        close_fds (it->fds, &it->nfds); /* they went with the first byte */
        it->off += n;
        w->bytes -= n;
        if (it->off == it->len) {
            if (!(w->head = it->next))
                w->tail = NULL;
            free (it);
        }
    }
    return 1;
}

bool tier_msgwriter_pending (const struct tier_msgwriter *w)
{
    return w->head != NULL;
}

size_t tier_msgwriter_bytes (const struct tier_msgwriter *w)
{
    return w->bytes;
}

void tier_msgwriter_fini (struct tier_msgwriter *w)
{
    int saved = errno;

    if (!w)
        return;
    while (w->head) {
        struct tier_msgwriter_item *it = w->head;

        w->head = it->next;
        close_fds (it->fds, &it->nfds);
        free (it);
    }
    w->tail = NULL;
    w->bytes = 0;
    errno = saved;
}

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_proto.c - message framing, the incremental reader and writer, the
 * client's connect and call
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/proto.h"
#include "lib/client.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

FAILALLOC_DEFINE

/* The lowest free descriptor: unchanged after a call means no leak. */
static int fd_probe (void)
{
    int fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);

    assert_true (fd >= 0);
    close (fd);
    return fd;
}

static void pair (int sv[2])
{
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                  sv), 0);
}

static void unpair (int sv[2])
{
    if (sv[0] >= 0)
        close (sv[0]);
    if (sv[1] >= 0)
        close (sv[1]);
    sv[0] = sv[1] = -1;
}

static void set_nonblock (int fd)
{
    int fl = fcntl (fd, F_GETFL);

    assert_true (fl >= 0);
    assert_int_equal (fcntl (fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static int64_t mono_ms (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A header as any peer could write it, followed by bodylen bytes. */
static void send_raw (int fd, uint32_t magic, uint16_t version,
                      uint16_t type, uint32_t id, uint32_t len,
                      const char *body, size_t bodylen)
{
    struct tier_msghdr h = {
        .magic = magic, .version = version, .type = type, .id = id,
        .len = len,
    };

    assert_int_equal (write (fd, &h, sizeof (h)), (int) sizeof (h));
    if (bodylen > 0)
        assert_int_equal (write (fd, body, bodylen), (int) bodylen);
}

/* sendmsg with n descriptors attached to the first byte of data. */
static void send_with_fds (int fd, const void *data, size_t len,
                           const int *fds, int n)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE (sizeof (int) * 32)];
    } cb;
    struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct cmsghdr *c;

    memset (&cb, 0, sizeof (cb));
    m.msg_control = cb.buf;
    m.msg_controllen = CMSG_SPACE (sizeof (int) * n);
    c = CMSG_FIRSTHDR (&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN (sizeof (int) * n);
    memcpy (CMSG_DATA (c), fds, sizeof (int) * n);
    assert_int_equal (sendmsg (fd, &m, 0), (int) len);
}

static void expect_errno (int rc, int err)
{
    assert_int_equal (rc, -1);
    if (errno != err)
        fail_msg ("errno %d (%s), expected %d (%s)", errno, strerror (errno),
                  err, strerror (err));
}

static void test_hdr_check (void **state)
{
    struct tier_msghdr h = {
        .magic = TIER_PROTO_MAGIC, .version = TIER_PROTO_VERSION,
        .type = TIER_MSG_REQUEST, .id = 1, .len = 10,
    };
    tier_error_t error = { { 0 } };

    assert_memory_equal (&h.magic, "TIR1", 4);
    assert_int_equal (tier_msghdr_check (&h, 10, &error), 0);
    h.version = 99;                     /* not rejected here */
    assert_int_equal (tier_msghdr_check (&h, 10, &error), 0);
    expect_errno (tier_msghdr_check (&h, 9, &error), EMSGSIZE);
    assert_non_null (strstr (error.text, "10 bytes"));
    h.len = TIER_MSG_MAX + 1;           /* max is capped */
    expect_errno (tier_msghdr_check (&h, UINT32_MAX, &error), EMSGSIZE);
    h.len = 0;
    h.type = 3;
    expect_errno (tier_msghdr_check (&h, 10, &error), EPROTO);
    assert_non_null (strstr (error.text, "type 3"));
    h.type = TIER_MSG_RESPONSE;
    h.magic = 0x50545448;               /* "HTTP" */
    expect_errno (tier_msghdr_check (&h, 10, &error), EPROTO);
    assert_non_null (strstr (error.text, "magic"));
}

static void test_roundtrip (void **state)
{
    struct tier_msghdr h;
    tier_error_t error;
    char *body;
    int sv[2], fds[TIER_MSG_FDS_MAX], nfds = -1;

    pair (sv);
    assert_int_equal (tier_msg_send (sv[0], TIER_MSG_REQUEST, 7, "{\"a\":1}",
                                     7, NULL, 0, 1000, &error), 0);
    assert_int_equal (tier_msg_recv (sv[1], &h, &body, fds, &nfds,
                                     TIER_MSG_FDS_MAX, TIER_MSG_MAX, 1000,
                                     &error), 0);
    assert_true (h.magic == TIER_PROTO_MAGIC);
    assert_int_equal (h.version, TIER_PROTO_VERSION);
    assert_int_equal (h.type, TIER_MSG_REQUEST);
    assert_int_equal (h.id, 7);
    assert_int_equal (h.len, 7);
    assert_string_equal (body, "{\"a\":1}");
    assert_int_equal (nfds, 0);
    free (body);

    /* an empty body, no fds wanted, no timeout */
    assert_int_equal (tier_msg_send (sv[1], TIER_MSG_RESPONSE, UINT32_MAX,
                                     NULL, 0, NULL, 0, -1, &error), 0);
    assert_int_equal (tier_msg_recv (sv[0], &h, &body, NULL, NULL, 0,
                                     TIER_MSG_MAX, -1, &error), 0);
    assert_int_equal (h.type, TIER_MSG_RESPONSE);
    assert_true (h.id == UINT32_MAX);
    assert_int_equal (h.len, 0);
    assert_string_equal (body, "");
    free (body);

    /* bad arguments */
    expect_errno (tier_msg_send (sv[0], 3, 1, "x", 1, NULL, 0, 0, &error),
                  EINVAL);
    expect_errno (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, NULL, 1, NULL,
                                 0, 0, &error), EINVAL);
    expect_errno (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "x", 1, fds,
                                 TIER_MSG_FDS_MAX + 1, 0, &error), EINVAL);
    expect_errno (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "x",
                                 TIER_MSG_MAX + 1, NULL, 0, 0, &error),
                  EMSGSIZE);
    expect_errno (tier_msg_recv (sv[0], &h, NULL, NULL, NULL, 0, 10, 0,
                                 &error), EINVAL);
    unpair (sv);
}

static void test_fds (void **state)
{
    struct tier_msghdr h;
    tier_error_t error;
    struct stat a, b;
    char *body, c;
    int sv[2], p[2], fds[TIER_MSG_FDS_MAX], nfds, send[2];

    pair (sv);
    assert_int_equal (pipe (p), 0);     /* no CLOEXEC on the originals */
    send[0] = p[0];
    send[1] = open ("/dev/null", O_RDONLY);
    assert_int_equal (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "{}", 2,
                                     send, 2, 1000, &error), 0);
    assert_int_equal (tier_msg_recv (sv[1], &h, &body, fds, &nfds,
                                     TIER_MSG_FDS_MAX, TIER_MSG_MAX, 1000,
                                     &error), 0);
    free (body);
    assert_int_equal (nfds, 2);
    for (int i = 0; i < 2; i++) {
        assert_true (fds[i] != send[0] && fds[i] != send[1]);
        assert_true (fcntl (fds[i], F_GETFD) & FD_CLOEXEC);
        assert_int_equal (fstat (fds[i], &a), 0);
        assert_int_equal (fstat (send[i], &b), 0);
        assert_true (a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    }
    /* it really is the pipe */
    assert_int_equal (write (p[1], "z", 1), 1);
    assert_int_equal (read (fds[0], &c, 1), 1);
    assert_int_equal (c, 'z');
    for (int i = 0; i < 2; i++)
        close (fds[i]);
    close (send[1]);
    close (p[0]);
    close (p[1]);
    unpair (sv);
}

static char *pattern (size_t len, unsigned int seed)
{
    char *b = malloc (len + 1);

    assert_non_null (b);
    for (size_t i = 0; i < len; i++)
        b[i] = 'a' + (i * 7 + seed) % 26;
    b[len] = '\0';
    return b;
}

/* A body of TIER_MSG_MAX bytes needs a sender in another process. */
static void test_large (void **state)
{
    struct tier_msghdr h;
    tier_error_t error;
    char *body, *want = pattern (TIER_MSG_MAX, 3);
    int sv[2], status;
    pid_t pid;

    pair (sv);
    pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int rc = tier_msg_send (sv[0], TIER_MSG_REQUEST, 5, want,
                                TIER_MSG_MAX, NULL, 0, 10000, NULL);
        rc |= tier_msg_send (sv[0], TIER_MSG_REQUEST, 6, want,
                             TIER_MSG_MAX - 1, NULL, 0, 10000, NULL);
        _exit (rc ? 1 : 0);
    }
    assert_int_equal (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                     TIER_MSG_MAX, 10000, &error), 0);
    assert_int_equal (h.len, TIER_MSG_MAX);
    assert_memory_equal (body, want, TIER_MSG_MAX);
    assert_int_equal (body[TIER_MSG_MAX], '\0');
    free (body);
    assert_int_equal (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                     TIER_MSG_MAX, 10000, &error), 0);
    assert_int_equal (h.len, TIER_MSG_MAX - 1);
    assert_memory_equal (body, want, TIER_MSG_MAX - 1);
    free (body);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    free (want);
    unpair (sv);
}

/* A header announcing too much is refused at once, from the header
 * alone: no body follows here, so waiting for one would time out.
 */
static void test_oversize (void **state)
{
    struct tier_msgreader r;
    struct tier_msghdr h;
    tier_error_t error;
    char *body;
    int sv[2];
    int64_t t0;

    pair (sv);
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, TIER_MSG_REQUEST, 1,
              TIER_MSG_MAX + 1, NULL, 0);
    t0 = mono_ms ();
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 5000, &error), EMSGSIZE);
    assert_true (mono_ms () - t0 < 1000);
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, TIER_MSG_REQUEST, 1, 101, NULL,
              0);
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0, 100, 5000,
                                 &error), EMSGSIZE);

    set_nonblock (sv[1]);
    tier_msgreader_init (&r, 100);
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, TIER_MSG_REQUEST, 1, 101, NULL,
              0);
    expect_errno (tier_msgreader_read (&r, sv[1], &error), EMSGSIZE);
    assert_null (r.body);               /* nothing was allocated */
    tier_msgreader_fini (&r);
    unpair (sv);
}

static void test_bad_header (void **state)
{
    struct tier_msgreader r;
    struct tier_msghdr h;
    tier_error_t error;
    char *body;
    int sv[2];

    pair (sv);
    send_raw (sv[0], 0x3152495a, 1, TIER_MSG_REQUEST, 1, 2, "{}", 2);
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 1000, &error), EPROTO);
    assert_non_null (strstr (error.text, "magic"));
    unpair (sv);

    pair (sv);
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, 0, 1, 2, "{}", 2);
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 1000, &error), EPROTO);
    assert_non_null (strstr (error.text, "type 0"));
    unpair (sv);

    pair (sv);
    set_nonblock (sv[1]);
    tier_msgreader_init (&r, TIER_MSG_MAX);
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, 9, 1, 2, "{}", 2);
    expect_errno (tier_msgreader_read (&r, sv[1], &error), EPROTO);
    tier_msgreader_reset (&r);
    send_raw (sv[0], 0, 1, 1, 1, 0, NULL, 0);
    expect_errno (tier_msgreader_read (&r, sv[1], &error), EPROTO);
    tier_msgreader_fini (&r);
    unpair (sv);
}

/* Peers of other versions are read, so that they can be answered. */
static void test_other_version (void **state)
{
    struct tier_msgreader r;
    struct tier_msghdr h;
    tier_error_t error;
    char *body;
    int sv[2];

    pair (sv);
    send_raw (sv[0], TIER_PROTO_MAGIC, 7, TIER_MSG_REQUEST, 3, 4, "{}{}", 4);
    assert_int_equal (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                     TIER_MSG_MAX, 1000, &error), 0);
    assert_int_equal (h.version, 7);
    assert_string_equal (body, "{}{}");
    free (body);

    set_nonblock (sv[1]);
    tier_msgreader_init (&r, TIER_MSG_MAX);
    send_raw (sv[0], TIER_PROTO_MAGIC, 2, TIER_MSG_RESPONSE, 4, 2, "{}", 2);
    assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 1);
    assert_int_equal (tier_msgreader_hdr (&r)->version, 2);
    assert_int_equal (tier_msgreader_hdr (&r)->id, 4);
    assert_string_equal (tier_msgreader_body (&r), "{}");
    tier_msgreader_fini (&r);
    unpair (sv);
}

static void test_truncated (void **state)
{
    static const struct {
        size_t len;             /* bytes of a 16 + 4 byte message sent */
        int recv_errno;
        int reader_errno;
    } cuts[] = {
        { 0, ECONNRESET, ENODATA },
        { 1, ECONNRESET, ECONNRESET },
        { 15, ECONNRESET, ECONNRESET },
        { 16, ECONNRESET, ECONNRESET },
        { 19, ECONNRESET, ECONNRESET },
    };
    struct tier_msghdr hh = {
        .magic = TIER_PROTO_MAGIC, .version = 1, .type = 1, .id = 1,
        .len = 4,
    };
    char msg[20];

    memcpy (msg, &hh, 16);
    memcpy (msg + 16, "{ }x", 4);
    for (size_t k = 0; k < sizeof (cuts) / sizeof (cuts[0]); k++) {
        struct tier_msgreader r;
        struct tier_msghdr h;
        tier_error_t error;
        char *body;
        int sv[2];

        pair (sv);
        if (cuts[k].len)
            assert_int_equal (write (sv[0], msg, cuts[k].len),
                              (int) cuts[k].len);
        shutdown (sv[0], SHUT_WR);
        expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                     TIER_MSG_MAX, 1000, &error),
                      cuts[k].recv_errno);
        unpair (sv);

        pair (sv);
        set_nonblock (sv[1]);
        tier_msgreader_init (&r, TIER_MSG_MAX);
        if (cuts[k].len)
            assert_int_equal (write (sv[0], msg, cuts[k].len),
                              (int) cuts[k].len);
        assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 0);
        shutdown (sv[0], SHUT_WR);
        expect_errno (tier_msgreader_read (&r, sv[1], &error),
                      cuts[k].reader_errno);
        tier_msgreader_fini (&r);
        unpair (sv);
    }
}

static void test_timeout (void **state)
{
    struct tier_msghdr h;
    tier_error_t error;
    char *body, *big;
    int sv[2], sz = 4096;
    int64_t t0, dt;

    pair (sv);
    t0 = mono_ms ();
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 100, &error), ETIMEDOUT);
    dt = mono_ms () - t0;
    assert_true (dt >= 90 && dt < 2000);
    assert_non_null (strstr (error.text, "timed out"));
    /* a header, then silence */
    send_raw (sv[0], TIER_PROTO_MAGIC, 1, 1, 1, 10, "{}", 2);
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 50, &error), ETIMEDOUT);
    /* timeout 0: only what is there */
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 0, &error), ETIMEDOUT);
    unpair (sv);

    /* a peer that does not read */
    pair (sv);
    assert_int_equal (setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &sz,
                                  sizeof (sz)), 0);
    big = pattern (TIER_MSG_MAX, 1);
    t0 = mono_ms ();
    expect_errno (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, big,
                                 TIER_MSG_MAX, NULL, 0, 100, &error),
                  ETIMEDOUT);
    dt = mono_ms () - t0;
    assert_true (dt >= 90 && dt < 2000);
    free (big);
    unpair (sv);
}

static void test_peer_gone (void **state)
{
    tier_error_t error;
    int sv[2];

    pair (sv);
    close (sv[1]);
    sv[1] = -1;
    assert_int_equal (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "{}", 2,
                                     NULL, 0, 1000, &error), -1);
    assert_true (errno == EPIPE || errno == ECONNRESET);
    unpair (sv);
}

static void test_too_many_fds (void **state)
{
    struct tier_msgreader r;
    struct tier_msghdr h;
    tier_error_t error;
    char hdr[18], *body;
    int sv[2], fds[32], got[TIER_MSG_FDS_MAX], more[TIER_MSG_FDS_MAX], n;
    int before;
    struct tier_msghdr hh = {
        .magic = TIER_PROTO_MAGIC, .version = 1, .type = 1, .id = 1,
        .len = 2,
    };

    memcpy (hdr, &hh, 16);
    memcpy (hdr + 16, "{}", 2);
    for (int i = 0; i < 32; i++)
        fds[i] = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    before = fd_probe ();

    /* blocking receive: more than maxfds */
    pair (sv);
    before = fd_probe ();
    assert_int_equal (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "{}", 2,
                                     fds, 2, 1000, &error), 0);
    expect_errno (tier_msg_recv (sv[1], &h, &body, got, &n, 1, TIER_MSG_MAX,
                                 1000, &error), EPROTO);
    assert_non_null (strstr (error.text, "descriptors"));
    assert_int_equal (fd_probe (), before);
    /* any at all when none are wanted */
    assert_int_equal (tier_msg_send (sv[0], TIER_MSG_REQUEST, 1, "{}", 2,
                                     fds, 1, 1000, &error), 0);
    expect_errno (tier_msg_recv (sv[1], &h, &body, NULL, NULL, 0,
                                 TIER_MSG_MAX, 1000, &error), EPROTO);
    assert_int_equal (fd_probe (), before);
    unpair (sv);

    /* the reader: 5 (more than TIER_MSG_FDS_MAX), and 32 (truncated) */
    for (int k = 0; k < 2; k++) {
        pair (sv);
        before = fd_probe ();
        set_nonblock (sv[1]);
        tier_msgreader_init (&r, TIER_MSG_MAX);
        send_with_fds (sv[0], hdr, sizeof (hdr), fds, k ? 32 : 5);
        expect_errno (tier_msgreader_read (&r, sv[1], &error), EPROTO);
        tier_msgreader_fini (&r);
        assert_int_equal (fd_probe (), before);
        /* and the blocking receive */
        send_with_fds (sv[0], hdr, sizeof (hdr), fds, k ? 32 : 5);
        expect_errno (tier_msg_recv (sv[1], &h, &body, got, &n,
                                     TIER_MSG_FDS_MAX, TIER_MSG_MAX, 1000,
                                     &error), EPROTO);
        assert_int_equal (fd_probe (), before);
        unpair (sv);
    }
    /* exactly TIER_MSG_FDS_MAX is fine */
    pair (sv);
    set_nonblock (sv[1]);
    tier_msgreader_init (&r, TIER_MSG_MAX);
    send_with_fds (sv[0], hdr, sizeof (hdr), fds, TIER_MSG_FDS_MAX);
    assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 1);
    assert_int_equal (tier_msgreader_take_fds (&r, got), TIER_MSG_FDS_MAX);
    assert_int_equal (tier_msgreader_take_fds (&r, more), 0);
    for (int i = 0; i < TIER_MSG_FDS_MAX; i++)
        close (got[i]);
    /* unclaimed descriptors are closed by reset */
    before = fd_probe ();
    send_with_fds (sv[0], hdr, sizeof (hdr), fds, 3);
    tier_msgreader_reset (&r);
    assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 1);
    tier_msgreader_reset (&r);
    assert_int_equal (fd_probe (), before);
    tier_msgreader_fini (&r);
    unpair (sv);
    for (int i = 0; i < 32; i++)
        close (fds[i]);
}

/* The reader fed one byte at a time, descriptors on the first byte. */
static void test_reader_bytewise (void **state)
{
    const char *bodies[] = { "{\"first\":1}", "", "{\"third\":[1,2,3]}" };
    struct tier_msgreader r;
    tier_error_t error;
    int sv[2], devnull, before = fd_probe ();

    pair (sv);
    set_nonblock (sv[1]);
    devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    tier_msgreader_init (&r, TIER_MSG_MAX);
    assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 0);
    for (int m = 0; m < 3; m++) {
        struct tier_msghdr hh = {
            .magic = TIER_PROTO_MAGIC, .version = 1,
            .type = TIER_MSG_REQUEST, .id = 100 + m,
            .len = strlen (bodies[m]),
        };
        char buf[64];
        size_t len = 16 + hh.len;
        const struct tier_msghdr *h;
        char *body;
        int fds[TIER_MSG_FDS_MAX];

        memcpy (buf, &hh, 16);
        memcpy (buf + 16, bodies[m], hh.len);
        for (size_t i = 0; i < len; i++) {
            if (i == 0 && m != 1)
                send_with_fds (sv[0], buf, 1, &devnull, 1);
            else
                assert_int_equal (write (sv[0], buf + i, 1), 1);
            assert_int_equal (tier_msgreader_read (&r, sv[1], &error),
                              i + 1 == len ? 1 : 0);
            assert_true ((tier_msgreader_hdr (&r) != NULL) == (i + 1 == len));
        }
        /* ready: reading again does not consume more */
        assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 1);
        h = tier_msgreader_hdr (&r);
        assert_int_equal (h->id, 100 + m);
        assert_int_equal (h->len, strlen (bodies[m]));
        assert_int_equal (tier_msgreader_take_fds (&r, fds), m != 1);
        if (m != 1) {
            assert_true (fcntl (fds[0], F_GETFD) & FD_CLOEXEC);
            close (fds[0]);
        }
        body = tier_msgreader_take_body (&r);
        assert_string_equal (body, bodies[m]);
        assert_null (tier_msgreader_take_body (&r));
        free (body);
        tier_msgreader_reset (&r);
        assert_null (tier_msgreader_hdr (&r));
        assert_int_equal (tier_msgreader_read (&r, sv[1], &error), 0);
    }
    close (sv[0]);
    sv[0] = -1;
    expect_errno (tier_msgreader_read (&r, sv[1], &error), ENODATA);
    tier_msgreader_fini (&r);
    close (devnull);
    unpair (sv);
    assert_int_equal (fd_probe (), before);
}

/* The writer against a socket whose buffer fills. */
static void test_writer (void **state)
{
    const size_t sizes[] = { 200000, 50, 0, 300000, 7 };
    struct tier_msgwriter w;
    struct tier_msgreader r;
    tier_error_t error;
    char *want[5];
    int sv[2], sz = 4096, devnull, before, got = 0, spins = 0, rc;
    size_t total = 0;

    pair (sv);
    set_nonblock (sv[0]);
    set_nonblock (sv[1]);
    assert_int_equal (setsockopt (sv[0], SOL_SOCKET, SO_SNDBUF, &sz,
                                  sizeof (sz)), 0);
    before = fd_probe ();
    devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    tier_msgwriter_init (&w);
    assert_false (tier_msgwriter_pending (&w));
    assert_int_equal (tier_msgwriter_flush (&w, sv[0], &error), 1);
    for (int m = 0; m < 5; m++) {
        int fds[2] = { devnull, devnull };
        want[m] = pattern (sizes[m], m);
        assert_int_equal (tier_msgwriter_queue (&w, TIER_MSG_RESPONSE, m,
                                                want[m], sizes[m], fds,
                                                m == 1 ? 2 : m == 3), 0);
        total += 16 + sizes[m];
    }
    assert_int_equal (tier_msgwriter_bytes (&w), total);
    /* the caller's descriptor may go at once: the writer has its own */
    assert_int_equal (tier_msgwriter_flush (&w, sv[0], &error), 0);
    assert_true (tier_msgwriter_pending (&w));
    assert_true (tier_msgwriter_bytes (&w) < total);
    tier_msgreader_init (&r, TIER_MSG_MAX);
    while (got < 5) {
        int fds[TIER_MSG_FDS_MAX];
        char *body;

        rc = tier_msgwriter_flush (&w, sv[0], &error);
        assert_true (rc >= 0);
        while ((rc = tier_msgreader_read (&r, sv[1], &error)) == 1) {
            const struct tier_msghdr *h = tier_msgreader_hdr (&r);
            assert_int_equal (h->id, got);
            assert_int_equal (h->type, TIER_MSG_RESPONSE);
            assert_int_equal (h->len, sizes[got]);
            body = tier_msgreader_take_body (&r);
            assert_memory_equal (body, want[got], sizes[got]);
            free (body);
            assert_int_equal (tier_msgreader_take_fds (&r, fds),
                              got == 1 ? 2 : got == 3);
            for (int i = 0; i < (got == 1 ? 2 : got == 3); i++) {
                assert_true (fcntl (fds[i], F_GETFD) & FD_CLOEXEC);
                close (fds[i]);
            }
            tier_msgreader_reset (&r);
            got++;
        }
        assert_int_equal (rc, 0);
        assert_true (++spins < 100000);
    }
    assert_true (spins > 10);           /* it really had to wait */
    assert_false (tier_msgwriter_pending (&w));
    assert_int_equal (tier_msgwriter_bytes (&w), 0);
    assert_int_equal (tier_msgwriter_flush (&w, sv[0], &error), 1);
    tier_msgreader_fini (&r);
    for (int m = 0; m < 5; m++)
        free (want[m]);

    /* bad arguments */
    expect_errno (tier_msgwriter_queue (&w, 0, 1, "x", 1, NULL, 0), EINVAL);
    expect_errno (tier_msgwriter_queue (&w, 1, 1, "x", TIER_MSG_MAX + 1,
                                        NULL, 0), EMSGSIZE);
    {
        int bad = 999;
        expect_errno (tier_msgwriter_queue (&w, 1, 1, "x", 1, &bad, 1),
                      EBADF);
    }
    assert_false (tier_msgwriter_pending (&w));

    /* fini drops what is queued, descriptors included */
    assert_int_equal (tier_msgwriter_queue (&w, 1, 1, "x", 1, &devnull, 1),
                      0);
    tier_msgwriter_fini (&w);
    assert_false (tier_msgwriter_pending (&w));
    close (devnull);
    assert_int_equal (fd_probe (), before);

    /* the peer goes away */
    close (sv[1]);
    sv[1] = -1;
    tier_msgwriter_init (&w);
    assert_int_equal (tier_msgwriter_queue (&w, 1, 1, "{}", 2, NULL, 0), 0);
    assert_int_equal (tier_msgwriter_flush (&w, sv[0], &error), -1);
    assert_true (errno == EPIPE || errno == ECONNRESET);
    tier_msgwriter_fini (&w);
    unpair (sv);
}

/* Every allocation may fail: -1 ENOMEM, nothing leaked (ASan), no
 * descriptor left open.
 */
static void test_failalloc (void **state)
{
    tier_error_t error;
    int devnull = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    int n, done;

    /* blocking receive */
    for (n = 1, done = 0; !done; n++) {
        struct tier_msghdr h;
        char *body;
        int sv[2], fds[1], nfds, before, rc;

        assert_true (n < 100);
        pair (sv);
        assert_int_equal (tier_msg_send (sv[0], 1, 1, "{}", 2, &devnull, 1,
                                         1000, &error), 0);
        before = fd_probe ();
        failalloc_arm (n);
        rc = tier_msg_recv (sv[1], &h, &body, fds, &nfds, 1, TIER_MSG_MAX,
                            1000, &error);
        done = !failalloc_failed;
        failalloc_arm (-1);
        if (done) {
            assert_int_equal (rc, 0);
            assert_int_equal (nfds, 1);
            close (fds[0]);
            free (body);
        }
        else {
            expect_errno (rc, ENOMEM);
            assert_int_equal (fd_probe (), before);
        }
        unpair (sv);
    }
    /* the reader */
    for (n = 1, done = 0; !done; n++) {
        struct tier_msgreader r;
        int sv[2], before, rc;

        assert_true (n < 100);
        pair (sv);
        set_nonblock (sv[1]);
        assert_int_equal (tier_msg_send (sv[0], 1, 1, "{}", 2, &devnull, 1,
                                         1000, &error), 0);
        before = fd_probe ();
        tier_msgreader_init (&r, TIER_MSG_MAX);
        failalloc_arm (n);
        rc = tier_msgreader_read (&r, sv[1], &error);
        done = !failalloc_failed;
        failalloc_arm (-1);
        if (done)
            assert_int_equal (rc, 1);
        else
            expect_errno (rc, ENOMEM);
        tier_msgreader_fini (&r);
        assert_int_equal (fd_probe (), before);
        unpair (sv);
    }
    /* the writer */
    for (n = 1, done = 0; !done; n++) {
        struct tier_msgwriter w;
        int before = fd_probe (), rc;

        assert_true (n < 100);
        tier_msgwriter_init (&w);
        failalloc_arm (n);
        rc = tier_msgwriter_queue (&w, 1, 1, "{}", 2, &devnull, 1);
        done = !failalloc_failed;
        failalloc_arm (-1);
        if (done)
            assert_int_equal (rc, 0);
        else {
            expect_errno (rc, ENOMEM);
            assert_false (tier_msgwriter_pending (&w));
            assert_int_equal (fd_probe (), before);
        }
        tier_msgwriter_fini (&w);
        assert_int_equal (fd_probe (), before);
    }
    close (devnull);
}

/*
 * The client
 */

enum server_mode {
    SRV_OK,             /* {"ok":true} */
    SRV_OK_FD,          /* {"ok":true} with a descriptor */
    SRV_ERRNO,          /* {"errno":13,"error":"..."} */
    SRV_NO_ERRNO,       /* {"error":"..."} */
    SRV_BAD_ERRNO,      /* {"errno":99999,"error":...} */
    SRV_ERROR_NULL,     /* {"error":null} */
    SRV_VERSION,        /* a version 2 header */
    SRV_OTHER_ID,       /* the id plus one */
    SRV_REQUEST,        /* a request instead of a response */
    SRV_MALFORMED,      /* a body that is not JSON */
    SRV_SILENT,         /* no answer until the client goes */
    SRV_CLOSE,          /* hang up */
};

/* A fake agent on fd for one request (in a child process). */
static void serve (int fd, enum server_mode mode)
{
    struct tier_msghdr h;
    const char *reply = "{\"ok\":true}";
    char *body;
    int devnull = open ("/dev/null", O_RDONLY);
    uint32_t id;

    if (tier_msg_recv (fd, &h, &body, NULL, NULL, 0, TIER_MSG_MAX, 5000,
                       NULL) < 0)
        _exit (10);
    if (h.type != TIER_MSG_REQUEST || h.id == 0
        || strcmp (body, "{\"op\":\"ping\"}") != 0)
        _exit (11);
    free (body);
    id = h.id;
    switch (mode) {
        case SRV_OK:
        case SRV_OK_FD:
            break;
        case SRV_ERRNO:
            reply = "{\"errno\": 13, \"error\": "
                    "\"job 42 belongs to another user\"}";
            break;
        case SRV_NO_ERRNO:
            reply = "{\"error\":\"it broke\\u001b[0m\"}";
            break;
        case SRV_BAD_ERRNO:
            reply = "{\"errno\":99999,\"error\":\"odd\"}";
            break;
        case SRV_ERROR_NULL:
            reply = "{\"error\":null,\"errno\":2}";
            break;
        case SRV_VERSION: {
            struct tier_msghdr v = {
                .magic = TIER_PROTO_MAGIC, .version = 2,
                .type = TIER_MSG_RESPONSE, .id = id, .len = 2,
            };
            if (write (fd, &v, sizeof (v)) != sizeof (v)
                || write (fd, "{}", 2) != 2)
                _exit (12);
            _exit (0);
        }
        case SRV_OTHER_ID:
            id++;
            break;
        case SRV_REQUEST:
            if (tier_msg_send (fd, TIER_MSG_REQUEST, id, "{}", 2, NULL, 0,
                               1000, NULL) < 0)
                _exit (12);
            _exit (0);
        case SRV_MALFORMED:
            reply = "{\"ok\":true,}";
            break;
        case SRV_SILENT: {
            char c;
            while (read (fd, &c, 1) > 0)
                ;
            _exit (0);
        }
        case SRV_CLOSE:
            _exit (0);
    }
    if (tier_msg_send (fd, TIER_MSG_RESPONSE, id, reply, strlen (reply),
                       &devnull, mode == SRV_OK_FD ? 1 : 0, 1000, NULL) < 0)
        _exit (13);
    _exit (0);
}

struct call {
    int sv[2];
    pid_t pid;
};

static void call_start (struct call *c, enum server_mode mode)
{
    pair (c->sv);
    c->pid = fork ();
    assert_true (c->pid >= 0);
    if (c->pid == 0) {
        close (c->sv[0]);
        serve (c->sv[1], mode);
    }
    close (c->sv[1]);
    c->sv[1] = -1;
}

static void call_end (struct call *c)
{
    int status;

    unpair (c->sv);
    assert_int_equal (waitpid (c->pid, &status, 0), c->pid);
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
        fail_msg ("the fake agent failed (status 0x%x)", status);
}

static int call (struct call *c, char **reply, size_t *len, int timeout_ms,
                 tier_error_t *error)
{
    return tier_client_call (c->sv[0], "{\"op\":\"ping\"}", NULL, 0, reply,
                             len, timeout_ms, error);
}

static void test_call (void **state)
{
    tier_error_t error = { { 0 } };
    struct call c;
    char *reply;
    size_t len;
    int before = fd_probe (), fds[TIER_MSG_FDS_MAX], nfds;

    call_start (&c, SRV_OK);
    assert_int_equal (call (&c, &reply, &len, 5000, &error), 0);
    assert_string_equal (reply, "{\"ok\":true}");
    assert_int_equal (len, strlen (reply));
    free (reply);
    call_end (&c);

    call_start (&c, SRV_OK_FD);
    assert_int_equal (tier_client_call_fds (c.sv[0], "{\"op\":\"ping\"}",
                                            NULL, 0, &reply, NULL, fds,
                                            &nfds, TIER_MSG_FDS_MAX, 5000,
                                            &error), 0);
    assert_int_equal (nfds, 1);
    assert_true (fcntl (fds[0], F_GETFD) & FD_CLOEXEC);
    close (fds[0]);
    free (reply);
    call_end (&c);

    /* tier_client_call takes no descriptors back */
    call_start (&c, SRV_OK_FD);
    expect_errno (call (&c, &reply, &len, 5000, &error), EPROTO);
    call_end (&c);
    assert_int_equal (fd_probe (), before);

    expect_errno (tier_client_call (0, NULL, NULL, 0, &reply, &len, 0,
                                    &error), EINVAL);
}

static void test_call_errors (void **state)
{
    static const struct {
        enum server_mode mode;
        int err;
        const char *text;
    } cases[] = {
        { SRV_ERRNO, EACCES, "job 42 belongs to another user" },
        { SRV_NO_ERRNO, EIO, "it broke?[0m" },
        { SRV_BAD_ERRNO, EIO, "odd" },
        { SRV_ERROR_NULL, ENOENT, "tierd reported an error" },
        { SRV_VERSION, EPROTO, "tierd speaks protocol version 2, this "
                               "client 1" },
        { SRV_OTHER_ID, EPROTO, "tierd sent the response" },
        { SRV_REQUEST, EPROTO, "tierd sent a request" },
        { SRV_MALFORMED, EPROTO, "not a JSON object" },
        { SRV_CLOSE, ECONNRESET, "closed" },
    };
    int before = fd_probe ();

    for (size_t k = 0; k < sizeof (cases) / sizeof (cases[0]); k++) {
        tier_error_t error = { { 0 } };
        struct call c;
        char *reply = NULL;
        size_t len;

        call_start (&c, cases[k].mode);
        expect_errno (call (&c, &reply, &len, 5000, &error), cases[k].err);
        if (!strstr (error.text, cases[k].text))
            fail_msg ("case %zu: '%s' lacks '%s'", k, error.text,
                      cases[k].text);
        if (cases[k].mode == SRV_ERRNO)
            assert_string_equal (error.text, cases[k].text);
        assert_null (reply);
        call_end (&c);
    }
    assert_int_equal (fd_probe (), before);
}

static void test_call_timeout (void **state)
{
    tier_error_t error;
    struct call c;
    char *reply;
    size_t len;
    int64_t t0 = mono_ms (), dt;

    call_start (&c, SRV_SILENT);
    expect_errno (call (&c, &reply, &len, 200, &error), ETIMEDOUT);
    dt = mono_ms () - t0;
    assert_true (dt >= 190 && dt < 3000);
    call_end (&c);
}

static void test_call_failalloc (void **state)
{
    for (int n = 1; n < 100; n++) {
        tier_error_t error;
        struct call c;
        char *reply;
        size_t len;
        int rc, failed;

        call_start (&c, SRV_OK);
        failalloc_arm (n);
        rc = call (&c, &reply, &len, 5000, &error);
        failed = failalloc_failed;
        failalloc_arm (-1);
        if (!failed) {
            assert_int_equal (rc, 0);
            free (reply);
            call_end (&c);
            return;
        }
        expect_errno (rc, ENOMEM);
        call_end (&c);
    }
    fail_msg ("the call never finished");
}

static char tmpdir[64];

static int dir_setup (void **state)
{
    strcpy (tmpdir, "/tmp/test_proto.XXXXXX");
    if (!mkdtemp (tmpdir))
        return -1;
    chmod (tmpdir, 0755);
    return 0;
}

static int dir_teardown (void **state)
{
    char cmd[128];

    snprintf (cmd, sizeof (cmd), "rm -rf '%s'", tmpdir);
    return system (cmd) == 0 ? 0 : -1;
}

static int listen_at (const char *path, int backlog)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true (fd >= 0);
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", path);
    unlink (path);
    assert_int_equal (bind (fd, (struct sockaddr *) &sa, sizeof (sa)), 0);
    if (backlog >= 0)
        assert_int_equal (listen (fd, backlog), 0);
    return fd;
}

static void test_connect (void **state)
{
    tier_error_t error = { { 0 } };
    char path[100], longpath[200];
    int lfd, fd, fl;

    snprintf (path, sizeof (path), "%s/nothing.sock", tmpdir);
    expect_errno (tier_client_connect (path, 1000, &error), ENOENT);
    assert_non_null (strstr (error.text, path));

    /* a socket nobody listens on */
    snprintf (path, sizeof (path), "%s/dead.sock", tmpdir);
    close (listen_at (path, -1));
    expect_errno (tier_client_connect (path, 1000, &error), ECONNREFUSED);
    assert_non_null (strstr (error.text, path));

    memset (longpath, 'x', sizeof (longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof (longpath) - 1] = '\0';
    expect_errno (tier_client_connect (longpath, 1000, &error),
                  ENAMETOOLONG);
    expect_errno (tier_client_connect ("", 1000, &error), EINVAL);

    if (geteuid () != 0)
        return;                 /* test_connect_root covers the rest */
    snprintf (path, sizeof (path), "%s/root.sock", tmpdir);
    lfd = listen_at (path, 16);
    fd = tier_client_connect (path, 1000, &error);
    if (fd < 0)
        fail_msg ("%s", error.text);
    assert_true (fcntl (fd, F_GETFD) & FD_CLOEXEC);
    assert_true ((fl = fcntl (fd, F_GETFL)) >= 0);
    assert_false (fl & O_NONBLOCK);
    close (fd);
    close (lfd);
}

/* A root agent whose backlog stays full: ETIMEDOUT, on time. */
static void test_connect_timeout (void **state)
{
    tier_error_t error = { { 0 } };
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char path[100];
    int lfd, queued[8], nq = 0;
    int64_t t0, dt;

    if (geteuid () != 0)
        skip ();
    snprintf (path, sizeof (path), "%s/full.sock", tmpdir);
    lfd = listen_at (path, 0);
    snprintf (sa.sun_path, sizeof (sa.sun_path), "%s", path);
    while (nq < 8) {
        int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (connect (fd, (struct sockaddr *) &sa, sizeof (sa)) < 0) {
            assert_int_equal (errno, EAGAIN);
            close (fd);
            break;
        }
        queued[nq++] = fd;
    }
    assert_true (nq >= 1 && nq < 8);
    t0 = mono_ms ();
    expect_errno (tier_client_connect (path, 200, &error), ETIMEDOUT);
    dt = mono_ms () - t0;
    assert_true (dt >= 190 && dt < 3000);
    assert_non_null (strstr (error.text, path));
    while (nq > 0)
        close (queued[--nq]);
    close (lfd);
}

/* A socket served by someone else than root is refused. */
static void test_connect_not_root (void **state)
{
    tier_error_t error = { { 0 } };
    char path[100], c;
    int p[2], status;
    pid_t pid;

    if (geteuid () != 0)
        skip ();
    snprintf (path, sizeof (path), "%s/user.sock", tmpdir);
    assert_int_equal (pipe (p), 0);
    pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int fd = listen_at (path, -1);
        close (p[0]);
        /* SO_PEERCRED records who called listen() */
        if (setresgid (65534, 65534, 65534) < 0
            || setresuid (65534, 65534, 65534) < 0 || listen (fd, 4) < 0)
            _exit (1);
        if (write (p[1], "r", 1) != 1)
            _exit (2);
        for (;;)
            pause ();                   /* until the parent kills it */
    }
    close (p[1]);
    assert_int_equal (read (p[0], &c, 1), 1);
    expect_errno (tier_client_connect (path, 1000, &error), EPERM);
    assert_non_null (strstr (error.text, "is not served by root"));
    assert_non_null (strstr (error.text, path));
    assert_non_null (strstr (error.text, "uid 65534"));
    close (p[0]);
    kill (pid, SIGTERM);
    assert_int_equal (waitpid (pid, &status, 0), pid);
}

/* Connect and call a root agent over its socket. */
static void test_connect_and_call (void **state)
{
    tier_error_t error = { { 0 } };
    char path[100], *reply;
    size_t len;
    int lfd, fd, status;
    pid_t pid;

    if (geteuid () != 0)
        skip ();
    snprintf (path, sizeof (path), "%s/agent.sock", tmpdir);
    lfd = listen_at (path, 4);
    pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int cfd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            _exit (1);
        serve (cfd, SRV_ERRNO);
    }
    close (lfd);
    assert_true ((fd = tier_client_connect (path, 1000, &error)) >= 0);
    expect_errno (tier_client_call (fd, "{\"op\":\"ping\"}", NULL, 0, &reply,
                                    &len, 5000, &error), EACCES);
    assert_string_equal (error.text, "job 42 belongs to another user");
    close (fd);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

/* An agent that refuses a connection says why in a reply with id 0 and
 * closes: the client reports that reason, whether its request went out
 * before the close (the reply is read) or not (EPIPE, then the reply).
 */
static void test_connect_refused (void **state)
{
    static const char why[] = "{\"errno\":11,\"error\":\"uid 7 has 64 "
                              "connections already (ClientsPerUser)\"}";
    tier_error_t error = { { 0 } };
    char path[100], *reply = NULL, c;
    size_t len;

    if (geteuid () != 0)
        skip ();
    snprintf (path, sizeof (path), "%s/refuse.sock", tmpdir);
    for (int late = 0; late < 2; late++) {
        int lfd = listen_at (path, 4), p[2], fd, status;
        pid_t pid;

        assert_int_equal (pipe (p), 0);
        pid = fork ();
        assert_true (pid >= 0);
        if (pid == 0) {
            struct pollfd pfd = { .events = POLLIN };
            tier_error_t e;
            close (p[0]);
            if ((pfd.fd = accept4 (lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
                _exit (1);
            /* late: the request is in when the refusal goes out */
            if (late && poll (&pfd, 1, 5000) != 1)
                _exit (2);
            if (tier_msg_send (pfd.fd, TIER_MSG_RESPONSE, 0, why,
                               strlen (why), NULL, 0, 1000, &e) < 0)
                _exit (3);
            close (pfd.fd);
            _exit (write (p[1], "d", 1) == 1 ? 0 : 4);
        }
        close (p[1]);
        close (lfd);
        assert_true ((fd = tier_client_connect (path, 1000, &error)) >= 0);
        if (!late)                      /* closed before we send */
            assert_int_equal (read (p[0], &c, 1), 1);
        expect_errno (tier_client_call (fd, "{\"op\":\"ping\"}", NULL, 0,
                                        &reply, &len, 5000, &error), EAGAIN);
        assert_null (reply);
        assert_string_equal (error.text, "uid 7 has 64 connections already "
                             "(ClientsPerUser)");
        if (late)
            assert_int_equal (read (p[0], &c, 1), 1);
        close (fd);
        close (p[0]);
        assert_int_equal (waitpid (pid, &status, 0), pid);
        assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
        assert_int_equal (unlink (path), 0);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_hdr_check),
        cmocka_unit_test (test_roundtrip),
        cmocka_unit_test (test_fds),
        cmocka_unit_test (test_large),
        cmocka_unit_test (test_oversize),
        cmocka_unit_test (test_bad_header),
        cmocka_unit_test (test_other_version),
        cmocka_unit_test (test_truncated),
        cmocka_unit_test (test_timeout),
        cmocka_unit_test (test_peer_gone),
        cmocka_unit_test (test_too_many_fds),
        cmocka_unit_test (test_reader_bytewise),
        cmocka_unit_test (test_writer),
        cmocka_unit_test (test_failalloc),
        cmocka_unit_test (test_call),
        cmocka_unit_test (test_call_errors),
        cmocka_unit_test (test_call_timeout),
        cmocka_unit_test (test_call_failalloc),
        cmocka_unit_test (test_connect),
        cmocka_unit_test (test_connect_timeout),
        cmocka_unit_test (test_connect_not_root),
        cmocka_unit_test (test_connect_and_call),
        cmocka_unit_test (test_connect_refused),
    };

    /* SIGPIPE stays fatal: the library must never raise it */
    cmocka_set_message_output (CM_OUTPUT_TAP);
    return cmocka_run_group_tests (tests, dir_setup, dir_teardown);
}

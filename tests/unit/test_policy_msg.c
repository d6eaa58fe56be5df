/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_policy_msg.c - the policy freezer's messages: every message round
 * trip, texts larger than a frame in their sealed memfd, and the
 * refusals (unknown names, other versions, mistyped members, a text in
 * anything but a sealed memfd of its size) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/policy_msg.h"
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_round_trips (void **state)
{
    const struct polmsg ms[] = {
        { .type = POLMSG_NONE },
        { .type = POLMSG_FROZEN, .bytes = 1234 },
        { .type = POLMSG_USER, .bytes = 0 },
        { .type = POLMSG_USER, .bytes = POLMSG_TEXT_MAX },
        { .type = POLMSG_ERROR, .error = "users/alice: not owned by uid" },
    };

    for (size_t i = 0; i < sizeof (ms) / sizeof (ms[0]); i++) {
        struct polmsg out;
        tier_error_t e;
        json_t *body;
        char *text;
        int type;

        text = chmsg_encode (&polmsg_proto, ms[i].type, polmsg_pack (&ms[i]));
        assert_non_null (text);
        assert_int_equal (chmsg_decode (&polmsg_proto, text, strlen (text),
                                        &type, &body, &e),
                          0);
        free (text);
        assert_int_equal (type, ms[i].type);
        assert_int_equal (polmsg_unpack (type, body, &out, &e), 0);
        assert_int_equal (out.type, ms[i].type);
        assert_true (out.bytes == ms[i].bytes);
        if (ms[i].error)
            assert_string_equal (out.error, ms[i].error);
        else
            assert_null (out.error);
        json_decref (body);
    }
}

static void refused (const char *text)
{
    tier_error_t e;
    json_t *body = NULL;
    int type;

    errno = 0;
    assert_int_equal (chmsg_decode (&polmsg_proto, text, strlen (text), &type,
                                    &body, &e),
                      -1);
    assert_int_equal (errno, EPROTO);
    assert_null (body);
}

static void test_unknown_names (void **state)
{
    struct polmsg m = { .type = 42 };

    refused ("{\"t\":\"F\",\"v\":1}");
    refused ("{\"t\":\"frozen_set\",\"v\":1,\"bytes\":1}");
    refused ("{\"v\":1,\"bytes\":1}");
    refused ("[\"frozen\",1]");
    assert_null (polmsg_pack (&m));
    assert_int_equal (errno, EINVAL);
}

static void test_versions (void **state)
{
    refused ("{\"t\":\"none\",\"v\":2}");
    refused ("{\"t\":\"frozen\",\"v\":0,\"bytes\":1}");
    refused ("{\"t\":\"none\"}");
}

static void mistyped (const char *text)
{
    struct polmsg m;
    tier_error_t e;
    json_t *body;
    int type;

    assert_int_equal (chmsg_decode (&polmsg_proto, text, strlen (text), &type,
                                    &body, &e),
                      0);
    errno = 0;
    assert_int_equal (polmsg_unpack (type, body, &m, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_non_null (strstr (e.text, "policy freezer channel"));
    json_decref (body);
}

static void test_mistyped (void **state)
{
    struct polmsg bad[] = {
        { .type = POLMSG_ERROR, .error = NULL },
        { .type = POLMSG_FROZEN, .bytes = POLMSG_TEXT_MAX + 1ULL },
    };

    mistyped ("{\"t\":\"frozen\",\"v\":1}");
    mistyped ("{\"t\":\"frozen\",\"v\":1,\"bytes\":\"12\"}");
    mistyped ("{\"t\":\"frozen\",\"v\":1,\"bytes\":-1}");
    mistyped ("{\"t\":\"user\",\"v\":1,\"bytes\":4194305}");
    mistyped ("{\"t\":\"user\",\"v\":1,\"bytes\":true}");
    mistyped ("{\"t\":\"error\",\"v\":1}");
    mistyped ("{\"t\":\"error\",\"v\":1,\"error\":[\"x\"]}");
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_null (polmsg_pack (&bad[i]));
        assert_int_equal (errno, EINVAL);
    }
}

/* The freezer's answer, as the agent's child_ask gets it. */
static void recv_answer (int fd, struct polmsg *m, char **text)
{
    tier_error_t e;
    json_t *body;
    int type, fds[1] = { -1 }, nfds = 0;

    assert_int_equal (chmsg_recv (fd, &polmsg_proto, &type, &body, fds, &nfds,
                                  1, 1000, &e),
                      0);
    assert_int_equal (polmsg_unpack (type, body, m, &e), 0);
    *text = NULL;
    if (m->type == POLMSG_FROZEN || m->type == POLMSG_USER) {
        assert_int_equal (nfds, 1);
        assert_int_equal (polmsg_text_read (m, fds[0], text, &e), 0);
    }
    else
        assert_int_equal (nfds, 0);
    if (nfds > 0)
        close (fds[0]);
    json_decref (body);
}

static void test_send (void **state)
{
    /* larger than a frame's whole body (TIER_MSG_MAX) */
    size_t big = 3 * 1024 * 1024;
    char *large = malloc (big + 1), *text;
    struct polmsg m;
    int sv[2];

    assert_non_null (large);
    for (size_t i = 0; i < big; i++)
        large[i] = (char) ('a' + i % 26);
    large[big] = '\0';
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    assert_int_equal (polmsg_send (sv[1], POLMSG_FROZEN, "{\"format\":1}"), 0);
    recv_answer (sv[0], &m, &text);
    assert_int_equal (m.type, POLMSG_FROZEN);
    assert_string_equal (text, "{\"format\":1}");
    free (text);
    assert_int_equal (polmsg_send (sv[1], POLMSG_USER, large), 0);
    recv_answer (sv[0], &m, &text);
    assert_int_equal (m.type, POLMSG_USER);
    assert_true (m.bytes == big);
    assert_memory_equal (text, large, big + 1);
    free (text);
    assert_int_equal (polmsg_send (sv[1], POLMSG_USER, ""), 0);
    recv_answer (sv[0], &m, &text);
    assert_string_equal (text, "");
    free (text);
    assert_int_equal (polmsg_send (sv[1], POLMSG_NONE, NULL), 0);
    recv_answer (sv[0], &m, &text);
    assert_int_equal (m.type, POLMSG_NONE);
    assert_int_equal (polmsg_send (sv[1], POLMSG_ERROR, "no such user"), 0);
    recv_answer (sv[0], &m, &text);
    assert_int_equal (m.type, POLMSG_ERROR);
    close (sv[0]);
    close (sv[1]);
    free (large);
}

static void text_refused (const struct polmsg *m, int fd)
{
    tier_error_t e;
    char *text = (char *) "x";

    errno = 0;
    assert_int_equal (polmsg_text_read (m, fd, &text, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_null (text);
}

static void test_text_refusals (void **state)
{
    struct polmsg m = { .type = POLMSG_USER, .bytes = 5 };
    char path[] = "/tmp/test_policy_msg.XXXXXX";
    int fd, p[2];

    /* none */
    text_refused (&m, -1);
    /* a regular file: it could be on a file system that hangs */
    assert_true ((fd = mkstemp (path)) >= 0);
    assert_int_equal (write (fd, "hello", 5), 5);
    (void) unlink (path);
    text_refused (&m, fd);
    close (fd);
    /* a pipe */
    assert_int_equal (pipe (p), 0);
    text_refused (&m, p[0]);
    close (p[0]);
    close (p[1]);
    /* a memfd without its seals: it could still change */
    assert_true ((fd = memfd_create ("t", MFD_CLOEXEC | MFD_ALLOW_SEALING))
                 >= 0);
    assert_int_equal (write (fd, "hello", 5), 5);
    text_refused (&m, fd);
    close (fd);
    /* sealed, of another size */
    assert_true ((fd = polmsg_text_fd ("hello!", 6)) >= 0);
    text_refused (&m, fd);
    close (fd);
    /* sealed, of its size */
    assert_true ((fd = polmsg_text_fd ("hello", 5)) >= 0);
    {
        tier_error_t e;
        char *text;
        assert_int_equal (polmsg_text_read (&m, fd, &text, &e), 0);
        assert_string_equal (text, "hello");
        free (text);
        /* and it cannot be written any more */
        assert_int_equal (write (fd, "x", 1), -1);
    }
    close (fd);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_round_trips),
        cmocka_unit_test (test_unknown_names),
        cmocka_unit_test (test_versions),
        cmocka_unit_test (test_mistyped),
        cmocka_unit_test (test_send),
        cmocka_unit_test (test_text_refusals),
    };
    return UNIT_RUN (tests);
}

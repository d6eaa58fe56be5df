/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_replica_msg.c - the messages of the replica fetcher and the
 * mirror walker: every message round trip, on its own channel only, the
 * refusals (unknown names, other versions, mistyped or out-of-range
 * members), and a manifest larger than a frame as a sealed memfd */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/replica_msg.h"
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* m through its channel's encoding and back into out (body: the caller
 * decrefs it). */
static json_t *round_trip (const struct repmsg *m, struct repmsg *out)
{
    const struct chmsg_proto *p = repmsg_proto (m->type);
    tier_error_t e;
    json_t *body;
    char *text;
    int type;

    assert_non_null (p);
    text = chmsg_encode (p, m->type, repmsg_pack (m));
    assert_non_null (text);
    assert_int_equal (chmsg_decode (p, text, strlen (text), &type, &body, &e),
                      0);
    free (text);
    assert_int_equal (type, m->type);
    assert_int_equal (repmsg_unpack (type, body, out, &e), 0);
    assert_int_equal (out->type, m->type);
    return body;
}

static void test_round_trips (void **state)
{
    const struct repmsg ms[] = {
        { .type = REPMSG_COPIED, .bytes = 1ULL << 40 },
        { .type = REPMSG_COPIED, .bytes = 0 },
        { .type = REPMSG_FOUND },
        { .type = REPMSG_PROGRESS, .bytes = 1ULL << 20 },
        { .type = REPMSG_FAILED, .error = "waited 30 s for the copy by n2" },
        { .type = REPMSG_MANIFEST, .bytes = REPMSG_MANIFEST_MAX },
        { .type = REPMSG_WALK_ERROR, .error = "/gfs/x: Permission denied" },
        { .type = REPMSG_BUILT, .files = 150000, .bytes = 1ULL << 36 },
        { .type = REPMSG_BUILD_ERROR, .error = "/gfs/db has no replicas yet" },
        { .type = REPMSG_BINDS, .binds = "/gfs/db=/bb/mirrors/u1001/ab/tree" },
        { .type = REPMSG_BINDS, .binds = "" },
    };

    for (size_t i = 0; i < sizeof (ms) / sizeof (ms[0]); i++) {
        struct repmsg out;
        json_t *body = round_trip (&ms[i], &out);

        assert_true (out.bytes == ms[i].bytes);
        assert_true (out.files == ms[i].files);
        if (ms[i].error)
            assert_string_equal (out.error, ms[i].error);
        else
            assert_null (out.error);
        if (ms[i].binds)
            assert_string_equal (out.binds, ms[i].binds);
        else
            assert_null (out.binds);
        json_decref (body);
    }
    assert_ptr_equal (repmsg_proto (REPMSG_FOUND), &repmsg_fetch_proto);
    assert_ptr_equal (repmsg_proto (REPMSG_MANIFEST), &repmsg_walk_proto);
    assert_ptr_equal (repmsg_proto (REPMSG_BUILT), &repmsg_mirror_proto);
    assert_ptr_equal (repmsg_proto (REPMSG_BUILD_ERROR), &repmsg_mirror_proto);
    assert_ptr_equal (repmsg_proto (REPMSG_BINDS), &repmsg_binds_proto);
    assert_null (repmsg_proto (0));
    assert_null (repmsg_proto (99));
}

/* decode text on channel p: -1 with EPROTO */
static void refused (const struct chmsg_proto *p, const char *text)
{
    tier_error_t e;
    json_t *body = NULL;
    int type;

    errno = 0;
    assert_int_equal (chmsg_decode (p, text, strlen (text), &type, &body, &e),
                      -1);
    assert_int_equal (errno, EPROTO);
    assert_null (body);
}

static void test_unknown_names (void **state)
{
    refused (&repmsg_fetch_proto, "{\"t\":\"nope\",\"v\":1}");
    refused (&repmsg_fetch_proto, "{\"v\":1,\"bytes\":3}");
    refused (&repmsg_fetch_proto, "not json");
    /* each channel has its own messages only */
    refused (&repmsg_fetch_proto, "{\"t\":\"manifest\",\"v\":1,\"bytes\":1}");
    refused (&repmsg_fetch_proto, "{\"t\":\"error\",\"v\":1,\"error\":\"x\"}");
    refused (&repmsg_walk_proto, "{\"t\":\"copied\",\"v\":1,\"bytes\":1}");
    refused (&repmsg_walk_proto, "{\"t\":\"found\",\"v\":1}");
    refused (&repmsg_walk_proto, "{\"t\":\"failed\",\"v\":1,\"error\":\"x\"}");
    refused (&repmsg_binds_proto,
             "{\"t\":\"built\",\"v\":1,\"files\":1,\"bytes\":1}");
    /* an unknown type cannot be packed or sent */
    {
        struct repmsg m = { .type = 99 };
        errno = 0;
        assert_null (repmsg_pack (&m));
        assert_int_equal (errno, EINVAL);
        assert_int_equal (repmsg_send (-1, &m, -1), -1);
    }
}

static void test_versions (void **state)
{
    refused (&repmsg_fetch_proto, "{\"t\":\"found\",\"v\":2}");
    refused (&repmsg_fetch_proto, "{\"t\":\"found\",\"v\":0}");
    refused (&repmsg_fetch_proto, "{\"t\":\"found\",\"v\":\"1\"}");
    refused (&repmsg_walk_proto, "{\"t\":\"manifest\",\"v\":7,\"bytes\":1}");
}

/* decode text on the channel of its message (it must decode), then
 * unpack: refused */
static void mistyped (const struct chmsg_proto *p, const char *text)
{
    tier_error_t e;
    struct repmsg m;
    json_t *body;
    int type = 0;

    assert_int_equal (chmsg_decode (p, text, strlen (text), &type, &body, &e),
                      0);
    errno = 0;
    assert_int_equal (repmsg_unpack (type, body, &m, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_non_null (strstr (e.text, "channel"));
    json_decref (body);
}

static void test_mistyped (void **state)
{
    mistyped (&repmsg_fetch_proto, "{\"t\":\"copied\",\"v\":1}");
    mistyped (&repmsg_fetch_proto, "{\"t\":\"copied\",\"v\":1,\"bytes\":-1}");
    mistyped (&repmsg_fetch_proto,
              "{\"t\":\"copied\",\"v\":1,\"bytes\":\"12\"}");
    mistyped (&repmsg_fetch_proto, "{\"t\":\"copied\",\"v\":1,\"bytes\":1.5}");
    mistyped (&repmsg_fetch_proto, "{\"t\":\"failed\",\"v\":1}");
    mistyped (&repmsg_fetch_proto, "{\"t\":\"failed\",\"v\":1,\"error\":5}");
    mistyped (&repmsg_walk_proto, "{\"t\":\"manifest\",\"v\":1}");
    mistyped (&repmsg_walk_proto,
              "{\"t\":\"manifest\",\"v\":1,\"bytes\":67108865}");
    mistyped (&repmsg_walk_proto, "{\"t\":\"manifest\",\"v\":1,\"bytes\":-3}");
    mistyped (&repmsg_walk_proto, "{\"t\":\"error\",\"v\":1,\"error\":null}");
    mistyped (&repmsg_binds_proto, "{\"t\":\"binds\",\"v\":1}");
    mistyped (&repmsg_binds_proto, "{\"t\":\"binds\",\"v\":1,\"binds\":5}");
}

/* Members of a later version are ignored. */
static void test_extra_members (void **state)
{
    const char *text = "{\"t\":\"copied\",\"v\":1,\"bytes\":9,\"new\":[1]}";
    tier_error_t e;
    struct repmsg m;
    json_t *body;
    int type;

    assert_int_equal (chmsg_decode (&repmsg_fetch_proto, text, strlen (text),
                                    &type, &body, &e),
                      0);
    assert_int_equal (repmsg_unpack (type, body, &m, &e), 0);
    assert_true (m.bytes == 9);
    json_decref (body);
}

static void test_pack_refusals (void **state)
{
    const struct repmsg bad[] = {
        { .type = REPMSG_FAILED, .error = NULL },
        { .type = REPMSG_WALK_ERROR, .error = NULL },
        { .type = REPMSG_COPIED, .bytes = UINT64_MAX },
        { .type = REPMSG_MANIFEST, .bytes = REPMSG_MANIFEST_MAX + 1ULL },
        { .type = REPMSG_BUILT, .files = UINT64_MAX },
        { .type = REPMSG_BUILD_ERROR, .error = NULL },
    };

    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_null (repmsg_pack (&bad[i]));
        assert_int_equal (errno, EINVAL);
    }
}

/* The fetcher's one result, as the agent receives it. */
static void test_send_result (void **state)
{
    struct repmsg m = { .type = REPMSG_COPIED, .bytes = 4096 };
    struct repmsg out;
    tier_error_t e;
    json_t *body;
    int sv[2], type;

    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    assert_int_equal (repmsg_send (sv[1], &m, -1), 0);
    close (sv[1]);
    assert_int_equal (chmsg_recv (sv[0], &repmsg_fetch_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      0);
    assert_int_equal (repmsg_unpack (type, body, &out, &e), 0);
    assert_int_equal (out.type, REPMSG_COPIED);
    assert_true (out.bytes == 4096);
    json_decref (body);
    /* then the end of the channel */
    assert_int_equal (chmsg_recv (sv[0], &repmsg_fetch_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      -1);
    assert_true (errno == ECONNRESET || errno == ENODATA);
    close (sv[0]);
    /* a walker's message is refused on the fetcher's channel */
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    m = (struct repmsg){ .type = REPMSG_WALK_ERROR, .error = "x" };
    assert_int_equal (repmsg_send (sv[1], &m, -1), 0);
    assert_int_equal (chmsg_recv (sv[0], &repmsg_fetch_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      -1);
    assert_int_equal (errno, EPROTO);
    close (sv[0]);
    close (sv[1]);
}

/* A manifest larger than a frame's whole body, as the walker sends it. */
static void test_send_manifest (void **state)
{
    size_t big = 3 * 1024 * 1024;
    char *large = malloc (big + 1), *text = NULL;
    struct repmsg m = { .type = REPMSG_MANIFEST, .bytes = big }, out;
    int sv[2], fds[1] = { -1 }, nfds = 0, type, fd;
    tier_error_t e;
    json_t *body;

    assert_non_null (large);
    for (size_t i = 0; i < big; i++)
        large[i] = i % 80 == 79 ? '\n' : (char) ('a' + i % 26);
    large[big] = '\0';
    assert_true ((fd = chmsg_text_fd ("t", large, big)) >= 0);
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    assert_int_equal (repmsg_send (sv[1], &m, fd), 0);
    close (fd);
    assert_int_equal (chmsg_recv (sv[0], &repmsg_walk_proto, &type, &body, fds,
                                  &nfds, 1, 1000, &e),
                      0);
    assert_int_equal (nfds, 1);
    assert_int_equal (repmsg_unpack (type, body, &out, &e), 0);
    assert_int_equal (out.type, REPMSG_MANIFEST);
    assert_true (out.bytes == big);
    /* read only as a sealed memfd of its size, at most the bound */
    assert_int_equal (chmsg_text_read (fds[0], out.bytes - 1, big, &text), -1);
    assert_int_equal (errno, EPROTO);
    assert_int_equal (chmsg_text_read (fds[0], out.bytes, big - 1, &text), -1);
    assert_int_equal (errno, EPROTO);
    assert_int_equal (chmsg_text_read (fds[0], out.bytes, big, &text), 0);
    assert_memory_equal (text, large, big + 1);
    free (text);
    /* and it cannot be written any more */
    assert_int_equal (write (fds[0], "x", 1), -1);
    close (fds[0]);
    json_decref (body);
    /* an unsealed memfd is refused */
    assert_true ((fd = memfd_create ("t", MFD_CLOEXEC | MFD_ALLOW_SEALING))
                 >= 0);
    assert_int_equal (write (fd, "hello", 5), 5);
    text = (char *) "x";
    assert_int_equal (chmsg_text_read (fd, 5, 5, &text), -1);
    assert_int_equal (errno, EPROTO);
    assert_null (text);
    close (fd);
    close (sv[0]);
    close (sv[1]);
    free (large);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_round_trips),
        cmocka_unit_test (test_unknown_names),
        cmocka_unit_test (test_versions),
        cmocka_unit_test (test_mistyped),
        cmocka_unit_test (test_extra_members),
        cmocka_unit_test (test_pack_refusals),
        cmocka_unit_test (test_send_result),
        cmocka_unit_test (test_send_manifest),
    };
    return UNIT_RUN (tests);
}

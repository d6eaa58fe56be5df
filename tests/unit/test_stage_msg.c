/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_stage_msg.c - the messages of stage-in's children: every message
 * round trip, on its own channel only, and the refusals (unknown names,
 * other versions, mistyped or out-of-range members) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/stage_msg.h"
#include "unit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* m through its channel's encoding and back into out (body: the caller
 * decrefs it). */
static json_t *round_trip (const struct stagemsg *m, struct stagemsg *out)
{
    const struct chmsg_proto *p = stagemsg_proto (m->type);
    tier_error_t e;
    json_t *body;
    char *text;
    int type;

    assert_non_null (p);
    text = chmsg_encode (p, m->type, stagemsg_pack (m));
    assert_non_null (text);
    assert_int_equal (chmsg_decode (p, text, strlen (text), &type, &body, &e),
                      0);
    free (text);
    assert_int_equal (type, m->type);
    assert_int_equal (stagemsg_unpack (type, body, out, &e), 0);
    assert_int_equal (out->type, m->type);
    return body;
}

static void test_round_trips (void **state)
{
    const struct stagemsg ms[] = {
        { .type = STAGEMSG_TOTAL, .total = 1ULL << 40 },
        { .type = STAGEMSG_PROGRESS, .done = 12345 },
        { .type = STAGEMSG_QUEUED, .on = true },
        { .type = STAGEMSG_QUEUED, .on = false },
        { .type = STAGEMSG_MADE,
          .k = 3,
          .dev = 2049,
          .ino = UINT64_MAX - 5,
          .ref = "42-n1-3" },
        { .type = STAGEMSG_MADE, .k = 0, .dev = 1, .ino = 2, .ref = "" },
        { .type = STAGEMSG_ERROR, .error = "/gfs/x: No such file" },
        { .type = STAGEMSG_DONE,
          .files = 7,
          .bytes = 1ULL << 33,
          .gfs = 99,
          .meta = 12 },
        { .type = STAGEMSG_SOURCE, .k = 2, .path = "/gfs/p/v3/db" },
        { .type = STAGEMSG_LOG, .level = 3, .text = "job 1: stage-in: x" },
        { .type = STAGEMSG_REMOVED, .removed = 4 },
    };

    for (size_t i = 0; i < sizeof (ms) / sizeof (ms[0]); i++) {
        struct stagemsg out;
        json_t *body = round_trip (&ms[i], &out);

        assert_true (out.total == ms[i].total);
        assert_true (out.done == ms[i].done);
        assert_int_equal (out.on, ms[i].on);
        assert_int_equal (out.k, ms[i].k);
        assert_true (out.dev == ms[i].dev);
        assert_true (out.ino == ms[i].ino);
        assert_true (out.files == ms[i].files);
        assert_true (out.bytes == ms[i].bytes);
        assert_true (out.gfs == ms[i].gfs);
        assert_true (out.meta == ms[i].meta);
        assert_int_equal (out.level, ms[i].level);
        assert_int_equal (out.removed, ms[i].removed);
        if (ms[i].ref)
            assert_string_equal (out.ref, ms[i].ref);
        if (ms[i].error)
            assert_string_equal (out.error, ms[i].error);
        if (ms[i].text)
            assert_string_equal (out.text, ms[i].text);
        if (ms[i].path)
            assert_string_equal (out.path, ms[i].path);
        json_decref (body);
    }
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
    refused (&stagemsg_copier_proto, "{\"t\":\"nope\",\"v\":1}");
    refused (&stagemsg_copier_proto, "{\"v\":1,\"total\":3}");
    refused (&stagemsg_copier_proto, "not json");
    /* each channel has its own messages only */
    refused (&stagemsg_copier_proto,
             "{\"t\":\"log\",\"v\":1,\"level\":3,\"text\":\"x\"}");
    refused (&stagemsg_copier_proto, "{\"t\":\"removed\",\"v\":1,"
                                     "\"removed\":1}");
    refused (&stagemsg_stager_proto, "{\"t\":\"done\",\"v\":1,\"files\":1,"
                                     "\"bytes\":1,\"gfs\":1,\"meta\":1}");
    refused (&stagemsg_unmake_proto, "{\"t\":\"total\",\"v\":1,"
                                     "\"total\":1}");
    /* an unknown type cannot be packed or sent */
    {
        struct stagemsg m = { .type = 99 };
        assert_null (stagemsg_pack (&m));
        assert_int_equal (errno, EINVAL);
        assert_int_equal (stagemsg_send (-1, &m), -1);
        assert_null (stagemsg_proto (0));
    }
}

static void test_versions (void **state)
{
    refused (&stagemsg_copier_proto, "{\"t\":\"total\",\"v\":2,\"total\":1}");
    refused (&stagemsg_copier_proto, "{\"t\":\"total\",\"v\":0,\"total\":1}");
    refused (&stagemsg_copier_proto,
             "{\"t\":\"total\",\"v\":\"1\",\"total\":1}");
    refused (&stagemsg_stager_proto,
             "{\"t\":\"log\",\"v\":7,\"level\":3,\"text\":\"x\"}");
}

/* decode text on its channel (it must decode), then unpack: refused */
static void mistyped (const char *text)
{
    tier_error_t e;
    struct stagemsg m;
    json_t *body, *o;
    const char *name;
    int type = 0;

    o = json_loads (text, 0, NULL);
    assert_non_null (o);
    name = json_string_value (json_object_get (o, "t"));
    for (int t = STAGEMSG_TOTAL; t <= STAGEMSG_REMOVED; t++)
        if (!strcmp (chmsg_name (stagemsg_proto (t), t), name))
            type = t;
    json_decref (o);
    assert_int_not_equal (type, 0);
    assert_int_equal (chmsg_decode (stagemsg_proto (type), text, strlen (text),
                                    &type, &body, &e),
                      0);
    errno = 0;
    assert_int_equal (stagemsg_unpack (type, body, &m, &e), -1);
    assert_int_equal (errno, EPROTO);
    assert_non_null (strstr (e.text, "channel"));
    json_decref (body);
}

static void test_mistyped (void **state)
{
    mistyped ("{\"t\":\"total\",\"v\":1,\"total\":\"12\"}");
    mistyped ("{\"t\":\"total\",\"v\":1,\"total\":1.5}");
    mistyped ("{\"t\":\"total\",\"v\":1,\"total\":-1}");
    mistyped ("{\"t\":\"total\",\"v\":1}");
    mistyped ("{\"t\":\"progress\",\"v\":1,\"done\":null}");
    mistyped ("{\"t\":\"queued\",\"v\":1,\"on\":1}");
    mistyped ("{\"t\":\"made\",\"v\":1,\"k\":-1,\"dev\":1,\"ino\":2,"
              "\"ref\":\"\"}");
    mistyped ("{\"t\":\"made\",\"v\":1,\"k\":4294967296,\"dev\":1,"
              "\"ino\":2,\"ref\":\"\"}");
    mistyped ("{\"t\":\"made\",\"v\":1,\"k\":1,\"dev\":1,\"ino\":2,"
              "\"ref\":\"../x\"}");
    mistyped ("{\"t\":\"made\",\"v\":1,\"k\":1,\"dev\":\"1\",\"ino\":2,"
              "\"ref\":\"r\"}");
    mistyped ("{\"t\":\"made\",\"v\":1,\"k\":1,\"dev\":1,\"ino\":2}");
    mistyped ("{\"t\":\"source\",\"v\":1,\"k\":-1,\"path\":\"/a\"}");
    mistyped ("{\"t\":\"source\",\"v\":1,\"k\":1,\"path\":\"a/b\"}");
    mistyped ("{\"t\":\"source\",\"v\":1,\"k\":1}");
    mistyped ("{\"t\":\"error\",\"v\":1,\"error\":5}");
    mistyped ("{\"t\":\"done\",\"v\":1,\"files\":1,\"bytes\":1,\"gfs\":1}");
    mistyped ("{\"t\":\"done\",\"v\":1,\"files\":1,\"bytes\":-2,\"gfs\":1,"
              "\"meta\":0}");
    mistyped ("{\"t\":\"log\",\"v\":1,\"level\":8,\"text\":\"x\"}");
    mistyped ("{\"t\":\"log\",\"v\":1,\"level\":\"err\",\"text\":\"x\"}");
    mistyped ("{\"t\":\"removed\",\"v\":1,\"removed\":true}");
    mistyped ("{\"t\":\"removed\",\"v\":1,\"removed\":4294967296}");
}

/* Members of a later version are ignored. */
static void test_extra_members (void **state)
{
    const char *text = "{\"t\":\"total\",\"v\":1,\"total\":9,\"new\":[1]}";
    tier_error_t e;
    struct stagemsg m;
    json_t *body;
    int type;

    assert_int_equal (chmsg_decode (&stagemsg_copier_proto, text, strlen (text),
                                    &type, &body, &e),
                      0);
    assert_int_equal (stagemsg_unpack (type, body, &m, &e), 0);
    assert_true (m.total == 9);
    json_decref (body);
}

static void test_pack_refusals (void **state)
{
    char longref[STAGEMSG_REF_MAX + 1];
    const struct stagemsg bad[] = {
        { .type = STAGEMSG_MADE, .k = 1, .ref = "a/b" },
        { .type = STAGEMSG_MADE, .k = 1, .ref = NULL },
        { .type = STAGEMSG_MADE, .k = -1, .ref = "" },
        { .type = STAGEMSG_MADE, .k = 1, .ref = longref },
        { .type = STAGEMSG_ERROR, .error = NULL },
        { .type = STAGEMSG_SOURCE, .k = 1, .path = "relative" },
        { .type = STAGEMSG_SOURCE, .k = 1, .path = NULL },
        { .type = STAGEMSG_LOG, .level = 8, .text = "x" },
        { .type = STAGEMSG_LOG, .level = 3, .text = NULL },
        { .type = STAGEMSG_TOTAL, .total = UINT64_MAX },
        { .type = STAGEMSG_DONE, .meta = UINT64_MAX },
        { .type = STAGEMSG_REMOVED, .removed = -1 },
    };

    memset (longref, 'r', sizeof (longref) - 1);
    longref[sizeof (longref) - 1] = '\0';
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad[0]); i++) {
        errno = 0;
        assert_null (stagemsg_pack (&bad[i]));
        assert_int_equal (errno, EINVAL);
    }
}

/* A child's send, as the stager receives it. */
static void test_send (void **state)
{
    struct stagemsg m = { .type = STAGEMSG_ERROR, .error = "it failed" };
    struct stagemsg out;
    tier_error_t e;
    json_t *body;
    int sv[2], type;

    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    assert_int_equal (stagemsg_send (sv[1], &m), 0);
    m = (struct stagemsg){ .type = STAGEMSG_DONE, .files = 2, .bytes = 3 };
    assert_int_equal (stagemsg_send (sv[1], &m), 0);
    close (sv[1]);
    assert_int_equal (chmsg_recv (sv[0], &stagemsg_copier_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      0);
    assert_int_equal (stagemsg_unpack (type, body, &out, &e), 0);
    assert_int_equal (out.type, STAGEMSG_ERROR);
    assert_string_equal (out.error, "it failed");
    json_decref (body);
    assert_int_equal (chmsg_recv (sv[0], &stagemsg_copier_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      0);
    assert_int_equal (stagemsg_unpack (type, body, &out, &e), 0);
    assert_int_equal (out.type, STAGEMSG_DONE);
    assert_true (out.files == 2 && out.bytes == 3);
    json_decref (body);
    /* then the end of the channel */
    assert_int_equal (chmsg_recv (sv[0], &stagemsg_copier_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      -1);
    assert_true (errno == ECONNRESET || errno == ENODATA);
    close (sv[0]);
    /* a message of the stager's channel is refused on the copier's */
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                      0);
    m = (struct stagemsg){ .type = STAGEMSG_LOG, .level = 6, .text = "x" };
    assert_int_equal (stagemsg_send (sv[1], &m), 0);
    assert_int_equal (chmsg_recv (sv[0], &stagemsg_copier_proto, &type, &body,
                                  NULL, NULL, 0, 1000, &e),
                      -1);
    assert_int_equal (errno, EPROTO);
    close (sv[0]);
    close (sv[1]);
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
        cmocka_unit_test (test_send),
    };
    return UNIT_RUN (tests);
}

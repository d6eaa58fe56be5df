/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_migrate_msg.c - the messages between the agent and a migrator:
 * round trips of every type, the wire names, and what is refused */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "agent/migrate_msg.h"
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Every member set, each to a value of its own. */
static struct migmsg full (enum migmsg_type type)
{
    struct migmsg m = {
        .type = type,
        .k = 3,
        .rel = "dir/with space/f%.txt",
        .seq = 4000000000u,
        .flush = true,
        .pending = 5,
        .failed = 6,
        .conflicts = 7,
        .error = "No space left on device",
        .err = 28,
        .first = true,
        .ours = true,
        .size = 1LL << 40,
        .mtime = { .tv_sec = 1700000000, .tv_nsec = 123456789 },
        .sha256 = "e3b0c44298fc1c149afbf4c8996fb924"
                  "27ae41e4649b934ca495991b7852b855",
        .ino = 4242,
        .gfs_size = 99,
        .gfs_mtime = { .tv_sec = 1700000001, .tv_nsec = 0 },
        .gfs_ctime = { .tv_sec = 1700000002, .tv_nsec = 999999999 },
        .us = 12345,
        .etag = "\"abc-2\"",
        .upload_id = "up/1+2",
        .part_size = 8 << 20,
        .mtime_ns = -5,
        .n = 17,
        .side = ".tier-conflicts/42/n1/f",
        .on = true,
    };
    return m;
}

static void same_str (const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal (a, b);
    else
        assert_string_equal (a, b);
}

/* b (decoded from body) holds a's value of each member body has, and
 * zero for the others. */
static void expect_same (const struct migmsg *a, const struct migmsg *b,
                         json_t *body)
{
    struct migmsg z = { 0 };
#define HAS(name) (json_object_get (body, name) != NULL)
#define FROM(name) (HAS (name) ? a : &z)
    assert_int_equal (b->type, a->type);
    assert_int_equal (b->k, FROM ("k")->k);
    same_str (b->rel, FROM ("rel")->rel);
    assert_int_equal (b->seq, FROM ("seq")->seq);
    assert_int_equal (b->flush, FROM ("flush")->flush);
    assert_int_equal (b->pending, FROM ("pending")->pending);
    assert_int_equal (b->failed, FROM ("failed")->failed);
    assert_int_equal (b->conflicts, FROM ("conflicts")->conflicts);
    same_str (b->error, FROM ("error")->error);
    assert_int_equal (b->err, FROM ("errno")->err);
    assert_int_equal (b->first, FROM ("first")->first);
    assert_int_equal (b->ours, FROM ("ours")->ours);
    assert_int_equal (b->size, FROM ("size")->size);
    assert_int_equal (b->mtime.tv_sec, FROM ("mtime")->mtime.tv_sec);
    assert_int_equal (b->mtime.tv_nsec, FROM ("mtime")->mtime.tv_nsec);
    same_str (b->sha256, FROM ("sha256")->sha256);
    assert_int_equal (b->ino, FROM ("ino")->ino);
    assert_int_equal (b->gfs_size, FROM ("gfs_size")->gfs_size);
    assert_int_equal (b->gfs_mtime.tv_sec,
                      FROM ("gfs_mtime")->gfs_mtime.tv_sec);
    assert_int_equal (b->gfs_mtime.tv_nsec,
                      FROM ("gfs_mtime")->gfs_mtime.tv_nsec);
    assert_int_equal (b->gfs_ctime.tv_sec,
                      FROM ("gfs_ctime")->gfs_ctime.tv_sec);
    assert_int_equal (b->gfs_ctime.tv_nsec,
                      FROM ("gfs_ctime")->gfs_ctime.tv_nsec);
    assert_int_equal (b->us, FROM ("us")->us);
    same_str (b->etag, FROM ("etag")->etag);
    same_str (b->upload_id, FROM ("upload_id")->upload_id);
    assert_int_equal (b->part_size, FROM ("part_size")->part_size);
    assert_int_equal (b->mtime_ns, FROM ("mtime_ns")->mtime_ns);
    assert_int_equal (b->n, FROM ("n")->n);
    same_str (b->side, FROM ("side")->side);
    assert_int_equal (b->on, FROM ("on")->on);
#undef FROM
#undef HAS
}

/* Decode text as the receiving end does (chmsg, then the members). */
static int decode (const char *text, int *type, json_t **body, struct migmsg *m,
                   tier_error_t *err)
{
    if (chmsg_decode (&migmsg_proto, text, strlen (text), type, body, err) < 0)
        return -1;
    if (migmsg_unpack (*type, *body, migmsg_dir (*type), m, err) < 0) {
        json_decref (*body);
        *body = NULL;
        return -1;
    }
    return 0;
}

static void test_round_trip (void **state)
{
    (void) state;
    for (int t = 1; t <= MIGMSG_NTYPES; t++) {
        struct migmsg a = full ((enum migmsg_type) t), b;
        char *text = migmsg_encode (&a), *again;
        tier_error_t err;
        json_t *body;
        int type;

        assert_non_null (text);
        assert_int_equal (decode (text, &type, &body, &b, &err), 0);
        assert_int_equal (type, t);
        expect_same (&a, &b, body);
        /* and back to the same text */
        again = migmsg_encode (&b);
        assert_non_null (again);
        assert_string_equal (again, text);
        free (again);
        json_decref (body);
        free (text);
    }
}

/* The names on the wire, pinned: a member renamed on one side (or in
 * the table, which both sides share, without a new version) fails here.
 */
static const struct {
    enum migmsg_type type;
    const char *text;
} golden[] = {
    { MIGMSG_SYNC, "{\"seq\":4000000000,\"flush\":true,\"t\":\"sync\","
                   "\"v\":1}" },
    { MIGMSG_DIRTY, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                    "\"t\":\"dirty\","
                    "\"v\":1}" },
    { MIGMSG_SCAN, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"t\":\"scan\","
                   "\"v\":1}" },
    { MIGMSG_QUIT, "{\"t\":\"quit\",\"v\":1}" },
    { MIGMSG_KNOWN, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"ours\":true,"
                    "\"size\":1099511627776,\"mtime\":[1700000000,123456789],"
                    "\"ino\":4242,\"gfs_size\":99,\"gfs_mtime\":[1700000001,0],"
                    "\"gfs_ctime\":[1700000002,999999999],\"t\":\"known\","
                    "\"v\":1}" },
    { MIGMSG_KNOWN_OBJECT, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                           "\"size\":1099511627776,\"mtime\":[1700000000,"
                           "123456789],\"etag\":\"\\\"abc-2\\\"\",\"t\":"
                           "\"known_object\",\"v\":1}" },
    { MIGMSG_CLAIM, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                    "\"t\":\"claim\","
                    "\"v\":1}" },
    { MIGMSG_UPLOAD, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"size\":"
                     "1099511627776,\"upload_id\":\"up/1+2\",\"part_size\":"
                     "8388608,\"mtime_ns\":-5,\"t\":\"upload\",\"v\":1}" },
    { MIGMSG_PART, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"etag\":"
                   "\"\\\"abc-2\\\"\",\"n\":17,\"t\":\"part\",\"v\":1}" },
    { MIGMSG_INTENT, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"ours\":"
                     "true,\"size\":1099511627776,\"mtime\":[1700000000,"
                     "123456789],\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb9"
                     "2427ae41e4649b934ca495991b7852b855\",\"ino\":4242,"
                     "\"gfs_size\":99,\"t\":\"intent\",\"v\":1}" },
    { MIGMSG_NOTED, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"t\":"
                    "\"noted\",\"v\":1}" },
    { MIGMSG_READY, "{\"t\":\"ready\",\"v\":1}" },
    { MIGMSG_ERROR, "{\"error\":\"No space left on device\",\"t\":\"error\","
                    "\"v\":1}" },
    { MIGMSG_DONE, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"first\":true,"
                   "\"ours\":true,\"size\":1099511627776,\"sha256\":"
                   "\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca4959"
                   "91b7852b855\",\"ino\":4242,\"gfs_size\":99,\"gfs_mtime\":"
                   "[1700000001,0],\"gfs_ctime\":[1700000002,999999999],"
                   "\"us\":12345,\"t\":\"done\",\"v\":1}" },
    { MIGMSG_FAILED, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"error\":"
                     "\"No space left on device\",\"errno\":28,\"first\":"
                     "true,\"t\":\"failed\",\"v\":1}" },
    { MIGMSG_CONFLICT, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"side\":"
                       "\".tier-conflicts/42/n1/f\",\"t\":\"conflict\","
                       "\"v\":1}" },
    { MIGMSG_GONE, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"t\":\"gone\","
                   "\"v\":1}" },
    { MIGMSG_SYNCED, "{\"seq\":4000000000,\"pending\":5,\"failed\":6,"
                     "\"conflicts\":7,\"size\":1099511627776,"
                     "\"t\":\"synced\",\"v\":1}" },
    { MIGMSG_CLAIMED, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"t\":"
                      "\"claimed\",\"v\":1}" },
    { MIGMSG_UPLOAD_BEGUN, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                           "\"size\":1099511627776,\"upload_id\":\"up/1+2\","
                           "\"part_size\":8388608,\"mtime_ns\":-5,\"t\":"
                           "\"upload_begun\",\"v\":1}" },
    { MIGMSG_PART_DONE, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"etag\":"
                        "\"\\\"abc-2\\\"\",\"n\":17,\"t\":\"part_done\","
                        "\"v\":1}" },
    { MIGMSG_UPLOAD_GONE, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\",\"t\":"
                          "\"upload_gone\",\"v\":1}" },
    { MIGMSG_OBJECT_DONE, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                          "\"first\":true,\"size\":1099511627776,\"mtime\":"
                          "[1700000000,123456789],\"sha256\":\"e3b0c44298fc1c"
                          "149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"
                          "5\",\"us\":12345,\"etag\":\"\\\"abc-2\\\"\",\"t\":"
                          "\"object_done\",\"v\":1}" },
    { MIGMSG_PUBLISHING, "{\"k\":3,\"rel\":\"dir/with space/f%.txt\","
                         "\"ours\":true,\"size\":1099511627776,\"mtime\":"
                         "[1700000000,123456789],\"sha256\":\"e3b0c44298fc"
                         "1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b"
                         "855\",\"ino\":4242,\"gfs_size\":99,\"t\":"
                         "\"publishing\",\"v\":1}" },
    { MIGMSG_ALIVE, "{\"t\":\"alive\",\"v\":1}" },
    { MIGMSG_QUEUED, "{\"on\":true,\"t\":\"queued\",\"v\":1}" },
};

static void test_golden (void **state)
{
    (void) state;
    assert_int_equal (sizeof (golden) / sizeof (golden[0]), MIGMSG_NTYPES);
    for (size_t i = 0; i < sizeof (golden) / sizeof (golden[0]); i++) {
        struct migmsg a = full (golden[i].type), b;
        char *text = migmsg_encode (&a);
        tier_error_t err;
        json_t *body;
        int type;

        /* what this side sends... */
        assert_non_null (text);
        assert_string_equal (text, golden[i].text);
        free (text);
        /* ...and what it reads */
        assert_int_equal (decode (golden[i].text, &type, &body, &b, &err), 0);
        assert_int_equal (type, golden[i].type);
        expect_same (&a, &b, body);
        json_decref (body);
    }
}

static void expect_refused (const char *text, const char *why)
{
    struct migmsg m;
    tier_error_t err;
    json_t *body = NULL;
    int type;

    errno = 0;
    err.text[0] = '\0';
    assert_int_equal (decode (text, &type, &body, &m, &err), -1);
    assert_int_equal (errno, EPROTO);
    assert_null (body);
    if (!strstr (err.text, why))
        fail_msg ("'%s': '%s' does not say '%s'", text, err.text, why);
}

static void test_refused (void **state)
{
    (void) state;
    expect_refused ("{\"t\":\"bogus\",\"v\":1}", "unknown message 'bogus'");
    expect_refused ("{\"t\":\"SYNC\",\"v\":1,\"seq\":1,\"flush\":false}",
                    "unknown message");
    expect_refused ("{\"t\":\"sync\",\"v\":2,\"seq\":1,\"flush\":false}",
                    "of version 2");
    expect_refused ("{\"t\":\"sync\",\"seq\":1,\"flush\":false}",
                    "without its name and version");
    expect_refused ("{\"t\":\"sync\",\"v\":\"1\",\"seq\":1,\"flush\":false}",
                    "without its name and version");
    expect_refused ("not json", "not JSON");
    expect_refused ("[\"sync\"]", "without its name and version");
    /* a value out of its range, or a time that is none */
    expect_refused ("{\"t\":\"sync\",\"v\":1,\"seq\":-1,\"flush\":false}",
                    "'seq' is not a count");
    expect_refused ("{\"t\":\"sync\",\"v\":1,\"seq\":4294967296,\"flush\":"
                    "false}",
                    "'seq' is not a count");
    expect_refused ("{\"t\":\"dirty\",\"v\":1,\"k\":-1,\"rel\":\"x\"}",
                    "'k' is not a count");
    expect_refused ("{\"t\":\"object_done\",\"v\":1,\"k\":0,\"rel\":\"x\","
                    "\"first\":true,\"size\":1,\"mtime\":[1,1000000000],"
                    "\"sha256\":\"x\",\"us\":1,\"etag\":\"\"}",
                    "'mtime' is not a time");
    expect_refused ("{\"t\":\"object_done\",\"v\":1,\"k\":0,\"rel\":\"x\","
                    "\"first\":true,\"size\":1,\"mtime\":[1],"
                    "\"sha256\":\"x\",\"us\":1,\"etag\":\"\"}",
                    "'mtime' is not a time");
    expect_refused ("{\"t\":\"done\",\"v\":1,\"k\":0,\"rel\":\"x\","
                    "\"first\":true,\"ours\":false,\"size\":-1,\"sha256\":"
                    "\"x\",\"ino\":1,\"gfs_size\":1,\"gfs_mtime\":[1,0],"
                    "\"gfs_ctime\":[1,0],\"us\":0}",
                    "'size' is not a count");
}

/* A value of another kind than the member's. */
static json_t *mistyped (json_t *v)
{
    if (json_is_string (v) || json_is_boolean (v))
        return json_integer (1);
    return json_string ("1");
}

/* Every member of every type, missing or of another kind: refused,
 * naming it (but an optional one may be missing). */
static void test_members (void **state)
{
    (void) state;
    for (int t = 1; t <= MIGMSG_NTYPES; t++) {
        struct migmsg a = full ((enum migmsg_type) t), m;
        json_t *body = migmsg_pack (&a);
        const char *key;
        json_t *v;

        assert_non_null (body);
        json_object_foreach (body, key, v)
        {
            json_t *copy = json_deep_copy (body);
            tier_error_t err;
            char want[64];
            int rc;

            json_object_del (copy, key);
            rc = migmsg_unpack (t, copy, migmsg_dir (t), &m, &err);
            if (t == MIGMSG_CONFLICT && !strcmp (key, "side")) {
                assert_int_equal (rc, 0); /* optional */
                assert_null (m.side);
            }
            else if (t == MIGMSG_SYNCED && !strcmp (key, "size")) {
                assert_int_equal (rc, 0); /* optional: 0 without it */
                assert_int_equal (m.size, 0);
            }
            else {
                assert_int_equal (rc, -1);
                assert_int_equal (errno, EPROTO);
                (void) snprintf (want, sizeof (want), "without '%s'", key);
                assert_non_null (strstr (err.text, want));
            }
            json_object_set_new (copy, key, mistyped (v));
            assert_int_equal (migmsg_unpack (t, copy, migmsg_dir (t), &m, &err),
                              -1);
            assert_int_equal (errno, EPROTO);
            (void) snprintf (want, sizeof (want), "'%s' is not", key);
            assert_non_null (strstr (err.text, want));
            json_decref (copy);
        }
        /* members it does not know are a later version's: ignored */
        json_object_set_new (body, "later", json_integer (1));
        assert_int_equal (migmsg_unpack (t, body, migmsg_dir (t), &m, NULL), 0);
        json_decref (body);
    }
}

/* A result is no command, and the other way round. */
static void test_direction (void **state)
{
    struct migmsg a = full (MIGMSG_SYNC), m;
    json_t *body = migmsg_pack (&a);
    tier_error_t err;

    (void) state;
    assert_int_equal (migmsg_dir (MIGMSG_SYNC), MIGMSG_COMMAND);
    assert_int_equal (migmsg_dir (MIGMSG_SYNCED), MIGMSG_RESULT);
    assert_int_equal (migmsg_dir (0), 0);
    assert_int_equal (migmsg_dir (MIGMSG_NTYPES + 1), 0);
    assert_int_equal (migmsg_unpack (MIGMSG_SYNC, body, MIGMSG_RESULT, &m,
                                     &err),
                      -1);
    assert_int_equal (errno, EPROTO);
    assert_non_null (strstr (err.text, "'sync' is not a message of the "
                                       "migrator"));
    assert_int_equal (migmsg_unpack (MIGMSG_SYNC, body, MIGMSG_COMMAND, &m,
                                     &err),
                      0);
    json_decref (body);
    a = full (MIGMSG_DONE);
    body = migmsg_pack (&a);
    assert_int_equal (migmsg_unpack (MIGMSG_DONE, body, MIGMSG_COMMAND, &m,
                                     &err),
                      -1);
    assert_non_null (strstr (err.text, "'done' is not a message of the "
                                       "agent"));
    json_decref (body);
}

/* What cannot be packed. */
static void test_pack_errors (void **state)
{
    struct migmsg m = full (MIGMSG_DONE);

    (void) state;
    m.sha256 = NULL;
    errno = 0;
    assert_null (migmsg_pack (&m));
    assert_int_equal (errno, EINVAL);
    m = full (MIGMSG_CONFLICT);
    m.side = NULL; /* optional: left out */
    {
        json_t *body = migmsg_pack (&m);
        assert_non_null (body);
        assert_null (json_object_get (body, "side"));
        json_decref (body);
    }
    m.type = 0;
    assert_null (migmsg_pack (&m));
    assert_int_equal (errno, EINVAL);
    m.type = MIGMSG_NTYPES + 1;
    assert_null (migmsg_encode (&m));
    assert_int_equal (errno, EINVAL);
}

static void test_batch (void **state)
{
    struct migmsg_batch b = { 0 };
    char rel[32];
    size_t off = 0;
    tier_error_t err;
    json_t *body;
    int type;

    (void) state;
    assert_int_equal (migmsg_batch_next (&b, &off, &type, &body, &err), 0);
    /* more than one allocation's worth, in order */
    for (int i = 0; i < 3000; i++) {
        struct migmsg m = full (i % 2 ? MIGMSG_KNOWN : MIGMSG_PART);
        (void) snprintf (rel, sizeof (rel), "f%d", i);
        m.rel = rel;
        assert_int_equal (migmsg_batch_add (&b, &m), 0);
    }
    assert_int_equal (b.count, 3000);
    for (int i = 0; i < 3000; i++) {
        struct migmsg m;
        assert_int_equal (migmsg_batch_next (&b, &off, &type, &body, &err), 1);
        assert_int_equal (type, i % 2 ? MIGMSG_KNOWN : MIGMSG_PART);
        assert_int_equal (migmsg_unpack (type, body, MIGMSG_COMMAND, &m, &err),
                          0);
        (void) snprintf (rel, sizeof (rel), "f%d", i);
        assert_string_equal (m.rel, rel);
        json_decref (body);
    }
    assert_int_equal (migmsg_batch_next (&b, &off, &type, &body, &err), 0);
    /* one that does not decode is reported, and the next one follows */
    b.buf[0] = 'x';
    off = 0;
    assert_int_equal (migmsg_batch_next (&b, &off, &type, &body, &err), -1);
    assert_int_equal (errno, EPROTO);
    assert_int_equal (migmsg_batch_next (&b, &off, &type, &body, &err), 1);
    json_decref (body);
    migmsg_batch_fini (&b);
    assert_null (b.buf);
    assert_int_equal (b.count, 0);
}

/* The migrator's send, read as the agent reads it (a response frame). */
static void test_send (void **state)
{
    struct migmsg a = full (MIGMSG_FAILED), m;
    tier_error_t err;
    json_t *body;
    int sv[2], type;

    (void) state;
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal (migmsg_send (sv[1], &a), 0);
    assert_int_equal (chmsg_recv (sv[0], &migmsg_proto, &type, &body, NULL,
                                  NULL, 0, 1000, &err),
                      0);
    assert_int_equal (type, MIGMSG_FAILED);
    assert_int_equal (migmsg_unpack (type, body, MIGMSG_RESULT, &m, &err), 0);
    expect_same (&a, &m, body);
    json_decref (body);
    close (sv[1]);
    assert_int_equal (chmsg_recv (sv[0], &migmsg_proto, &type, &body, NULL,
                                  NULL, 0, 1000, &err),
                      -1);
    close (sv[0]);
    a.error = NULL; /* cannot be packed: not sent */
    assert_int_equal (migmsg_send (-1, &a), -1);
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_round_trip), cmocka_unit_test (test_golden),
        cmocka_unit_test (test_refused),    cmocka_unit_test (test_members),
        cmocka_unit_test (test_direction),  cmocka_unit_test (test_pack_errors),
        cmocka_unit_test (test_batch),      cmocka_unit_test (test_send),
    };
    return UNIT_RUN (tests);
}

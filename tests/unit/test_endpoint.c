/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_endpoint.c - child URLs, credentials files, part sizes and
 * multipart upload states (the parts without a server) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/endpoint.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

FAILALLOC_DEFINE

#define MIB (1ull << 20)

/*
 * Prefix URLs (the parser itself: test_url.c).
 */

static void test_url_child (void **state)
{
    tier_error_t error;
    struct tier_url *p, *c;

    p = tier_url_parse ("s3://bkt/out/", &error);
    c = tier_url_child (p, "job 1/res.txt", &error);
    assert_non_null (c);
    assert_string_equal (c->text, "s3://bkt/out/job 1/res.txt");
    assert_string_equal (c->key, "out/job 1/res.txt");
    tier_url_destroy (c);
    assert_null (tier_url_child (p, "../x", &error));
    assert_null (tier_url_child (p, "a//b", &error));
    assert_null (tier_url_child (p, "/abs", &error));
    assert_null (tier_url_child (p, "a/./b", &error));
    assert_null (tier_url_child (p, "", &error));
    tier_url_destroy (p);

    p = tier_url_parse ("https://h:8443/dav/", &error);
    c = tier_url_child (p, "a b/ü.txt", &error);
    assert_non_null (c);
    assert_string_equal (c->text, "https://h:8443/dav/a%20b/%C3%BC.txt");
    tier_url_destroy (c);
    tier_url_destroy (p);

    p = tier_url_parse ("https://h/file", &error);
    assert_null (tier_url_child (p, "x", &error));
    assert_non_null (strstr (error.text, "not a prefix"));
    tier_url_destroy (p);
}

/*
 * Part sizes.
 */

static void test_part_size (void **state)
{
    uint64_t p;

    assert_true (tier_s3_part_size (0, 0) == TIER_S3_DEFAULT_PART);
    assert_true (tier_s3_part_size (100 * MIB, 0) == 8 * MIB);
    assert_true (tier_s3_part_size (100 * MIB, 1) == 5 * MIB);  /* min */
    assert_true (tier_s3_part_size (100 * MIB, 6 * MIB + 1)
                 == 6 * MIB + 1);
    assert_true (tier_s3_part_size (1, 10ull << 30) == TIER_S3_MAX_PART);
    /* 80,000 MiB need 8 MiB parts exactly: 10,000 of them */
    assert_true (tier_s3_part_size (80000 * MIB, 0) == 8 * MIB);
    /* one byte more: grows to 9 MiB */
    assert_true (tier_s3_part_size (80000 * MIB + 1, 0) == 9 * MIB);
    /* 1 TiB: 105 MiB parts (whole MiB, 10,000 suffice) */
    p = tier_s3_part_size (1ull << 40, 0);
    assert_true (p == 105 * MIB);
    assert_true (((1ull << 40) + p - 1) / p <= TIER_S3_MAX_PARTS);
    /* the largest object */
    p = tier_s3_part_size (TIER_S3_MAX_OBJECT, 0);
    assert_true (p > 0 && p <= TIER_S3_MAX_PART);
    assert_true ((TIER_S3_MAX_OBJECT + p - 1) / p <= TIER_S3_MAX_PARTS);
    /* too large */
    errno = 0;
    assert_true (tier_s3_part_size (TIER_S3_MAX_OBJECT + 1, 0) == 0);
    assert_int_equal (errno, EFBIG);
    /* every size: at least 5 MiB, at most 10,000 parts */
    for (uint64_t size = 1; size < TIER_S3_MAX_OBJECT; size = size * 3 + 7) {
        p = tier_s3_part_size (size, 0);
        assert_true (p >= TIER_S3_MIN_PART);
        assert_true ((size + p - 1) / p <= TIER_S3_MAX_PARTS);
    }
}

/*
 * Upload states.
 */

static void test_upload_state (void **state)
{
    const char *json =
        "{\"version\":1,\"url\":\"s3://bkt/big\",\"upload_id\":\"u-1\","
        "\"size\":12582912,\"mtime_ns\":1700000000123456789,"
        "\"part_size\":5242880,"
        "\"parts\":[{\"n\":3,\"etag\":\"\\\"c\\\"\"},"
        "{\"n\":1,\"etag\":\"\\\"a\\\"\"}]}";
    tier_error_t error;
    struct tier_s3_upload *up, *again;
    char *text;

    up = tier_s3_upload_load (json, &error);
    assert_non_null (up);
    assert_string_equal (up->url, "s3://bkt/big");
    assert_string_equal (up->upload_id, "u-1");
    assert_int_equal (up->nparts, 3);
    assert_string_equal (up->etags[0], "\"a\"");
    assert_null (up->etags[1]);
    assert_string_equal (up->etags[2], "\"c\"");
    assert_true (up->mtime_ns == 1700000000123456789LL);
    text = tier_s3_upload_dump (up);
    assert_non_null (text);
    again = tier_s3_upload_load (text, &error);
    assert_non_null (again);
    assert_int_equal (again->nparts, 3);
    assert_string_equal (again->etags[2], "\"c\"");
    assert_null (again->etags[1]);
    tier_s3_upload_destroy (again);
    free (text);
    tier_s3_upload_destroy (up);
}

static const char *bad_states[] = {
    "",
    "[]",
    "{\"version\":2,\"url\":\"u\",\"upload_id\":\"i\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":1024,\"parts\":[]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\",\"size\":-1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[{\"n\":2,"
    "\"etag\":\"e\"}]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[{\"n\":1,"
    "\"etag\":\"e\"},{\"n\":1,\"etag\":\"e\"}]}",
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\",\"size\":1,"
    "\"mtime_ns\":0,\"part_size\":5242880,\"parts\":[],\"extra\":1}",
    /* 100 GiB in 5 MiB parts: more than 10,000 */
    "{\"version\":1,\"url\":\"u\",\"upload_id\":\"i\","
    "\"size\":107374182400,\"mtime_ns\":0,\"part_size\":5242880,"
    "\"parts\":[]}",
};

static void test_upload_state_errors (void **state)
{
    for (size_t i = 0; i < sizeof (bad_states) / sizeof (bad_states[0]);
         i++) {
        tier_error_t error;

        errno = 0;
        if (tier_s3_upload_load (bad_states[i], &error))
            fail_msg ("state %zu was accepted", i);
        assert_int_equal (errno, EINVAL);
        assert_non_null (strstr (error.text, "upload state"));
    }
    assert_null (tier_s3_upload_load (NULL, NULL));
}

/*
 * Credentials.
 */

static const char *full_creds =
    "# tier credentials\n"
    "[default]\n"
    "access_key = AKIDEXAMPLE\n"
    "secret_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n"
    "\n"
    "  [ site ]  \r\n"
    "; another profile\n"
    "access_key=SITEKEY\n"
    "\tsecret_key\t=\tsite secret with blanks  \n"
    "session_token = TOKEN==\n"
    "region = eu-west-3\n"
    "endpoint = http://127.0.0.1:4568\n"
    "addressing = virtual\n";

static void test_creds_parse (void **state)
{
    tier_error_t error;
    struct tier_creds *c;

    c = tier_creds_parse (full_creds, "creds", NULL, &error);
    assert_non_null (c);
    assert_string_equal (c->profile, "default");
    assert_string_equal (c->access_key, "AKIDEXAMPLE");
    assert_string_equal (c->secret_key,
                         "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
    assert_string_equal (c->region, "us-east-1");
    assert_null (c->endpoint);
    assert_null (c->session_token);
    assert_int_equal (c->addressing, TIER_S3_ADDR_AUTO);
    tier_creds_destroy (c);

    c = tier_creds_parse (full_creds, "creds", "site", &error);
    assert_non_null (c);
    assert_string_equal (c->access_key, "SITEKEY");
    assert_string_equal (c->secret_key, "site secret with blanks");
    assert_string_equal (c->session_token, "TOKEN==");
    assert_string_equal (c->region, "eu-west-3");
    assert_string_equal (c->endpoint, "http://127.0.0.1:4568");
    assert_int_equal (c->addressing, TIER_S3_ADDR_VIRTUAL);
    tier_creds_destroy (c);

    errno = 0;
    assert_null (tier_creds_parse (full_creds, "creds", "nope", &error));
    assert_int_equal (errno, ENOENT);
    assert_string_equal (error.text, "creds: no [nope] profile");
}

#define SECRET "Sup3rSecretValue"

static const struct {
    const char *text;
    const char *want;               /* the whole message */
} bad_creds[] = {
    { "access_key = A\n", "f:1: access_key outside a [profile] section" },
    { "[default]\naccess_key A " SECRET "\n",
      "f:2: expected 'key = value' (the line is not shown: it may hold a "
      "secret)" },
    { "[default]\nsecret = " SECRET "\n",
      "f:2: unknown key 'secret' (access_key, secret_key, session_token, "
      "region, endpoint, addressing)" },
    { "[default]\nsecret_key =\n", "f:2: secret_key has no value" },
    { "[default]\nsecret_key = " SECRET "\nsecret_key = " SECRET "\n",
      "f:3: secret_key appears twice" },
    { "[default\n", "f:1: expected '[profile]'" },
    { "[default] x\n", "f:1: expected '[profile]'" },
    { "[ ]\n", "f:1: empty profile name" },
    { "[default]\n[default]\n", "f:2: profile [default] appears twice" },
    { "[default]\nsecret_key = " SECRET "\n", "f: [default]: no access_key" },
    { "[default]\naccess_key = A\n", "f: [default]: no secret_key" },
    { "[default]\naccess_key = A B\nsecret_key = " SECRET "\n",
      "f: [default]: access_key holds a blank or non-ASCII character" },
    { "[default]\naccess_key = A\nsecret_key = " SECRET "\n"
      "region = EU West\n",
      "f: [default]: region 'EU West' is not a region name" },
    { "[default]\naccess_key = A\nsecret_key = " SECRET "\n"
      "endpoint = s3://bkt/\n",
      "f: [default]: endpoint must be http(s)://HOST[:PORT] without a "
      "path" },
    { "[default]\naccess_key = A\nsecret_key = " SECRET "\n"
      "endpoint = http://h/path\n",
      "f: [default]: endpoint must be http(s)://HOST[:PORT] without a "
      "path" },
    { "[default]\naccess_key = A\nsecret_key = " SECRET "\n"
      "endpoint = h:1\n",
      "f: [default]: endpoint: h:1: not a URL (s3://BUCKET/KEY, "
      "https://HOST/PATH or http://HOST/PATH)" },
    { "[default]\naccess_key = A\nsecret_key = " SECRET "\n"
      "addressing = dns\n",
      "f: [default]: addressing 'dns' is not path or virtual" },
};

static void test_creds_errors (void **state)
{
    for (size_t i = 0; i < sizeof (bad_creds) / sizeof (bad_creds[0]);
         i++) {
        tier_error_t error = { { 0 } };

        errno = 0;
        if (tier_creds_parse (bad_creds[i].text, "f", "default", &error))
            fail_msg ("case %zu was accepted", i);
        assert_int_equal (errno, EINVAL);
        if (strcmp (error.text, bad_creds[i].want) != 0)
            fail_msg ("case %zu: '%s', not '%s'", i, error.text,
                      bad_creds[i].want);
        assert_null (strstr (error.text, SECRET));
    }
}

static char tmpdir[] = "/tmp/test_endpoint.XXXXXX";

static void write_file (const char *path, const char *text, mode_t mode)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (int) strlen (text));
    assert_int_equal (fchmod (fd, mode), 0);
    close (fd);
}

static void test_creds_load (void **state)
{
    char path[PATH_MAX], link[PATH_MAX];
    tier_error_t error;
    struct tier_creds *c;

    assert_non_null (mkdtemp (tmpdir));
    snprintf (path, sizeof (path), "%s/credentials", tmpdir);
    snprintf (link, sizeof (link), "%s/link", tmpdir);
    write_file (path, full_creds, 0600);
    c = tier_creds_load (path, "site", geteuid (), &error);
    assert_non_null (c);
    assert_string_equal (c->file, path);
    tier_creds_destroy (c);

    assert_int_equal (chmod (path, 0400), 0);
    c = tier_creds_load (path, NULL, geteuid (), &error);
    assert_non_null (c);
    tier_creds_destroy (c);

    assert_int_equal (chmod (path, 0640), 0);
    errno = 0;
    assert_null (tier_creds_load (path, NULL, geteuid (), &error));
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "mode 0640 lets others read it"));
    assert_int_equal (chmod (path, 0604), 0);
    assert_null (tier_creds_load (path, NULL, geteuid (), &error));
    assert_int_equal (errno, EPERM);
    assert_int_equal (chmod (path, 0600), 0);

    assert_null (tier_creds_load (path, NULL, geteuid () + 1, &error));
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "owned by uid"));

    assert_int_equal (symlink (path, link), 0);
    assert_null (tier_creds_load (link, NULL, geteuid (), &error));
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "symlink"));
    unlink (link);

    assert_null (tier_creds_load (tmpdir, NULL, geteuid (), &error));
    assert_non_null (strstr (error.text, "not a regular file"));

    /* a bucket's profile, else [default] */
    c = tier_creds_for_bucket (path, "site", geteuid (), &error);
    assert_non_null (c);
    assert_string_equal (c->access_key, "SITEKEY");
    tier_creds_destroy (c);
    c = tier_creds_for_bucket (path, "other", geteuid (), &error);
    assert_non_null (c);
    assert_string_equal (c->access_key, "AKIDEXAMPLE");
    tier_creds_destroy (c);
    assert_int_equal (chmod (path, 0644), 0);
    assert_null (tier_creds_for_bucket (path, "site", geteuid (), &error));
    assert_int_equal (errno, EPERM);
    assert_non_null (strstr (error.text, "mode 0644"));
    assert_int_equal (chmod (path, 0600), 0);
    write_file (path, "[site]\naccess_key = A\nsecret_key = S\n", 0600);
    assert_null (tier_creds_for_bucket (path, "bkt", geteuid (), &error));
    assert_int_equal (errno, ENOENT);
    assert_non_null (strstr (error.text, "no [bkt] or [default] profile"));

    unlink (path);
    assert_null (tier_creds_load (path, NULL, geteuid (), &error));
    assert_int_equal (errno, ENOENT);
    assert_non_null (strstr (error.text, path));
    assert_null (tier_creds_for_bucket (path, "bkt", geteuid (), &error));
    assert_int_equal (errno, ENOENT);
    assert_non_null (strstr (error.text, "no S3 credentials"));
    rmdir (tmpdir);
}

static void test_creds_path (void **state)
{
    char buf[64];

    assert_int_equal (tier_creds_path ("/gfs/.tier", "alice", buf,
                                       sizeof (buf)), 0);
    assert_string_equal (buf, "/gfs/.tier/users/alice/credentials");
    assert_int_equal (tier_creds_path ("/gfs", "../x", buf, sizeof (buf)),
                      -1);
    assert_int_equal (tier_creds_path ("/gfs", "..", buf, sizeof (buf)),
                      -1);
    assert_int_equal (tier_creds_path ("", "a", buf, sizeof (buf)), -1);
    assert_int_equal (tier_creds_path ("/gfs", "a", buf, 10), -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

/* Endpoints are made without a server: errors before any request. */
static void test_endpoint_create (void **state)
{
    tier_error_t error;
    struct tier_url *u = tier_url_parse ("s3://bkt/key", &error);
    struct tier_url *p = tier_url_parse ("https://h/dir/", &error);
    struct tier_creds *c = tier_creds_parse (full_creds, "f", "site",
                                             &error);
    struct tier_endpoint_opts opts = { 0 };
    struct tier_endpoint *ep;

    assert_int_equal (tier_endpoint_init (&error), 0);
    errno = 0;
    assert_null (tier_endpoint_create (u, &opts, &error));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (error.text, "s3://bkt/key: no S3 credentials"));
    opts.creds = c;
    ep = tier_endpoint_create (u, &opts, &error);
    assert_non_null (ep);
    tier_endpoint_destroy (ep);
    assert_null (tier_endpoint_create (p, &opts, &error));
    assert_non_null (strstr (error.text, "names a prefix"));
    assert_null (tier_endpoint_create (NULL, &opts, &error));
    assert_true (tier_backend_ops_find (TIER_URL_S3) != NULL);
    assert_string_equal (tier_backend_ops_find (TIER_URL_HTTPS)->name,
                         "http");
    assert_null (tier_backend_ops_find (TIER_URL_HTTPS)->abort_upload);
    tier_creds_destroy (c);
    tier_url_destroy (u);
    tier_url_destroy (p);
    tier_endpoint_fini ();
}

/*
 * Allocation failures.
 */

static void test_failalloc_creds (void **state)
{
    for (int n = 1; n < 1000; n++) {
        tier_error_t error;
        struct tier_creds *c;

        failalloc_arm (n);
        c = tier_creds_parse (full_creds, "f", "site", &error);
        if (!failalloc_failed) {
            failalloc_arm (-1);
            assert_non_null (c);
            tier_creds_destroy (c);
            assert_true (n > 5);
            return;
        }
        failalloc_arm (-1);
        assert_null (c);
        assert_int_equal (errno, ENOMEM);
    }
    fail_msg ("the parser never finished");
}

static void test_failalloc_url (void **state)
{
    static const char *urls[] = {
        "s3://bkt/a/b", "https://h:1/a/b?q=1", "http://[::1]/",
    };

    for (size_t i = 0; i < sizeof (urls) / sizeof (urls[0]); i++) {
        int n;

        for (n = 1; n < 1000; n++) {
            tier_error_t error;
            struct tier_url *u, *c = NULL;

            failalloc_arm (n);
            u = tier_url_parse (urls[i], &error);
            if (u && i == 0)
                c = tier_url_child (u, "x", &error);
            if (!failalloc_failed) {
                failalloc_arm (-1);
                assert_non_null (u);
                tier_url_destroy (c);
                tier_url_destroy (u);
                break;
            }
            failalloc_arm (-1);
            assert_true (!u || (i == 0 && !c));
            assert_int_equal (errno, ENOMEM);
            tier_url_destroy (u);
        }
        assert_true (n > 3 && n < 1000);
    }
}

static void test_failalloc_state (void **state)
{
    const char *json =
        "{\"version\":1,\"url\":\"s3://bkt/big\",\"upload_id\":\"u-1\","
        "\"size\":12582912,\"mtime_ns\":1,\"part_size\":5242880,"
        "\"parts\":[{\"n\":3,\"etag\":\"c\"},{\"n\":1,\"etag\":\"a\"}]}";

    for (int n = 1; n < 1000; n++) {
        tier_error_t error;
        struct tier_s3_upload *up;

        failalloc_arm (n);
        up = tier_s3_upload_load (json, &error);
        if (!failalloc_failed) {
            failalloc_arm (-1);
            assert_non_null (up);
            tier_s3_upload_destroy (up);
            assert_true (n > 3);
            return;
        }
        failalloc_arm (-1);
        assert_null (up);
        tier_s3_upload_destroy (up);
    }
    fail_msg ("the loader never finished");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_url_child),
        cmocka_unit_test (test_part_size),
        cmocka_unit_test (test_upload_state),
        cmocka_unit_test (test_upload_state_errors),
        cmocka_unit_test (test_creds_parse),
        cmocka_unit_test (test_creds_errors),
        cmocka_unit_test (test_creds_load),
        cmocka_unit_test (test_creds_path),
        cmocka_unit_test (test_endpoint_create),
        cmocka_unit_test (test_failalloc_creds),
        cmocka_unit_test (test_failalloc_url),
        cmocka_unit_test (test_failalloc_state),
    };
    return UNIT_RUN (tests);
}

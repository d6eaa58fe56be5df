/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_url.c - the libc-only URL parser (lib/url.c) and stage-in items;
 * linked against libtiercore alone, as the plugin is */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/url.h"
#include "unit.h"
#include "failalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FAILALLOC_DEFINE

static void test_url_s3 (void **state)
{
    tier_error_t error;
    struct tier_url *u;

    u = tier_url_parse ("s3://my-bucket.1/a/b c/d%20e", &error);
    assert_non_null (u);
    assert_int_equal (u->scheme, TIER_URL_S3);
    assert_string_equal (u->bucket, "my-bucket.1");
    assert_string_equal (u->key, "a/b c/d%20e");    /* literal, no decoding */
    assert_false (tier_url_is_prefix (u));
    tier_url_destroy (u);

    u = tier_url_parse ("s3://bkt/out/", &error);
    assert_non_null (u);
    assert_true (tier_url_is_prefix (u));
    tier_url_destroy (u);
    u = tier_url_parse ("s3://bkt", &error);
    assert_non_null (u);
    assert_string_equal (u->key, "");
    assert_true (tier_url_is_prefix (u));
    tier_url_destroy (u);
}

static void test_url_http (void **state)
{
    tier_error_t error;
    struct tier_url *u;

    u = tier_url_parse ("https://Example.org:8443/dav/a%20b?x=1&y", &error);
    assert_non_null (u);
    assert_int_equal (u->scheme, TIER_URL_HTTPS);
    assert_string_equal (u->host, "Example.org");
    assert_int_equal (u->port, 8443);
    assert_string_equal (u->path, "/dav/a%20b");
    assert_string_equal (u->query, "x=1&y");
    assert_string_equal (u->display, "https://Example.org:8443/dav/a%20b?...");
    tier_url_destroy (u);

    u = tier_url_parse ("http://127.0.0.1", &error);
    assert_non_null (u);
    assert_int_equal (u->scheme, TIER_URL_HTTP);
    assert_string_equal (u->path, "/");
    assert_null (u->query);
    assert_int_equal (u->port, 0);
    assert_true (tier_url_is_prefix (u));
    tier_url_destroy (u);

    u = tier_url_parse ("https://[::1]:4443/x?", &error);
    assert_non_null (u);
    assert_string_equal (u->host, "[::1]");
    assert_int_equal (u->port, 4443);
    assert_string_equal (u->query, "");
    tier_url_destroy (u);

    u = tier_url_parse ("HTTPS://h/?q", &error);
    assert_non_null (u);
    assert_string_equal (u->path, "/");
    tier_url_destroy (u);
}

static const struct {
    const char *url;
    const char *why;                /* in the message, after the URL */
} bad_urls[] = {
    { "", "empty URL" },
    { "/gfs/x", "not a URL" },
    { "ftp://h/x", "unsupported scheme 'ftp'" },
    { "s3://", "no bucket name" },
    { "s3:///key", "no bucket name" },
    { "s3://ab/k", "3 to 63 characters" },
    { "s3://Upper/k", "lower-case" },
    { "s3://a_b/k", "lower-case" },
    { "s3://-abc/k", "start and end" },
    { "s3://abc-/k", "start and end" },
    { "s3://a..b/k", "two adjacent dots" },
    { "s3://192.168.1.1/k", "IP address" },
    { "s3://bkt/a\nb", "control character" },
    { "https://u:p@h/x", "credentials in the URL" },
    { "https://h/x#frag", "fragment" },
    { "https://h/a b", "blank or control" },
    { "https://h:0/x", "not a port" },
    { "https://h:x/x", "not a port" },
    { "https://h:/x", "not a port" },
    { "https://h:70000/x", "not a port" },
    { "https:///x", "not a host name" },
    { "https://h_x/x", "not a host name" },
    { "https://[::1/x", "unterminated IPv6" },
    { "https://[::1]x/", "after the IPv6" },
    { "https://h/%zz", "not a %XX escape" },
    { "https://h/%4", "not a %XX escape" },
};

static void test_url_errors (void **state)
{
    for (size_t i = 0; i < sizeof (bad_urls) / sizeof (bad_urls[0]); i++) {
        tier_error_t error = { { 0 } };

        errno = 0;
        if (tier_url_parse (bad_urls[i].url, &error))
            fail_msg ("'%s' was accepted", bad_urls[i].url);
        assert_int_equal (errno, EINVAL);
        if (!strstr (error.text, bad_urls[i].why))
            fail_msg ("'%s': '%s' does not say '%s'", bad_urls[i].url,
                      error.text, bad_urls[i].why);
        /* the message names the URL (control characters as '?') */
        if (*bad_urls[i].url && !strstr (bad_urls[i].url, "u:p@")
            && strncmp (error.text, bad_urls[i].url,
                        strlen (bad_urls[i].url) < 6
                        ? strlen (bad_urls[i].url) : 6) != 0)
            fail_msg ("'%s': '%s' does not start with the URL",
                      bad_urls[i].url, error.text);
    }
}

static void test_url_long (void **state)
{
    char *url = malloc (TIER_URL_MAX + 10);
    char key[TIER_S3_KEY_MAX + 2];
    tier_error_t error;

    memset (url, 'a', TIER_URL_MAX + 9);
    memcpy (url, "s3://bkt/", 9);
    url[TIER_URL_MAX + 9] = '\0';
    assert_null (tier_url_parse (url, &error));
    assert_non_null (strstr (error.text, "longer than"));
    assert_true (strlen (error.text) < 300);     /* the URL is cut */
    free (url);
    memset (key, 'k', sizeof (key) - 1);
    key[sizeof (key) - 1] = '\0';
    url = malloc (sizeof (key) + 16);
    snprintf (url, sizeof (key) + 16, "s3://bkt/%s", key);
    assert_null (tier_url_parse (url, &error));
    assert_non_null (strstr (error.text, "1024"));
    free (url);
}

static void test_url_redaction (void **state)
{
    tier_error_t error;
    struct tier_url *u;

    assert_null (tier_url_parse ("https://alice:secret@h/x?sig=abc", &error));
    assert_null (strstr (error.text, "secret"));
    assert_null (strstr (error.text, "alice"));
    assert_null (strstr (error.text, "abc"));
    assert_non_null (strstr (error.text, "https://***@h/x?..."));
    assert_null (tier_url_parse ("http://a@b@h:99999/x", &error));
    assert_null (strstr (error.text, "a@b"));
    /* s3 keys may hold '?': shown whole */
    u = tier_url_parse ("s3://bkt/what?", &error);
    assert_non_null (u);
    assert_string_equal (u->display, "s3://bkt/what?");
    assert_string_equal (u->key, "what?");
    tier_url_destroy (u);
}

/*
 * Stage-in items and inputs.
 */

static void test_item_split (void **state)
{
    char url[256], path[256];

    assert_false (tier_url_item_is_url ("/gfs/a=/b"));
    assert_true (tier_url_item_is_url ("s3://b/k=/gfs/x"));
    assert_false (tier_url_item_is_url ("/gfs/odd://name"));
    assert_int_equal (tier_url_item_split ("s3://bkt/q%a.txt=/gfs/in/q%a",
                                           url, sizeof (url), path,
                                           sizeof (path)), 0);
    assert_string_equal (url, "s3://bkt/q%a.txt");
    assert_string_equal (path, "/gfs/in/q%a");
    /* at the last "=/": an http path may hold "=/" itself */
    assert_int_equal (tier_url_item_split ("https://h/a=/b=/gfs/x", url,
                                           sizeof (url), path,
                                           sizeof (path)), 0);
    assert_string_equal (url, "https://h/a=/b");
    assert_string_equal (path, "/gfs/x");
    /* a '=' that no '/' follows is part of the URL */
    assert_int_equal (tier_url_item_split ("s3://bkt/k=v=/g", url,
                                           sizeof (url), path,
                                           sizeof (path)), 0);
    assert_string_equal (url, "s3://bkt/k=v");
    assert_string_equal (path, "/g");

    errno = 0;
    assert_int_equal (tier_url_item_split ("s3://bkt/k", url, sizeof (url),
                                           path, sizeof (path)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_item_split ("s3://bkt/k=gfs/x", url,
                                           sizeof (url), path,
                                           sizeof (path)), -1);
    assert_int_equal (tier_url_item_split ("=/gfs/x", url, sizeof (url),
                                           path, sizeof (path)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_item_split ("s3://bkt/k=/gfs/x", url, 10,
                                           path, sizeof (path)), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    assert_int_equal (tier_url_item_split ("s3://bkt/k=/gfs/x", url,
                                           sizeof (url), path, 6), -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

static void test_parse_input (void **state)
{
    tier_error_t error;
    struct tier_url *u;

    u = tier_url_parse_input ("s3://bkt/in/q1.txt", &error);
    assert_non_null (u);
    tier_url_destroy (u);
    u = tier_url_parse_input ("https://127.0.0.1:8443/dav/x", &error);
    assert_non_null (u);
    tier_url_destroy (u);
    /* s3 keys take '?' literally: not a query */
    u = tier_url_parse_input ("s3://bkt/a?b", &error);
    assert_non_null (u);
    tier_url_destroy (u);

    errno = 0;
    assert_null (tier_url_parse_input ("https://h/x?X-Amz-Signature=abc",
                                       &error));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (error.text, "https://h/x?...: a query string "
                             "is not allowed"));
    assert_null (strstr (error.text, "abc"));
    assert_null (tier_url_parse_input ("https://h/x?", &error));
    assert_non_null (strstr (error.text, "query string"));
    assert_null (tier_url_parse_input ("https://u:pw@h/x", &error));
    assert_non_null (strstr (error.text, "credentials in the URL"));
    assert_null (strstr (error.text, "pw"));
    assert_null (tier_url_parse_input ("s3://bkt/dir/", &error));
    assert_non_null (strstr (error.text, "s3://bkt/dir/: names a prefix"));
    assert_null (tier_url_parse_input ("s3://bkt", &error));
    assert_non_null (strstr (error.text, "names a prefix"));
    assert_null (tier_url_parse_input ("https://h/", &error));
    assert_non_null (strstr (error.text, "names a prefix"));
    assert_null (tier_url_parse_input ("ftp://h/x", &error));
    assert_non_null (strstr (error.text, "unsupported scheme"));
}

static void test_out_item (void **state)
{
    char path[64], url[64];

    assert_true (tier_url_out_item_is_url ("/gfs/out=s3://b/p/"));
    assert_false (tier_url_out_item_is_url ("/gfs/out"));
    assert_int_equal (tier_url_out_item_split ("/gfs/out=s3://bkt/o/%a/",
                                               path, sizeof (path), url,
                                               sizeof (url)), 0);
    assert_string_equal (path, "/gfs/out");
    assert_string_equal (url, "s3://bkt/o/%a/");
    /* the first '=' that a scheme follows: '=' in the path and the URL */
    assert_int_equal (tier_url_out_item_split ("/gfs/a=b=https://h/x=y/",
                                               path, sizeof (path), url,
                                               sizeof (url)), 0);
    assert_string_equal (path, "/gfs/a=b");
    assert_string_equal (url, "https://h/x=y/");
    assert_int_equal (tier_url_out_item_split ("/gfs/o=HTTP://h/", path,
                                               sizeof (path), url,
                                               sizeof (url)), 0);
    assert_string_equal (url, "HTTP://h/");
    /* no scheme after '=', nothing before it */
    assert_int_equal (tier_url_out_item_split ("/gfs/o=/x://", path,
                                               sizeof (path), url,
                                               sizeof (url)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_out_item_split ("=s3://b/", path,
                                               sizeof (path), url,
                                               sizeof (url)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_out_item_split ("/gfs/out=s3://b/", path, 4,
                                               url, sizeof (url)), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    assert_int_equal (tier_url_out_item_split ("/g=s3://bucket/", path,
                                               sizeof (path), url, 8), -1);
    assert_int_equal (errno, ENAMETOOLONG);
}

static void test_parse_output (void **state)
{
    tier_error_t error;
    struct tier_url *u;

    assert_non_null (u = tier_url_parse_output ("s3://bkt/out/", &error));
    tier_url_destroy (u);
    assert_non_null (u = tier_url_parse_output ("s3://bkt", &error));
    tier_url_destroy (u);
    assert_non_null (u = tier_url_parse_output ("https://h:1/dav/o/",
                                                &error));
    tier_url_destroy (u);
    assert_null (tier_url_parse_output ("s3://bkt/out", &error));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (error.text, "end it with '/'"));
    assert_null (tier_url_parse_output ("https://h/dav/o/?sig=s3cr3t",
                                        &error));
    assert_non_null (strstr (error.text, "a query string is not allowed"));
    assert_null (strstr (error.text, "s3cr3t"));
    assert_null (tier_url_parse_output ("https://u:pw@h/o/", &error));
    assert_null (strstr (error.text, "pw"));
    assert_null (tier_url_parse_output ("s3://Bad_Bucket/o/", &error));
    assert_null (tier_url_parse_output ("ftp://h/o/", &error));
    assert_non_null (strstr (error.text, "unsupported scheme"));
}

/* %XX escapes: decoded; '+' and the rest as they are; bad ones and a
 * short buffer refused. */
static void test_unescape (void **state)
{
    char out[8];

    (void) state;
    assert_int_equal (tier_url_unescape ("a%2Fb+c", 7, out, sizeof (out)), 5);
    assert_string_equal (out, "a/b+c");
    assert_int_equal (tier_url_unescape ("%41%4a%4A", 9, out, sizeof (out)), 3);
    assert_string_equal (out, "AJJ");
    assert_int_equal (tier_url_unescape ("x%2", 3, out, sizeof (out)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_unescape ("%zz", 3, out, sizeof (out)), -1);
    assert_int_equal (errno, EINVAL);
    assert_int_equal (tier_url_unescape ("abcdefgh", 8, out, sizeof (out)), -1);
    assert_int_equal (errno, ENAMETOOLONG);
    assert_int_equal (tier_url_unescape ("abcdefg", 7, out, sizeof (out)), 7);
    assert_int_equal (tier_url_unescape ("ab%41", 2, out, sizeof (out)), 2);
    assert_string_equal (out, "ab");
}

static void test_shown (void **state)
{
    char buf[256], big[400];

    tier_url_shown ("https://a:b@h/x?sig=1", buf, sizeof (buf));
    assert_string_equal (buf, "https://***@h/x?...");
    tier_url_shown ("s3://bkt/k?x\n", buf, sizeof (buf));
    assert_string_equal (buf, "s3://bkt/k?x?");
    memset (big, 'k', sizeof (big) - 1);
    big[sizeof (big) - 1] = '\0';
    memcpy (big, "s3://bkt/", 9);
    tier_url_shown (big, buf, sizeof (buf));
    assert_int_equal (strlen (buf), 203);
    assert_string_equal (buf + 200, "...");
    tier_url_shown (big, buf, 16);
    assert_true (strlen (buf) < 16);
}

static void test_failalloc_parse (void **state)
{
    static const char *urls[] = {
        "s3://bkt/a/b", "https://h:1/a/b?q=1", "http://[::1]/",
    };

    for (size_t i = 0; i < sizeof (urls) / sizeof (urls[0]); i++) {
        int n;

        for (n = 1; n < 1000; n++) {
            tier_error_t error;
            struct tier_url *u;

            failalloc_arm (n);
            u = tier_url_parse (urls[i], &error);
            if (!failalloc_failed) {
                failalloc_arm (-1);
                assert_non_null (u);
                tier_url_destroy (u);
                break;
            }
            failalloc_arm (-1);
            assert_null (u);
            assert_int_equal (errno, ENOMEM);
        }
        assert_true (n > 3 && n < 1000);
    }
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_url_s3),
        cmocka_unit_test (test_url_http),
        cmocka_unit_test (test_url_errors),
        cmocka_unit_test (test_url_long),
        cmocka_unit_test (test_url_redaction),
        cmocka_unit_test (test_item_split),
        cmocka_unit_test (test_parse_input),
        cmocka_unit_test (test_out_item),
        cmocka_unit_test (test_parse_output),
        cmocka_unit_test (test_shown),
        cmocka_unit_test (test_unescape),
        cmocka_unit_test (test_failalloc_parse),
    };
    return UNIT_RUN (tests);
}

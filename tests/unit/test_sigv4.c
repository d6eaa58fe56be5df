/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* test_sigv4.c - SigV4 against AWS's published test suite
 *
 * Every directory of fixtures/sigv4 is one case of the suite (see its
 * README.md): the request, the expected canonical request, string to
 * sign, signature and Authorization header.  Each intermediate is
 * compared, so that a failure says which step is wrong.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "lib/sigv4.h"
#include "unit.h"
#include "failalloc.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

FAILALLOC_DEFINE

#ifndef SIGV4_FIXTURES
#define SIGV4_FIXTURES "fixtures/sigv4"
#endif

#define MAX_HEADERS 32

static char *slurp (const char *dir, const char *name)
{
    char path[PATH_MAX];
    FILE *f;
    char *buf;
    long len;

    assert_true (snprintf (path, sizeof (path), "%s/%s", dir, name)
                 < (int) sizeof (path));
    if (!(f = fopen (path, "r")))
        return NULL;
    fseek (f, 0, SEEK_END);
    len = ftell (f);
    fseek (f, 0, SEEK_SET);
    buf = calloc (1, (size_t) len + 1);
    if (buf && fread (buf, 1, (size_t) len, f) != (size_t) len) {
        free (buf);
        buf = NULL;
    }
    fclose (f);
    return buf;
}

/* One case of the suite, parsed. */
struct vector {
    char *text;                     /* request.txt, cut up in place */
    char *method;
    char *path;
    char *query;
    struct tier_sigv4_header headers[MAX_HEADERS];
    size_t nheaders;
    char *folded[MAX_HEADERS];      /* values of folded header lines */
    const char *body;
    char date[TIER_SIGV4_DATE_LEN + 1];
    char body_hash[TIER_SIGV4_HEX_LEN + 1];
    json_t *context;
};

static void vector_free (struct vector *v)
{
    for (size_t i = 0; i < MAX_HEADERS; i++)
        free (v->folded[i]);
    free (v->text);
    json_decref (v->context);
}

/* request.txt: "METHOD PATH[?QUERY] HTTP/1.1", header lines ("Name:value",
 * a line starting with a blank continues the previous value), an empty
 * line and the body. */
static void vector_load (const char *dir, struct vector *v)
{
    char *p, *line, *eol, *sp;
    json_error_t jerr;
    char path[PATH_MAX];
    const char *ts;
    int y, mo, d, h, mi, s;

    memset (v, 0, sizeof (*v));
    assert_true (snprintf (path, sizeof (path), "%s/context.json", dir)
                 < (int) sizeof (path));
    v->context = json_load_file (path, 0, &jerr);
    assert_non_null (v->context);
    assert_non_null (v->text = slurp (dir, "request.txt"));
    p = v->text;
    eol = strchr (p, '\n');
    assert_non_null (eol);
    *eol = '\0';
    v->method = p;
    sp = strchr (p, ' ');
    assert_non_null (sp);
    *sp = '\0';
    v->path = sp + 1;
    sp = strrchr (v->path, ' ');          /* " HTTP/1.1"; paths have blanks */
    assert_non_null (sp);
    *sp = '\0';
    if ((v->query = strchr (v->path, '?')))
        *v->query++ = '\0';
    v->body = "";
    if ((sp = strstr (eol + 1, "\n\n"))) {     /* headers, blank, body */
        sp[1] = '\0';
        v->body = sp + 2;
    }
    for (line = eol + 1; *line; line = eol + 1) {
        if (!(eol = strchr (line, '\n')))
            eol = line + strlen (line) - 1;     /* the last line */
        else
            *eol = '\0';
        if (*line == ' ' || *line == '\t') {      /* folded */
            size_t i = v->nheaders - 1;
            size_t len;
            char *nv;

            assert_true (v->nheaders > 0);
            len = strlen (v->headers[i].value) + strlen (line) + 2;
            nv = malloc (len);
            snprintf (nv, len, "%s\n%s", v->headers[i].value, line);
            free (v->folded[i]);
            v->folded[i] = nv;
            v->headers[i].value = nv;
            continue;
        }
        sp = strchr (line, ':');
        assert_non_null (sp);
        *sp = '\0';
        assert_true (v->nheaders < MAX_HEADERS - 3);
        v->headers[v->nheaders].name = line;
        v->headers[v->nheaders].value = sp + 1;
        v->nheaders++;
    }
    ts = json_string_value (json_object_get (v->context, "timestamp"));
    assert_non_null (ts);
    assert_int_equal (sscanf (ts, "%d-%d-%dT%d:%d:%dZ", &y, &mo, &d, &h,
                              &mi, &s), 6);
    snprintf (v->date, sizeof (v->date), "%04d%02d%02dT%02d%02d%02dZ", y, mo,
              d, h, mi, s);
    v->headers[v->nheaders].name = "X-Amz-Date";
    v->headers[v->nheaders++].value = v->date;
    assert_int_equal (tier_sigv4_sha256_hex (v->body, strlen (v->body),
                                             v->body_hash), 0);
    if (json_is_true (json_object_get (v->context, "sign_body"))) {
        v->headers[v->nheaders].name = "X-Amz-Content-Sha256";
        v->headers[v->nheaders++].value = v->body_hash;
    }
    {
        json_t *creds = json_object_get (v->context, "credentials");
        const char *token = json_string_value (json_object_get (creds,
                                                                "token"));
        if (token) {
            v->headers[v->nheaders].name = "X-Amz-Security-Token";
            v->headers[v->nheaders++].value = token;
        }
    }
}

static void vector_key (struct vector *v, struct tier_sigv4_key *key)
{
    json_t *creds = json_object_get (v->context, "credentials");

    key->access_key = json_string_value (json_object_get (creds,
                                                          "access_key_id"));
    key->secret_key = json_string_value (
        json_object_get (creds, "secret_access_key"));
    key->region = json_string_value (json_object_get (v->context, "region"));
    key->service = json_string_value (json_object_get (v->context,
                                                       "service"));
}

/* The Authorization header's value in header-signed-request.txt. */
static char *expected_authorization (const char *dir)
{
    char *text = slurp (dir, "header-signed-request.txt");
    char *p, *eol, *auth;

    assert_non_null (text);
    assert_non_null (p = strstr (text, "\nAuthorization:"));
    p += strlen ("\nAuthorization:");
    if ((eol = strchr (p, '\n')))
        *eol = '\0';
    auth = strdup (p);
    free (text);
    return auth;
}

static int run_vector (const char *dir)
{
    struct vector v;
    struct tier_sigv4_request req = { 0 };
    struct tier_sigv4_key key;
    tier_error_t error;
    char sig[TIER_SIGV4_HEX_LEN + 1];
    char *want_creq, *want_sts, *want_sig, *want_auth;
    char *creq, *sts, *auth;

    vector_load (dir, &v);
    vector_key (&v, &key);
    req.method = v.method;
    req.path = v.path;
    req.query = v.query;
    req.headers = v.headers;
    req.nheaders = v.nheaders;
    req.payload_hash = v.body_hash;

    want_creq = slurp (dir, "header-canonical-request.txt");
    want_sts = slurp (dir, "header-string-to-sign.txt");
    want_sig = slurp (dir, "header-signature.txt");
    want_auth = expected_authorization (dir);
    assert_non_null (want_creq);
    assert_non_null (want_sts);
    assert_non_null (want_sig);

    creq = tier_sigv4_canonical_request (&req, NULL, &error);
    assert_non_null (creq);
    assert_string_equal (creq, want_creq);
    sts = tier_sigv4_string_to_sign (v.date, creq, &key);
    assert_non_null (sts);
    assert_string_equal (sts, want_sts);
    assert_int_equal (tier_sigv4_signature (&key, v.date, sts, sig), 0);
    assert_string_equal (sig, want_sig);
    auth = tier_sigv4_authorization (&req, &key, v.date, &error);
    assert_non_null (auth);
    assert_string_equal (auth, want_auth);

    free (creq);
    free (sts);
    free (auth);
    free (want_creq);
    free (want_sts);
    free (want_sig);
    free (want_auth);
    vector_free (&v);
    return 0;
}

static void test_suite (void **state)
{
    const char *top = getenv ("TIER_SIGV4_FIXTURES");
    struct dirent **names;
    int n, ran = 0;

    if (!top)
        top = SIGV4_FIXTURES;
    n = scandir (top, &names, NULL, alphasort);
    assert_true (n > 0);
    for (int i = 0; i < n; i++) {
        char dir[PATH_MAX];

        if (names[i]->d_name[0] != '.' && names[i]->d_type == DT_DIR) {
            assert_true (snprintf (dir, sizeof (dir), "%s/%s", top,
                                   names[i]->d_name) < (int) sizeof (dir));
            print_message ("# %s\n", names[i]->d_name);
            run_vector (dir);
            ran++;
        }
        free (names[i]);
    }
    free (names);
    assert_true (ran >= 20);
}

/* The GET example of the Amazon S3 API reference ("Signature Calculations
 * for the Authorization Header: Transferring Payload in a Single Chunk"):
 * service s3, a Range header, and x-amz-content-sha256 signed. */
static const struct tier_sigv4_header s3_get_headers[] = {
    { "Host", "examplebucket.s3.amazonaws.com" },
    { "Range", "bytes=0-9" },
    { "x-amz-content-sha256", TIER_SIGV4_EMPTY_SHA256 },
    { "x-amz-date", "20130524T000000Z" },
};

static const struct tier_sigv4_key s3_key = {
    .access_key = "AKIAIOSFODNN7EXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "s3",
};

static void test_s3_get_example (void **state)
{
    struct tier_sigv4_request req = {
        .method = "GET",
        .path = "/test.txt",
        .headers = s3_get_headers,
        .nheaders = 4,
        .payload_hash = TIER_SIGV4_EMPTY_SHA256,
    };
    tier_error_t error;
    char *creq, *sts, *auth, *sh = NULL;

    creq = tier_sigv4_canonical_request (&req, &sh, &error);
    assert_non_null (creq);
    assert_string_equal (sh, "host;range;x-amz-content-sha256;x-amz-date");
    sts = tier_sigv4_string_to_sign ("20130524T000000Z", creq, &s3_key);
    assert_non_null (sts);
    assert_string_equal (sts, "AWS4-HMAC-SHA256\n20130524T000000Z\n"
                         "20130524/us-east-1/s3/aws4_request\n"
                         "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48b"
                         "bb2dc43964946972");
    auth = tier_sigv4_authorization (&req, &s3_key, "20130524T000000Z",
                                     &error);
    assert_non_null (auth);
    assert_string_equal (auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7"
                         "EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                         "SignedHeaders=host;range;x-amz-content-sha256;"
                         "x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d"
                         "6ed310bd44f0170aba48dd91039c6036bdb41");
    free (creq);
    free (sts);
    free (auth);
    free (sh);
}

static void test_encode (void **state)
{
    char *s;

    s = tier_sigv4_uri_encode ("/a b/c+d/é~x", strlen ("/a b/c+d/é~x"), 1);
    assert_string_equal (s, "/a%20b/c%2Bd/%C3%A9~x");
    free (s);
    s = tier_sigv4_uri_encode ("a/b=c&d", 7, 0);
    assert_string_equal (s, "a%2Fb%3Dc%26d");
    free (s);
    s = tier_sigv4_uri_encode ("", 0, 0);
    assert_string_equal (s, "");
    free (s);
    s = tier_sigv4_uri_encode ("a\0b", 3, 0);
    assert_string_equal (s, "a%00b");
    free (s);
}

static void test_query (void **state)
{
    char *s;

    s = tier_sigv4_canonical_query ("uploads");
    assert_string_equal (s, "uploads=");
    free (s);
    s = tier_sigv4_canonical_query ("uploadId=a%2Fb&partNumber=10");
    assert_string_equal (s, "partNumber=10&uploadId=a%2Fb");
    free (s);
    s = tier_sigv4_canonical_query ("b=2&a=2&a=1&&c=%7e%20+");
    assert_string_equal (s, "a=1&a=2&b=2&c=~%20%2B");
    free (s);
    s = tier_sigv4_canonical_query (NULL);
    assert_string_equal (s, "");
    free (s);
    errno = 0;
    assert_null (tier_sigv4_canonical_query ("a=%4"));
    assert_int_equal (errno, EINVAL);
    assert_null (tier_sigv4_canonical_query ("a=%zz"));
    assert_null (tier_sigv4_canonical_query ("%"));
}

static void test_errors (void **state)
{
    struct tier_sigv4_header bad[] = { { "Host", "h" }, { "a b", "v" } };
    struct tier_sigv4_header empty[] = { { "", "v" } };
    struct tier_sigv4_request req = {
        .method = "GET", .path = "/", .headers = bad, .nheaders = 2,
        .payload_hash = TIER_SIGV4_UNSIGNED,
    };
    struct tier_sigv4_key nokey = { .access_key = "A", .region = "r",
                                    .service = "s3" };
    tier_error_t error;
    char sig[TIER_SIGV4_HEX_LEN + 1];

    assert_null (tier_sigv4_canonical_request (&req, NULL, &error));
    assert_int_equal (errno, EINVAL);
    assert_non_null (strstr (error.text, "'a b'"));
    req.headers = empty;
    req.nheaders = 1;
    assert_null (tier_sigv4_canonical_request (&req, NULL, &error));
    assert_int_equal (errno, EINVAL);
    req.nheaders = 0;
    req.payload_hash = NULL;
    assert_null (tier_sigv4_canonical_request (&req, NULL, &error));
    req.payload_hash = TIER_SIGV4_UNSIGNED;
    req.query = "x=%g0";
    assert_null (tier_sigv4_canonical_request (&req, NULL, &error));
    assert_non_null (strstr (error.text, "escape"));
    req.query = NULL;
    assert_null (tier_sigv4_authorization (&req, &nokey, "20130524T000000Z",
                                           &error));
    assert_int_equal (errno, EINVAL);
    assert_null (tier_sigv4_authorization (&req, &s3_key, "2013-05-24",
                                           &error));
    assert_non_null (strstr (error.text, "2013-05-24"));
    assert_int_equal (tier_sigv4_signature (&s3_key, "x", "sts", sig), -1);
    assert_null (tier_sigv4_string_to_sign ("20130524T000000Z", "c",
                                            &nokey));
}

static void test_date (void **state)
{
    char buf[TIER_SIGV4_DATE_LEN + 1];

    tier_sigv4_date (1440938160, buf);
    assert_string_equal (buf, "20150830T123600Z");
}

/* An unsigned payload is signed as the literal, and the secret never
 * appears in what is produced. */
static void test_unsigned_payload (void **state)
{
    struct tier_sigv4_request req = {
        .method = "PUT", .path = "/bucket/my key", .query = NULL,
        .headers = s3_get_headers, .nheaders = 1,
        .payload_hash = TIER_SIGV4_UNSIGNED,
    };
    tier_error_t error;
    char *creq = tier_sigv4_canonical_request (&req, NULL, &error);
    char *auth = tier_sigv4_authorization (&req, &s3_key, "20130524T000000Z",
                                           &error);

    assert_non_null (creq);
    assert_non_null (strstr (creq, "\n/bucket/my%20key\n"));
    assert_non_null (strstr (creq, "\nUNSIGNED-PAYLOAD"));
    assert_non_null (auth);
    assert_null (strstr (auth, s3_key.secret_key));
    free (creq);
    free (auth);
}

static void test_failalloc (void **state)
{
    struct tier_sigv4_header hdrs[] = {
        { "Host", "h" }, { "X-A", " a  b " }, { "x-a", "c" },
        { "X-Amz-Date", "20130524T000000Z" },
    };
    struct tier_sigv4_request req = {
        .method = "GET", .path = "/k ey", .query = "b=1&a=%41&c",
        .headers = hdrs, .nheaders = 4, .payload_hash = TIER_SIGV4_UNSIGNED,
    };

    for (int n = 1; n < 1000; n++) {
        tier_error_t error;
        char *auth;

        failalloc_arm (n);
        auth = tier_sigv4_authorization (&req, &s3_key, "20130524T000000Z",
                                         &error);
        if (!failalloc_failed) {
            failalloc_arm (-1);
            assert_non_null (auth);
            free (auth);
            assert_true (n > 10);
            return;
        }
        failalloc_arm (-1);
        assert_null (auth);
        assert_int_equal (errno, ENOMEM);
    }
    fail_msg ("signing never finished");
}

int main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_suite),
        cmocka_unit_test (test_s3_get_example),
        cmocka_unit_test (test_encode),
        cmocka_unit_test (test_query),
        cmocka_unit_test (test_errors),
        cmocka_unit_test (test_date),
        cmocka_unit_test (test_unsigned_payload),
        cmocka_unit_test (test_failalloc),
    };
    return UNIT_RUN (tests);
}

/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* sigv4.h - AWS Signature Version 4 (header-based, AWS4-HMAC-SHA256)
 *
 * Why not libcurl's signer (CURLOPT_AWS_SIGV4): Debian 12's libcurl 7.88.1
 * signs the query as given (unsorted, "uploads" without "="), sorts
 * headers as "name:value" strings, does not merge repeated ones, and
 * signs an "Expect:" header that it then does not send (fixed in curl
 * 8.3-8.14).  Every S3 request tier signs carries "Expect:", so each
 * would fail with it: doc/why-not.md has the experiment.
 *
 * Signs one HTTP request the way S3 expects it: the canonical request
 * (method, URI, query, the signed headers, the payload hash), the string
 * to sign, the signing key derived from the secret, date, region and
 * service, and the Authorization header.  Each step is its own function so
 * that the unit tests compare every intermediate with AWS's published test
 * suite (tests/unit/fixtures/sigv4/).
 *
 * URIs are encoded once, as S3 wants (other AWS services encode twice) and
 * never normalised ("." and ".." segments and "//" are signed as they are:
 * they are valid S3 key bytes).
 *
 * Only SHA-256, HMAC-SHA-256 and MD5 of OpenSSL's libcrypto are used.  The
 * secret key is only ever an HMAC key: nothing here copies it into a
 * string that could be printed.
 */
#ifndef TIER_SIGV4_H
#define TIER_SIGV4_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "error.h"

#define TIER_SIGV4_HEX_LEN 64                   /* hex SHA-256, no NUL */
#define TIER_SIGV4_DATE_LEN 16                  /* 20150830T123600Z */
#define TIER_SIGV4_EMPTY_SHA256 \
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define TIER_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"

struct tier_sigv4_header {
    const char *name;               /* any case; signed lower-cased */
    const char *value;              /* trimmed, inner blanks collapsed */
};

struct tier_sigv4_request {
    const char *method;             /* "GET", "PUT", ... */
    const char *path;               /* decoded bytes, from "/": encoded
                                     * here (tier_sigv4_uri_encode) */
    const char *query;              /* as sent, without '?'; may be NULL */
    const struct tier_sigv4_header *headers;   /* every header to sign,
                                     * Host and X-Amz-Date included; the
                                     * same name twice is joined with ',' */
    size_t nheaders;
    const char *payload_hash;       /* hex SHA-256 of the body, or
                                     * TIER_SIGV4_UNSIGNED */
};

struct tier_sigv4_key {
    const char *access_key;
    const char *secret_key;
    const char *region;             /* "us-east-1" */
    const char *service;            /* "s3" */
};

/* Percent-encode len bytes of in the SigV4 way: every byte but
 * A-Z a-z 0-9 - . _ ~ becomes %XX (upper-case hex); '/' is kept when
 * keep_slash.  Returns a malloc'ed string, or NULL with errno set.
 */
char *tier_sigv4_uri_encode (const char *in, size_t len, int keep_slash);

/* The canonical query string of a query as sent ("b=2&a=1&c"): each
 * parameter decoded and encoded again, sorted by name then value, a
 * parameter without '=' getting an empty value.  Returns a malloc'ed
 * string ("" for NULL or ""), or NULL with errno set (EINVAL for a bad
 * %-escape).
 */
char *tier_sigv4_canonical_query (const char *query);

/* The canonical request, and in *signed_headers (malloc'ed, may be NULL)
 * the list of signed header names ("host;x-amz-date").  Returns a
 * malloc'ed string, or NULL with errno set and a reason in *error (EINVAL:
 * a header name that is empty or not a token, a bad query escape).
 */
char *tier_sigv4_canonical_request (const struct tier_sigv4_request *req,
                                    char **signed_headers,
                                    tier_error_t *error);

/* Format t as the X-Amz-Date value ("20150830T123600Z", UTC) into
 * buf[TIER_SIGV4_DATE_LEN + 1]. */
void tier_sigv4_date (time_t t, char *buf);

/* The string to sign for the canonical request creq, signed at amz_date
 * (X-Amz-Date's value), for key's region and service.  Returns a malloc'ed
 * string, or NULL with errno set.
 */
char *tier_sigv4_string_to_sign (const char *amz_date, const char *creq,
                                 const struct tier_sigv4_key *key);

/* The signature (hex, into sig[TIER_SIGV4_HEX_LEN + 1]) of a string to
 * sign.  Returns 0, or -1 with errno set.
 */
int tier_sigv4_signature (const struct tier_sigv4_key *key,
                          const char *amz_date, const char *sts, char *sig);

/* Sign req: the value of its Authorization header, malloc'ed
 * ("AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/s3/aws4_request,
 * SignedHeaders=host;x-amz-date, Signature=..."), or NULL with errno set
 * and a reason in *error.  amz_date must be the X-Amz-Date header's value.
 */
char *tier_sigv4_authorization (const struct tier_sigv4_request *req,
                                const struct tier_sigv4_key *key,
                                const char *amz_date, tier_error_t *error);

/* Hex SHA-256 of len bytes into hex[TIER_SIGV4_HEX_LEN + 1].  Returns 0,
 * or -1 with errno set. */
int tier_sigv4_sha256_hex (const void *data, size_t len, char *hex);

#endif /* !TIER_SIGV4_H */

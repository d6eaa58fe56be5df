/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* url.h - endpoint URLs: s3://, https://, http:// (libc only)
 *
 * The parser lives in libtiercore (libc only) so that the plugin can check
 * --tier-stage-in=URL=PATH at submit with the very parser that the
 * agent's endpoint library (endpoint.h, libtier_remote) uses.
 * Why not curl_url (): it is in libcurl, which tier.so may not link, it
 * removes "." and ".." segments unless told not to (an S3 key keeps them)
 * and knows nothing of bucket names or of which URLs hold secrets.
 */
#ifndef TIER_URL_H
#define TIER_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

enum tier_url_scheme {
    TIER_URL_S3 = 1,
    TIER_URL_HTTP,
    TIER_URL_HTTPS,
};

#define TIER_URL_MAX 4096               /* bytes of a URL */
#define TIER_S3_KEY_MAX 1024            /* bytes of an S3 key */

struct tier_url {
    enum tier_url_scheme scheme;
    char *text;                     /* the URL as given */
    char *display;                  /* for messages: query shown as "?..." */
    /* s3:// */
    char *bucket;
    char *key;                      /* "" or ending in '/': a prefix */
    /* http(s):// */
    char *host;                     /* name, IPv4, or IPv6 in [] */
    int port;                       /* explicit port, or 0 */
    char *path;                     /* from '/', as given (percent-encoded) */
    char *query;                    /* without '?', or NULL */
};

/* Parse an endpoint URL:
 *   s3://BUCKET/KEY    BUCKET 3-63 of a-z 0-9 . - (starting and ending
 *                      with a letter or digit, no "..", not an IPv4
 *                      address); KEY up to 1024 bytes, taken literally
 *                      (no %-decoding), no control characters; an empty
 *                      KEY or one ending in '/' is a prefix
 *   https://HOST[:PORT]/PATH[?QUERY], http://...   no user:password@, no
 *                      #fragment, no blanks or control characters (encode
 *                      them as %XX)
 * Returns a new URL, or NULL with errno EINVAL (ENOMEM) and a message
 * naming the URL and what is wrong with it.
 */
struct tier_url *tier_url_parse (const char *text, tier_error_t *error);
void tier_url_destroy (struct tier_url *url);

/* True if the URL names a prefix (s3 key "" or ending in '/', http path
 * ending in '/') rather than one object. */
int tier_url_is_prefix (const struct tier_url *url);

/* The URL for messages into buf: at most 200 bytes of it, control
 * characters as '?', a user:password@ as "***@", an http(s) query as
 * "?..." (it may hold a presigned signature; s3 keys are shown whole).
 */
void tier_url_shown (const char *text, char *buf, size_t size);

/*
 * Stage-in items: "URL=PATH" -- fetch the object at URL and show it at
 * the GFS path PATH.
 */

/* True if a stage-in item names a URL: it holds "://" (and does not
 * start with '/', as a path does). */
bool tier_url_item_is_url (const char *item);

/* Split "URL=PATH" at its last "=/": the URL into url, PATH (from its
 * '/') into path.  Returns 0, or -1 with errno EINVAL (no "=/", or
 * nothing before it) or ENAMETOOLONG.
 */
int tier_url_item_split (const char *item, char *url, size_t usize,
                         char *path, size_t psize);

/* Parse the URL of an input: one object (not a prefix), and no http(s)
 * query (option values end up in the job's environment and in messages,
 * so a URL must hold no secret; a presigned URL's query is one).  NULL
 * with errno EINVAL and a message naming the URL (shown without secrets).
 */
struct tier_url *tier_url_parse_input (const char *text,
                                       tier_error_t *error);

/*
 * Stage-out items: "DIR=URL" -- the job writes under the GFS directory
 * DIR (its overlay's lower), and each file REL it closes there goes to
 * the object URL + REL instead of to DIR/REL.
 */

/* True if a stage-out item holds a URL ("://"). */
bool tier_url_out_item_is_url (const char *item);

/* Split "DIR=URL" at its first '=' that a scheme and "://" follow
 * ("=s3://", "=https://": a DIR holding such a text cannot be used): DIR
 * into path, URL into url.  Returns 0, or -1 with errno EINVAL (no such
 * '=', or nothing before it) or ENAMETOOLONG.
 */
int tier_url_out_item_split (const char *item, char *path, size_t psize,
                             char *url, size_t usize);

/* Decode the %XX escapes of in[0..n) into out (size bytes, with a
 * NUL); anything else, '+' included, is copied as it is.  Returns the
 * decoded length, or -1 with errno EINVAL (a '%' without two hex digits)
 * or ENAMETOOLONG (out is too small).
 */
long tier_url_unescape (const char *in, size_t n, char *out, size_t size);

/* Parse the URL of an output prefix: s3://BUCKET/[PREFIX/] or
 * http(s)://HOST/PATH/ (it must end in '/': each output's relative name
 * is appended), without an http(s) query (as for inputs).  NULL with errno
 * EINVAL and a message naming the URL (shown without secrets).
 */
struct tier_url *tier_url_parse_output (const char *text,
                                        tier_error_t *error);

#endif /* !TIER_URL_H */

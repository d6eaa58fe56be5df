/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* url.c - endpoint URLs: parse, show without secrets, stage items
 *
 * Libc only: the plugin checks --tier-stage-in=URL=PATH and
 * --tier-stage-out=DIR=URL at submit with the same parser the agent's
 * endpoint library uses.
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "url.h"

void tier_url_destroy (struct tier_url *url)
{
    if (url) {
        int saved = errno;

        free (url->text);
        free (url->display);
        free (url->bucket);
        free (url->key);
        free (url->host);
        free (url->path);
        free (url->query);
        free (url);
        errno = saved;
    }
}

static int bad_url (tier_error_t *error, const char *shown, const char *fmt,
                    ...) __attribute__ ((format (printf, 3, 4)));

static int bad_url (tier_error_t *error, const char *shown, const char *fmt,
                    ...)
{
    char why[300];
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (why, sizeof (why), fmt, ap);
    va_end (ap);
    errno = EINVAL;
    return tier_errprintf (error, "%s: %s", shown, why);
}

void tier_url_shown (const char *text, char *buf, size_t size)
{
    const char *scheme_end = strstr (text, "://");
    const char *at = NULL;
    size_t n = 0;
    int is_s3 = !strncmp (text, "s3:", 3);

    if (scheme_end && !is_s3) {
        const char *auth = scheme_end + 3;
        size_t alen = strcspn (auth, "/?#");
        const char *p = memchr (auth, '@', alen);

        while (p && memchr (p + 1, '@', (size_t) (auth + alen - p - 1)))
            p = memchr (p + 1, '@', (size_t) (auth + alen - p - 1));
        at = p;
    }
    for (const char *p = text; *p && n + 5 < size && n < 200; p++) {
        if (at && p == scheme_end + 3) {
            memcpy (buf + n, "***", 3);
            n += 3;
            p = at;
        }
        if (*p == '?' && !is_s3) {
            memcpy (buf + n, "?...", 4);
            n += 4;
            break;
        }
        buf[n++] = iscntrl ((unsigned char) *p) ? '?' : *p;
    }
    buf[n] = '\0';
    if (strlen (text) > 200 && n + 4 < size)
        strcpy (buf + n, "...");
}

static int valid_bucket (const char *b, size_t len, const char **why)
{
    int dots = 0, digits_only = 1;

    if (len < 3 || len > 63) {
        *why = "must be 3 to 63 characters long";
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) b[i];

        if (c == '.') {
            dots++;
            if (i > 0 && b[i - 1] == '.') {
                *why = "has two adjacent dots";
                return 0;
            }
            continue;
        }
        if (!(islower (c) || isdigit (c) || c == '-') || !isascii (c)) {
            *why = "may only hold lower-case letters, digits, '.' and '-'";
            return 0;
        }
        if (!isdigit (c))
            digits_only = 0;
    }
    if (!isalnum ((unsigned char) b[0])
        || !isalnum ((unsigned char) b[len - 1])) {
        *why = "must start and end with a letter or digit";
        return 0;
    }
    if (dots == 3 && digits_only) {
        *why = "must not be an IP address";
        return 0;
    }
    return 1;
}

static int parse_s3 (struct tier_url *url, const char *rest,
                     const char *shown, tier_error_t *error)
{
    const char *slash = strchr (rest, '/');
    size_t blen = slash ? (size_t) (slash - rest) : strlen (rest);
    const char *key = slash ? slash + 1 : "";
    const char *why;

    if (blen == 0)
        return bad_url (error, shown, "no bucket name (s3://BUCKET/KEY)");
    if (!valid_bucket (rest, blen, &why)) {
        return bad_url (error, shown, "bucket name '%.*s' %s", (int) blen,
                        rest, why);
    }
    if (strlen (key) > TIER_S3_KEY_MAX)
        return bad_url (error, shown, "the key is longer than %d bytes",
                        TIER_S3_KEY_MAX);
    for (const char *p = key; *p; p++) {
        if (iscntrl ((unsigned char) *p))
            return bad_url (error, shown, "the key holds a control "
                            "character");
    }
    if (!(url->bucket = strndup (rest, blen)) || !(url->key = strdup (key)))
        return -1;
    return 0;
}

static int valid_host (const char *h, size_t len)
{
    if (len == 0)
        return 0;
    if (h[0] == '[') {                          /* IPv6 literal */
        if (len < 3 || h[len - 1] != ']')
            return 0;
        for (size_t i = 1; i < len - 1; i++)
            if (!isxdigit ((unsigned char) h[i]) && h[i] != ':'
                && h[i] != '.')
                return 0;
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) h[i];

        if (!isascii (c) || !(isalnum (c) || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

static int parse_http (struct tier_url *url, const char *rest,
                       const char *shown, tier_error_t *error)
{
    size_t alen = strcspn (rest, "/?#");
    const char *path = rest + alen;
    const char *at, *colon, *q;
    size_t hlen;

    for (const char *p = rest; *p; p++) {
        if (iscntrl ((unsigned char) *p) || *p == ' ')
            return bad_url (error, shown, "a blank or control character "
                            "(write it as %%XX)");
    }
    if ((at = memchr (rest, '@', alen)))
        return bad_url (error, shown, "credentials in the URL are not "
                        "allowed (they would show in logs and job "
                        "records); use the credentials file");
    if (strchr (rest, '#'))
        return bad_url (error, shown, "a #fragment is not allowed");
    hlen = alen;
    if (rest[0] == '[') {
        const char *end = memchr (rest, ']', alen);

        if (!end)
            return bad_url (error, shown, "unterminated IPv6 address");
        colon = end + 1 < rest + alen && end[1] == ':' ? end + 1 : NULL;
        if (end + 1 < rest + alen && !colon)
            return bad_url (error, shown, "garbage after the IPv6 address");
    }
    else
        colon = memchr (rest, ':', alen);
    if (colon) {
        char *end;
        long port;

        hlen = (size_t) (colon - rest);
        errno = 0;
        port = strtol (colon + 1, &end, 10);
        if (end != rest + alen || colon + 1 == end || port < 1
            || port > 65535 || errno)
            return bad_url (error, shown, "'%.*s' is not a port (1-65535)",
                            (int) (rest + alen - colon - 1), colon + 1);
        url->port = (int) port;
    }
    if (!valid_host (rest, hlen))
        return bad_url (error, shown, "'%.*s' is not a host name",
                        (int) hlen, rest);
    if (!(url->host = strndup (rest, hlen)))
        return -1;
    if ((q = strchr (path, '?'))) {
        if (!(url->query = strdup (q + 1))
            || !(url->path = *path == '?' ? strdup ("/")
                                          : strndup (path, (size_t) (q - path))))
            return -1;
    }
    else if (!(url->path = strdup (*path ? path : "/")))
        return -1;
    for (const char *p = url->path; *p; p++) {
        if (*p == '%' && (!isxdigit ((unsigned char) p[1])
                          || !isxdigit ((unsigned char) p[2])))
            return bad_url (error, shown, "a '%%' in the path that is not "
                            "a %%XX escape");
    }
    return 0;
}

struct tier_url *tier_url_parse (const char *text, tier_error_t *error)
{
    struct tier_url *url;
    char shown[256];
    const char *rest;
    int rc;

    if (!text || !*text) {
        errno = EINVAL;
        tier_errprintf (error, "empty URL");
        return NULL;
    }
    tier_url_shown (text, shown, sizeof (shown));
    if (strlen (text) > TIER_URL_MAX) {
        bad_url (error, shown, "longer than %d bytes", TIER_URL_MAX);
        return NULL;
    }
    if (!(url = calloc (1, sizeof (*url))))
        goto nomem;
    if (!(url->text = strdup (text)) || !(url->display = strdup (shown)))
        goto nomem;
    if (!strncmp (text, "s3://", 5)) {
        url->scheme = TIER_URL_S3;
        rest = text + 5;
        rc = parse_s3 (url, rest, shown, error);
    }
    else if (!strncasecmp (text, "https://", 8)) {
        url->scheme = TIER_URL_HTTPS;
        rc = parse_http (url, text + 8, shown, error);
    }
    else if (!strncasecmp (text, "http://", 7)) {
        url->scheme = TIER_URL_HTTP;
        rc = parse_http (url, text + 7, shown, error);
    }
    else {
        const char *colon = strstr (text, "://");

        if (colon && colon > text && colon - text < 16)
            bad_url (error, shown, "unsupported scheme '%.*s' (s3, https, "
                     "http)", (int) (colon - text), text);
        else
            bad_url (error, shown, "not a URL (s3://BUCKET/KEY, "
                     "https://HOST/PATH or http://HOST/PATH)");
        goto error;
    }
    if (rc < 0) {
        if (errno == ENOMEM)
            goto nomem;
        goto error;
    }
    return url;
nomem:
    errno = ENOMEM;
    tier_errprintf (error, "%s: out of memory", shown);
error:
    tier_url_destroy (url);
    return NULL;
}

int tier_url_is_prefix (const struct tier_url *url)
{
    const char *s = url->scheme == TIER_URL_S3 ? url->key : url->path;
    size_t len = strlen (s);

    if (url->scheme == TIER_URL_S3 && len == 0)
        return 1;
    return len > 0 && s[len - 1] == '/';
}

/* item split at eq into left (before it) and right (after it). */
static int split_at (const char *item, const char *eq, char *left, size_t lsize,
                     char *right, size_t rsize)
{
    size_t len;

    if (!eq || eq == item) {
        errno = EINVAL;
        return -1;
    }
    len = (size_t) (eq - item);
    if (len >= lsize || strlen (eq + 1) >= rsize) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy (left, item, len);
    left[len] = '\0';
    strcpy (right, eq + 1);
    return 0;
}

static int hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long tier_url_unescape (const char *in, size_t n, char *out, size_t size)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int hi, lo;

        if (o + 1 >= size) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (in[i] != '%') {
            out[o++] = in[i];
            continue;
        }
        if (i + 2 >= n || (hi = hexval (in[i + 1])) < 0
            || (lo = hexval (in[i + 2])) < 0) {
            errno = EINVAL;
            return -1;
        }
        out[o++] = (char) (hi << 4 | lo);
        i += 2;
    }
    if (size > 0)
        out[o] = '\0';
    return (long) o;
}

bool tier_url_item_is_url (const char *item)
{
    return item && item[0] != '/' && strstr (item, "://") != NULL;
}

int tier_url_item_split (const char *item, char *url, size_t usize,
                         char *path, size_t psize)
{
    const char *eq = NULL;

    for (const char *p = strstr (item, "=/"); p; p = strstr (p + 1, "=/"))
        eq = p;
    return split_at (item, eq, url, usize, path, psize);
}

/* A URL of a stage-in or stage-out item: no http(s) query (option
 * values end up in the job's environment and in messages, so a URL must
 * hold no secret; a presigned URL's query is one). */
static struct tier_url *parse_no_query (const char *text, tier_error_t *error)
{
    struct tier_url *url;

    if (!(url = tier_url_parse (text, error)))
        return NULL;
    if (url->query) {
        errno = EINVAL;
        tier_errprintf (error, "%s: a query string is not allowed (URLs "
                        "show in the job's environment and in messages: "
                        "they must hold no secrets)", url->display);
        tier_url_destroy (url);
        return NULL;
    }
    return url;
}

struct tier_url *tier_url_parse_input (const char *text, tier_error_t *error)
{
    struct tier_url *url;

    if (!(url = parse_no_query (text, error)))
        return NULL;
    if (tier_url_is_prefix (url)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: names a prefix or directory, not an "
                        "object (one object per item)", url->display);
        goto error;
    }
    return url;
error:
    tier_url_destroy (url);
    return NULL;
}

bool tier_url_out_item_is_url (const char *item)
{
    return item && strstr (item, "://") != NULL;
}

/* Does a scheme and "://" start s? */
static bool scheme_at (const char *s)
{
    size_t n = 0;

    if (!isalpha ((unsigned char) s[0]))
        return false;
    while (isalnum ((unsigned char) s[n]) || s[n] == '+' || s[n] == '-'
           || s[n] == '.')
        n++;
    return n < 16 && !strncmp (s + n, "://", 3);
}

int tier_url_out_item_split (const char *item, char *path, size_t psize,
                             char *url, size_t usize)
{
    const char *eq;

    for (eq = strchr (item, '='); eq && !scheme_at (eq + 1);
         eq = strchr (eq + 1, '='))
        ;
    return split_at (item, eq, path, psize, url, usize);
}

struct tier_url *tier_url_parse_output (const char *text,
                                        tier_error_t *error)
{
    struct tier_url *url;

    if (!(url = parse_no_query (text, error)))
        return NULL;
    if (!tier_url_is_prefix (url)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: an output URL is a prefix: end it with "
                        "'/' (each output's name under the directory is "
                        "appended to it)", url->display);
        goto error;
    }
    return url;
error:
    tier_url_destroy (url);
    return NULL;
}

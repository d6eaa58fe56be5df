/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* sigv4.c - AWS Signature Version 4 with libcrypto's SHA-256 and HMAC */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "sigv4.h"
#include "strbuf.h"
#include "url.h"

/*
 * Encoding.
 */

static int unreserved (unsigned char c)
{
    return isascii (c) && (isalnum (c) || c == '-' || c == '.' || c == '_'
                           || c == '~');
}

static void encode_into (struct tier_strbuf *b, const char *in, size_t len,
                         int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) in[i];

        if (unreserved (c) || (keep_slash && c == '/'))
            tier_strbuf_putc (b, (char) c);
        else {
            char esc[3] = { '%', hex[c >> 4], hex[c & 15] };
            tier_strbuf_add (b, esc, 3);
        }
    }
}

char *tier_sigv4_uri_encode (const char *in, size_t len, int keep_slash)
{
    struct tier_strbuf b = { 0 };

    encode_into (&b, in, len, keep_slash);
    return tier_strbuf_finish (&b);
}

/* Decode %XX escapes of in[0..len) into a malloc'ed buffer (*outlen bytes,
 * NUL-terminated).  '+' is kept: SigV4 does not treat it as a space. */
static char *decode (const char *in, size_t len, size_t *outlen)
{
    char *out = malloc (len + 1);
    long n;

    if (!out)
        return NULL;
    if ((n = tier_url_unescape (in, len, out, len + 1)) < 0) {
        free (out);
        errno = EINVAL;
        return NULL;
    }
    *outlen = (size_t) n;
    return out;
}

struct param {
    char *name;                     /* encoded */
    char *value;                    /* encoded */
};

static int param_cmp (const void *a, const void *b)
{
    const struct param *x = a, *y = b;
    int rc = strcmp (x->name, y->name);

    return rc ? rc : strcmp (x->value, y->value);
}

/* Decode, then encode again: one canonical spelling of a query part. */
static char *recode (const char *in, size_t len)
{
    size_t n;
    char *raw, *enc;

    if (!(raw = decode (in, len, &n)))
        return NULL;
    enc = tier_sigv4_uri_encode (raw, n, 0);
    free (raw);
    return enc;
}

char *tier_sigv4_canonical_query (const char *query)
{
    struct param *params = NULL;
    size_t count = 0, cap = 0;
    struct tier_strbuf b = { 0 };
    const char *p = query ? query : "";
    char *result = NULL;
    int saved;

    while (*p) {
        size_t len = strcspn (p, "&");
        const char *eq = memchr (p, '=', len);
        size_t nlen = eq ? (size_t) (eq - p) : len;

        if (len > 0) {
            if (count == cap) {
                size_t ncap = cap ? cap * 2 : 8;
                struct param *np = realloc (params, ncap * sizeof (*np));

                if (!np)
                    goto out;
                params = np;
                cap = ncap;
            }
            params[count].value = NULL;
            if (!(params[count].name = recode (p, nlen)))
                goto out;
            if (!(params[count].value = eq ? recode (eq + 1,
                                                     len - nlen - 1)
                                           : strdup (""))) {
                free (params[count].name);
                goto out;
            }
            count++;
        }
        p += len;
        if (*p == '&')
            p++;
    }
    if (count > 0)
        qsort (params, count, sizeof (*params), param_cmp);
    for (size_t i = 0; i < count; i++) {
        if (i > 0)
            tier_strbuf_putc (&b, '&');
        tier_strbuf_puts (&b, params[i].name);
        tier_strbuf_putc (&b, '=');
        tier_strbuf_puts (&b, params[i].value);
    }
    result = tier_strbuf_finish (&b);
out:
    saved = errno;
    for (size_t i = 0; i < count; i++) {
        free (params[i].name);
        free (params[i].value);
    }
    free (params);
    errno = saved;
    return result;
}

/*
 * Headers.
 */

struct chdr {
    char *name;                     /* lower-case */
    char *value;                    /* trimmed, blanks collapsed, joined */
    size_t order;                   /* first appearance, for a stable sort */
};

static int chdr_cmp (const void *a, const void *b)
{
    const struct chdr *x = a, *y = b;
    int rc = strcmp (x->name, y->name);

    if (rc)
        return rc;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int token_char (unsigned char c)
{
    return isascii (c) && (isalnum (c) || strchr ("!#$%&'*+-.^_`|~", c));
}

/* Trim, and collapse every run of blanks (spaces, tabs, and the line
 * breaks of folded header lines) into one space. */
static void add_trimmed (struct tier_strbuf *b, const char *v)
{
    int blank = 0, any = 0;

    for (; *v; v++) {
        if (*v == ' ' || *v == '\t' || *v == '\r' || *v == '\n') {
            blank = 1;
            continue;
        }
        if (blank && any)
            tier_strbuf_putc (b, ' ');
        blank = 0;
        any = 1;
        tier_strbuf_putc (b, *v);
    }
}

static void chdrs_free (struct chdr *h, size_t n)
{
    int saved = errno;

    for (size_t i = 0; i < n; i++) {
        free (h[i].name);
        free (h[i].value);
    }
    free (h);
    errno = saved;
}

/* Lower-case names, trimmed values, one entry per name (values joined with
 * ',' in order of appearance), sorted by name. */
static struct chdr *canonical_headers (const struct tier_sigv4_request *req,
                                       size_t *countp, tier_error_t *error)
{
    struct chdr *h;
    size_t n = 0;

    if (!(h = calloc (req->nheaders ? req->nheaders : 1, sizeof (*h))))
        return NULL;
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *name = req->headers[i].name;
        const char *value = req->headers[i].value ? req->headers[i].value
                                                  : "";
        struct tier_strbuf v = { 0 };
        size_t len = name ? strlen (name) : 0;
        size_t j;
        char *lname;

        if (len == 0) {
            tier_errprintf (error, "an empty header name cannot be signed");
            goto inval;
        }
        for (j = 0; j < len; j++) {
            if (!token_char ((unsigned char) name[j])) {
                tier_errprintf (error, "header name '%s' is not an HTTP "
                                "token", name);
                goto inval;
            }
        }
        if (!(lname = strdup (name)))
            goto nomem;
        for (j = 0; j < len; j++)
            lname[j] = (char) tolower ((unsigned char) lname[j]);
        for (j = 0; j < n; j++)
            if (!strcmp (h[j].name, lname))
                break;
        if (j < n) {                        /* repeated: join */
            tier_strbuf_puts (&v, h[j].value);
            tier_strbuf_putc (&v, ',');
            add_trimmed (&v, value);
            free (lname);
            if (!tier_strbuf_finish (&v))
                goto nomem;
            free (h[j].value);
            h[j].value = v.s;
            continue;
        }
        add_trimmed (&v, value);
        if (!tier_strbuf_finish (&v)) {
            free (lname);
            goto nomem;
        }
        h[n].name = lname;
        h[n].value = v.s;
        h[n].order = n;
        n++;
    }
    qsort (h, n, sizeof (*h), chdr_cmp);
    *countp = n;
    return h;
inval:
    chdrs_free (h, n);
    errno = EINVAL;
    return NULL;
nomem:
    chdrs_free (h, n);
    errno = ENOMEM;
    return NULL;
}

char *tier_sigv4_canonical_request (const struct tier_sigv4_request *req,
                                    char **signed_headers,
                                    tier_error_t *error)
{
    struct tier_strbuf b = { 0 };
    struct tier_strbuf sh = { 0 };
    struct chdr *h = NULL;
    size_t n = 0;
    char *query = NULL;
    const char *path = req->path && *req->path ? req->path : "/";

    if (!req->method || !*req->method || !req->payload_hash) {
        errno = EINVAL;
        tier_errprintf (error, "a request without method or payload hash "
                        "cannot be signed");
        return NULL;
    }
    if (!(query = tier_sigv4_canonical_query (req->query))) {
        if (errno == EINVAL)
            tier_errprintf (error, "bad %%-escape in the query string");
        else
            tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (!(h = canonical_headers (req, &n, error))) {
        if (errno == ENOMEM)
            tier_errprintf (error, "out of memory");
        free (query);
        return NULL;
    }
    tier_strbuf_puts (&b, req->method);
    tier_strbuf_putc (&b, '\n');
    encode_into (&b, path, strlen (path), 1);
    tier_strbuf_putc (&b, '\n');
    tier_strbuf_puts (&b, query);
    tier_strbuf_putc (&b, '\n');
    for (size_t i = 0; i < n; i++) {
        tier_strbuf_puts (&b, h[i].name);
        tier_strbuf_putc (&b, ':');
        tier_strbuf_puts (&b, h[i].value);
        tier_strbuf_putc (&b, '\n');
        if (i > 0)
            tier_strbuf_putc (&sh, ';');
        tier_strbuf_puts (&sh, h[i].name);
    }
    tier_strbuf_putc (&b, '\n');
    tier_strbuf_puts (&b, sh.s ? sh.s : "");
    tier_strbuf_putc (&b, '\n');
    tier_strbuf_puts (&b, req->payload_hash);
    chdrs_free (h, n);
    free (query);
    if (!tier_strbuf_finish (&b) || !tier_strbuf_finish (&sh)) {
        tier_strbuf_free (&b);
        tier_strbuf_free (&sh);
        errno = ENOMEM;
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (signed_headers)
        *signed_headers = sh.s;
    else
        tier_strbuf_free (&sh);
    return b.s;
}

/*
 * Hashes.
 */

static void to_hex (const unsigned char *md, size_t len, char *hex)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * len] = '\0';
}

int tier_sigv4_sha256_hex (const void *data, size_t len, char *hex)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (!EVP_Digest (data, len, md, &mdlen, EVP_sha256 (), NULL)
        || mdlen != 32) {
        errno = EIO;
        return -1;
    }
    to_hex (md, mdlen, hex);
    return 0;
}

static int hmac (const void *key, size_t keylen, const char *msg,
                 unsigned char *out)
{
    unsigned int len = 0;

    if (!HMAC (EVP_sha256 (), key, (int) keylen,
               (const unsigned char *) msg, strlen (msg), out, &len)
        || len != 32) {
        errno = EIO;
        return -1;
    }
    return 0;
}

void tier_sigv4_date (time_t t, char *buf)
{
    struct tm tm;

    gmtime_r (&t, &tm);
    strftime (buf, TIER_SIGV4_DATE_LEN + 1, "%Y%m%dT%H%M%SZ", &tm);
}

static int valid_date (const char *d)
{
    if (!d || strlen (d) != TIER_SIGV4_DATE_LEN || d[8] != 'T'
        || d[15] != 'Z')
        return 0;
    for (int i = 0; i < 15; i++)
        if (i != 8 && !isdigit ((unsigned char) d[i]))
            return 0;
    return 1;
}

static int valid_key (const struct tier_sigv4_key *key)
{
    return key && key->access_key && *key->access_key && key->secret_key
           && key->region && *key->region && key->service
           && *key->service;
}

char *tier_sigv4_string_to_sign (const char *amz_date, const char *creq,
                                 const struct tier_sigv4_key *key)
{
    char hex[TIER_SIGV4_HEX_LEN + 1];
    struct tier_strbuf b = { 0 };

    if (!valid_date (amz_date) || !creq || !valid_key (key)) {
        errno = EINVAL;
        return NULL;
    }
    if (tier_sigv4_sha256_hex (creq, strlen (creq), hex) < 0)
        return NULL;
    tier_strbuf_puts (&b, "AWS4-HMAC-SHA256\n");
    tier_strbuf_puts (&b, amz_date);
    tier_strbuf_putc (&b, '\n');
    tier_strbuf_add (&b, amz_date, 8);
    tier_strbuf_putc (&b, '/');
    tier_strbuf_puts (&b, key->region);
    tier_strbuf_putc (&b, '/');
    tier_strbuf_puts (&b, key->service);
    tier_strbuf_puts (&b, "/aws4_request\n");
    tier_strbuf_puts (&b, hex);
    return tier_strbuf_finish (&b);
}

int tier_sigv4_signature (const struct tier_sigv4_key *key,
                          const char *amz_date, const char *sts, char *sig)
{
    unsigned char k[32], k2[32];
    char date[9];
    struct tier_strbuf secret = { 0 };
    int rc = -1;

    if (!valid_key (key) || !valid_date (amz_date) || !sts) {
        errno = EINVAL;
        return -1;
    }
    memcpy (date, amz_date, 8);
    date[8] = '\0';
    tier_strbuf_puts (&secret, "AWS4");
    tier_strbuf_puts (&secret, key->secret_key);
    if (!tier_strbuf_finish (&secret))
        return -1;
    if (hmac (secret.s, secret.len, date, k) < 0
        || hmac (k, sizeof (k), key->region, k2) < 0
        || hmac (k2, sizeof (k2), key->service, k) < 0
        || hmac (k, sizeof (k), "aws4_request", k2) < 0
        || hmac (k2, sizeof (k2), sts, k) < 0)
        goto out;
    to_hex (k, sizeof (k), sig);
    rc = 0;
out:
    OPENSSL_cleanse (secret.s, secret.len);
    OPENSSL_cleanse (k2, sizeof (k2));
    tier_strbuf_free (&secret);
    return rc;
}

char *tier_sigv4_authorization (const struct tier_sigv4_request *req,
                                const struct tier_sigv4_key *key,
                                const char *amz_date, tier_error_t *error)
{
    char sig[TIER_SIGV4_HEX_LEN + 1];
    char *creq = NULL, *sts = NULL, *signed_headers = NULL;
    char *auth = NULL;
    struct tier_strbuf b = { 0 };

    if (!valid_key (key)) {
        errno = EINVAL;
        tier_errprintf (error, "no access key, secret key, region or "
                        "service to sign with");
        return NULL;
    }
    if (!valid_date (amz_date)) {
        errno = EINVAL;
        tier_errprintf (error, "'%s' is not an X-Amz-Date value",
                        amz_date ? amz_date : "(null)");
        return NULL;
    }
    if (!(creq = tier_sigv4_canonical_request (req, &signed_headers,
                                               error)))
        return NULL;
    if (!(sts = tier_sigv4_string_to_sign (amz_date, creq, key))
        || tier_sigv4_signature (key, amz_date, sts, sig) < 0) {
        tier_errprintf (error, "signing failed");
        goto out;
    }
    tier_strbuf_puts (&b, "AWS4-HMAC-SHA256 Credential=");
    tier_strbuf_puts (&b, key->access_key);
    tier_strbuf_putc (&b, '/');
    tier_strbuf_add (&b, amz_date, 8);
    tier_strbuf_putc (&b, '/');
    tier_strbuf_puts (&b, key->region);
    tier_strbuf_putc (&b, '/');
    tier_strbuf_puts (&b, key->service);
    tier_strbuf_puts (&b, "/aws4_request, SignedHeaders=");
    tier_strbuf_puts (&b, signed_headers);
    tier_strbuf_puts (&b, ", Signature=");
    tier_strbuf_puts (&b, sig);
    if (!(auth = tier_strbuf_finish (&b)))
        tier_errprintf (error, "out of memory");
out:
    free (creq);
    free (sts);
    free (signed_headers);
    return auth;
}


/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint_s3.c - the s3 back-end: SigV4-signed GET, HEAD, PUT, multipart
 * uploads that resume from a persisted state, DELETE and abort */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sigv4.h"
#include "endpoint_int.h"
#include "endpoint.h"

/*
 * Part sizes and upload states.
 */

uint64_t tier_s3_part_size (uint64_t size, uint64_t want)
{
    uint64_t part = want ? want : TIER_S3_DEFAULT_PART;
    uint64_t need;

    if (size > TIER_S3_MAX_OBJECT) {
        errno = EFBIG;
        return 0;
    }
    if (part < TIER_S3_MIN_PART)
        part = TIER_S3_MIN_PART;
    if (part > TIER_S3_MAX_PART)
        part = TIER_S3_MAX_PART;
    need = (size + TIER_S3_MAX_PARTS - 1) / TIER_S3_MAX_PARTS;
    if (part < need)
        part = (need + (1u << 20) - 1) & ~(uint64_t) ((1u << 20) - 1);
    return part;
}

static unsigned int part_count (uint64_t size, uint64_t part)
{
    return size == 0 ? 1 : (unsigned int) ((size + part - 1) / part);
}

void tier_s3_upload_destroy (struct tier_s3_upload *up)
{
    if (up) {
        int saved = errno;

        for (unsigned int i = 0; up->etags && i < up->nparts; i++)
            free (up->etags[i]);
        free (up->etags);
        free (up->url);
        free (up->upload_id);
        free (up);
        errno = saved;
    }
}

static struct tier_s3_upload *upload_create (const char *url,
                                             const char *upload_id,
                                             uint64_t size, int64_t mtime_ns,
                                             uint64_t part_size)
{
    struct tier_s3_upload *up = calloc (1, sizeof (*up));

    if (!up)
        return NULL;
    up->size = size;
    up->mtime_ns = mtime_ns;
    up->part_size = part_size;
    up->nparts = part_count (size, part_size);
    if (!(up->url = strdup (url)) || !(up->upload_id = strdup (upload_id))
        || !(up->etags = calloc (up->nparts, sizeof (char *)))) {
        tier_s3_upload_destroy (up);
        errno = ENOMEM;
        return NULL;
    }
    return up;
}

char *tier_s3_upload_dump (const struct tier_s3_upload *up)
{
    json_t *o, *parts;
    char *s;

    if (!(parts = json_array ()))
        goto nomem;
    for (unsigned int i = 0; i < up->nparts; i++) {
        json_t *p;

        if (!up->etags[i])
            continue;
        if (!(p = json_pack ("{s:I s:s}", "n", (json_int_t) i + 1, "etag",
                             up->etags[i]))
            || json_array_append_new (parts, p) < 0) {
            json_decref (parts);
            goto nomem;
        }
    }
    if (!(o = json_pack ("{s:i s:s s:s s:I s:I s:I s:o}", "version", 1,
                         "url", up->url, "upload_id", up->upload_id, "size",
                         (json_int_t) up->size, "mtime_ns",
                         (json_int_t) up->mtime_ns, "part_size",
                         (json_int_t) up->part_size, "parts", parts)))
        goto nomem;
    s = json_dumps (o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref (o);
    if (!s)
        goto nomem;
    return s;
nomem:
    errno = ENOMEM;
    return NULL;
}

struct tier_s3_upload *tier_s3_upload_load (const char *json,
                                            tier_error_t *error)
{
    struct tier_s3_upload *up = NULL;
    json_error_t jerr;
    json_t *o, *parts, *p;
    const char *url, *id;
    json_int_t size, mtime, psize;
    int version;
    size_t i;

    if (!json || !(o = json_loads (json, 0, &jerr))) {
        errno = EINVAL;
        tier_errprintf (error, "upload state: not JSON (%s)",
                        json ? jerr.text : "none");
        return NULL;
    }
    if (json_unpack_ex (o, &jerr, JSON_STRICT,
                        "{s:i s:s s:s s:I s:I s:I s:o}", "version", &version,
                        "url", &url, "upload_id", &id, "size", &size,
                        "mtime_ns", &mtime, "part_size", &psize, "parts",
                        &parts) < 0
        || version != 1 || !json_is_array (parts) || size < 0
        || psize < (json_int_t) TIER_S3_MIN_PART
        || psize > (json_int_t) TIER_S3_MAX_PART || !*id
        || part_count ((uint64_t) size, (uint64_t) psize)
               > TIER_S3_MAX_PARTS) {
        errno = EINVAL;
        tier_errprintf (error, "upload state: not a version 1 state%s%s",
                        jerr.text[0] ? ": " : "", jerr.text);
        json_decref (o);
        return NULL;
    }
    if (!(up = upload_create (url, id, (uint64_t) size, (int64_t) mtime,
                              (uint64_t) psize))) {
        tier_errprintf (error, "upload state: out of memory");
        json_decref (o);
        return NULL;
    }
    json_array_foreach (parts, i, p) {
        json_int_t n;
        const char *etag;

        if (json_unpack (p, "{s:I s:s}", "n", &n, "etag", &etag) < 0
            || n < 1 || n > (json_int_t) up->nparts || !*etag
            || up->etags[n - 1]) {
            errno = EINVAL;
            tier_errprintf (error, "upload state: bad part %zu", i + 1);
            goto error;
        }
        if (!(up->etags[n - 1] = strdup (etag))) {
            tier_errprintf (error, "upload state: out of memory");
            goto error;
        }
    }
    json_decref (o);
    return up;
error:
    json_decref (o);
    tier_s3_upload_destroy (up);
    return NULL;
}

/*
 * Addressing and signing.
 */

int s3_setup (struct tier_endpoint *ep, tier_error_t *error)
{
    const struct tier_creds *c = ep->opts.creds;
    const struct tier_url *u = ep->url;
    struct tier_strbuf base = { 0 }, host = { 0 }, prefix = { 0 };
    int path_style;

    if (!c || !c->access_key || !c->secret_key || !c->region) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: no S3 credentials (see "
                               "doc/endpoints.md)", u->display);
    }
    if (c->addressing == TIER_S3_ADDR_PATH)
        path_style = 1;
    else if (c->addressing == TIER_S3_ADDR_VIRTUAL)
        path_style = 0;
    else
        path_style = c->endpoint || strchr (u->bucket, '.');
    if (c->endpoint) {
        struct tier_url *e = tier_url_parse (c->endpoint, error);

        if (!e)
            return -1;
        ep->http_only = e->scheme == TIER_URL_HTTP;
        if (!path_style)
            tier_strbuf_printf (&host, "%s.", u->bucket);
        tier_strbuf_puts (&host, e->host);
        if (e->port)
            tier_strbuf_printf (&host, ":%d", e->port);
        tier_strbuf_printf (&base, "%s://", ep->http_only ? "http" : "https");
        tier_url_destroy (e);
    }
    else {
        if (!path_style)
            tier_strbuf_printf (&host, "%s.", u->bucket);
        tier_strbuf_printf (&host, "s3.%s.amazonaws.com", c->region);
        tier_strbuf_puts (&base, "https://");
    }
    if (host.s)
        tier_strbuf_puts (&base, host.s);
    if (path_style)
        tier_strbuf_printf (&prefix, "/%s/", u->bucket);
    else
        tier_strbuf_puts (&prefix, "/");
    if (!tier_strbuf_finish (&base) || !tier_strbuf_finish (&host)
        || !tier_strbuf_finish (&prefix)) {
        tier_strbuf_free (&base);
        tier_strbuf_free (&host);
        tier_strbuf_free (&prefix);
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    ep->s3_base = base.s;
    ep->s3_host = host.s;
    ep->s3_prefix = prefix.s;
    return 0;
}

/* Sign and address one request: rq->url and rq->headers.  query is as
 * sent (encoded) or NULL; md5 a base64 Content-MD5 or NULL. */
static int s3_sign (struct tier_endpoint *ep, struct ep_request *rq,
                    const char *query, const char *payload_hash,
                    const char *md5, tier_error_t *error)
{
    const struct tier_creds *c = ep->opts.creds;
    struct tier_sigv4_header h[6];
    struct tier_sigv4_key key = {
        .access_key = c->access_key, .secret_key = c->secret_key,
        .region = c->region, .service = "s3",
    };
    struct tier_sigv4_request req = {
        .method = rq->method, .query = query, .headers = h,
        .payload_hash = payload_hash,
    };
    char date[TIER_SIGV4_DATE_LEN + 1];
    struct tier_strbuf path = { 0 }, url = { 0 }, line = { 0 };
    char *enc = NULL, *auth = NULL;
    size_t n = 0;
    int rc = -1;

    tier_sigv4_date (time (NULL), date);
    tier_strbuf_puts (&path, ep->s3_prefix);
    tier_strbuf_puts (&path, ep->url->key);
    if (!tier_strbuf_finish (&path) || !(enc = ep_path_encode (path.s)))
        goto nomem;
    tier_strbuf_printf (&url, "%s%s%s%s", ep->s3_base, enc, query ? "?" : "",
                        query ? query : "");
    if (!tier_strbuf_finish (&url))
        goto nomem;
    h[n++] = (struct tier_sigv4_header){ "Host", ep->s3_host };
    h[n++] = (struct tier_sigv4_header){ "X-Amz-Date", date };
    h[n++] = (struct tier_sigv4_header){ "X-Amz-Content-Sha256",
                                         payload_hash };
    if (c->session_token)
        h[n++] = (struct tier_sigv4_header){ "X-Amz-Security-Token",
                                             c->session_token };
    if (md5)
        h[n++] = (struct tier_sigv4_header){ "Content-MD5", md5 };
    req.nheaders = n;
    req.path = path.s;
    if (!(auth = tier_sigv4_authorization (&req, &key, date, error)))
        goto out;
    for (size_t i = 0; i < n; i++) {
        tier_strbuf_printf (&line, "%s: %s", h[i].name, h[i].value);
        if (!tier_strbuf_finish (&line) || !ep_request_header (rq, line.s))
            goto nomem;
        tier_strbuf_free (&line);
    }
    tier_strbuf_printf (&line, "Authorization: %s", auth);
    if (!tier_strbuf_finish (&line) || !ep_request_header (rq, line.s)
        || !ep_request_header (rq, "Expect:"))
        goto nomem;
    rq->url = url.s;
    url.s = NULL;
    rc = 0;
    goto out;
nomem:
    errno = ENOMEM;
    tier_errprintf (error, "%s: out of memory", ep->url->display);
out:
    tier_strbuf_free (&path);
    tier_strbuf_free (&url);
    tier_strbuf_free (&line);
    free (enc);
    free (auth);
    return rc;
}

static int s3_prepare (struct tier_endpoint *ep, struct ep_request *rq,
                       tier_error_t *error)
{
    return s3_sign (ep, rq, NULL, TIER_SIGV4_EMPTY_SHA256, NULL, error);
}

/* SHA-256 (hex) and MD5 (base64) of len bytes of fd at off. */
static int hash_range (struct tier_endpoint *ep, int fd, uint64_t off,
                       uint64_t len, char *sha_hex, char *md5_b64,
                       tier_error_t *error)
{
    static const char digits[] = "0123456789abcdef";
    EVP_MD_CTX *sha = EVP_MD_CTX_new (), *md5 = EVP_MD_CTX_new ();
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen;
    size_t bufsize = 1u << 20;
    char *buf = malloc (bufsize);
    uint64_t pos = 0;
    int rc = -1;

    if (!sha || !md5 || !buf) {
        errno = ENOMEM;
        tier_errprintf (error, "%s: out of memory", ep->url->display);
        goto out;
    }
    if (!EVP_DigestInit_ex (sha, EVP_sha256 (), NULL)
        || !EVP_DigestInit_ex (md5, EVP_md5 (), NULL))
        goto crypto;
    while (pos < len) {
        size_t want = len - pos < bufsize ? (size_t) (len - pos) : bufsize;
        ssize_t n = pread (fd, buf, want, (off_t) (off + pos));

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ESTALE;
            tier_errprintf (error, "%s: read: %s", ep->url->display,
                            n == 0 ? "the file shrank" : strerror (errno));
            goto out;
        }
        if (ep_cancelled (ep)) {
            errno = ECANCELED;
            tier_errprintf (error, "%s: cancelled", ep->url->display);
            goto out;
        }
        if (!EVP_DigestUpdate (sha, buf, (size_t) n)
            || !EVP_DigestUpdate (md5, buf, (size_t) n))
            goto crypto;
        pos += (uint64_t) n;
    }
    if (!EVP_DigestFinal_ex (sha, md, &mdlen) || mdlen != 32)
        goto crypto;
    for (unsigned int i = 0; i < mdlen; i++) {
        sha_hex[2 * i] = digits[md[i] >> 4];
        sha_hex[2 * i + 1] = digits[md[i] & 15];
    }
    sha_hex[2 * mdlen] = '\0';
    if (!EVP_DigestFinal_ex (md5, md, &mdlen) || mdlen != 16)
        goto crypto;
    EVP_EncodeBlock ((unsigned char *) md5_b64, md, 16);
    rc = 0;
    goto out;
crypto:
    errno = EIO;
    tier_errprintf (error, "%s: libcrypto digest failed", ep->url->display);
out:
    EVP_MD_CTX_free (sha);
    EVP_MD_CTX_free (md5);
    free (buf);
    return rc;
}

/* Send len bytes of fd at off (or the memory mem) with method and query;
 * retried.  With etag, the response's ETag is copied there ("" if it had
 * none). */
static int s3_send (struct tier_endpoint *ep, const char *method,
                    const char *query, int fd, uint64_t off, uint64_t len,
                    const char *mem, const char *what, char *etag,
                    size_t etag_size, struct tier_strbuf *body,
                    tier_error_t *error)
{
    char sha[TIER_SIGV4_HEX_LEN + 1], md5[32];
    bool sign = !(ep->opts.flags & TIER_ENDPOINT_UNSIGNED);
    uint64_t done_before = ep->done;
    struct ep_request rq;

    if (mem) {
        if (tier_sigv4_sha256_hex (mem, len, sha) < 0) {
            tier_errprintf (error, "%s: libcrypto digest failed",
                            ep->url->display);
            return -1;
        }
    }
    else if (sign && hash_range (ep, fd, off, len, sha, md5, error) < 0)
        return -1;
    for (int attempt = 0;; attempt++) {
        CURLcode rc;

        ep_request_init (&rq, method);
        if (s3_sign (ep, &rq, query, mem || sign ? sha : TIER_SIGV4_UNSIGNED,
                     !mem && sign ? md5 : NULL, error) < 0)
            goto error;
        if (mem) {
            rq.in_mem = mem;
            rq.in_mem_len = len;
            if (!ep_request_header (&rq, "Content-Type: application/xml")) {
                errno = ENOMEM;
                tier_errprintf (error, "out of memory");
                goto error;
            }
        }
        else {
            rq.in_fd = fd;
            rq.in_off = off;
            rq.in_len = len;
        }
        ep->done = done_before;
        rc = ep_perform (ep, &rq);
        if (rc == CURLE_OK && rq.status == 200
            && !(rq.body.s && strstr (rq.body.s, "<Error>")))
            break;
        if (rc == CURLE_OK && rq.status == 200) {
            /* CompleteMultipartUpload can fail after its 200 */
            char *code = ep_xml_value (rq.body.s, "Code");
            bool retry = code && (!strcmp (code, "InternalError")
                                  || !strcmp (code, "SlowDown"));

            free (code);
            if (retry && attempt < ep_retries (ep)) {
                ep_request_clear (&rq);
                if (ep_backoff (ep, attempt) < 0)
                    goto cancelled;
                continue;
            }
            rq.status = 500;
            ep_fail (ep, &rq, rc, what, error);
            errno = EIO;
            goto error;
        }
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0)
                goto cancelled;
            continue;
        }
        ep_fail (ep, &rq, rc, what, error);
        goto error;
    }
    if (etag)
        snprintf (etag, etag_size, "%s", rq.etag);  /* "" if none */
    if (body) {
        *body = rq.body;
        memset (&rq.body, 0, sizeof (rq.body));
    }
    ep_request_clear (&rq);
    return 0;
cancelled:
    errno = ECANCELED;
    tier_errprintf (error, "%s: %s: cancelled", ep->url->display, what);
    return -1;
error:
    ep_request_clear (&rq);
    return -1;
}

static int s3_get (struct tier_endpoint *ep, int fd, uint64_t offset,
                   struct tier_endpoint_result *res, tier_error_t *error)
{
    return ep_get (ep, fd, offset, s3_prepare, 0, error);
}

static int s3_head (struct tier_endpoint *ep, struct tier_endpoint_info *info,
                    struct tier_endpoint_result *res, tier_error_t *error)
{
    return ep_head (ep, s3_prepare, info, error);
}

static int s3_remove (struct tier_endpoint *ep,
                      struct tier_endpoint_result *res, tier_error_t *error)
{
    return ep_delete (ep, s3_prepare, error);
}

/* "uploadId=ID" (encoded) into a buffer. */
static char *upload_query (const char *upload_id, unsigned int part)
{
    char *id = tier_sigv4_uri_encode (upload_id, strlen (upload_id), 0);
    struct tier_strbuf b = { 0 };

    if (!id)
        return NULL;
    if (part)
        tier_strbuf_printf (&b, "partNumber=%u&uploadId=%s", part, id);
    else
        tier_strbuf_printf (&b, "uploadId=%s", id);
    free (id);
    return tier_strbuf_finish (&b);
}

static int s3_abort (struct tier_endpoint *ep,
                     const struct tier_s3_upload *up,
                     struct tier_endpoint_result *res, tier_error_t *error)
{
    struct ep_request rq;
    char *query;
    CURLcode rc;
    int ret = -1;

    if (strcmp (up->url, ep->url->text) != 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: the upload state is for another "
                               "URL", ep->url->display);
    }
    if (!(query = upload_query (up->upload_id, 0))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    ep_request_init (&rq, "DELETE");
    if (s3_sign (ep, &rq, query, TIER_SIGV4_EMPTY_SHA256, NULL, error) < 0)
        goto out;
    rc = ep_perform (ep, &rq);
    if (rc == CURLE_OK && (rq.status == 204 || rq.status == 200)) {
        ret = 0;
        goto out;
    }
    if (rc == CURLE_OK && rq.status == 404) {
        char *code = ep_xml_value (rq.body.s, "Code");

        if (code && !strcmp (code, "NoSuchUpload")) {
            free (code);
            ret = 0;                    /* gone already */
            goto out;
        }
        free (code);
    }
    ep_fail (ep, &rq, rc, "AbortMultipartUpload", error);
    if (rc == CURLE_OK && (rq.status == 404 || rq.status == 405
                           || rq.status == 501 || rq.status == 400)) {
        /* s3rver: no route for DELETE ?uploadId */
        errno = ENOTSUP;
        tier_errprintf (error, "%s: the server does not support "
                        "AbortMultipartUpload (HTTP %ld)", ep->url->display,
                        rq.status);
    }
out:
    ep_request_clear (&rq);
    free (query);
    return ret;
}

static int notify_state (struct tier_endpoint *ep,
                         const struct tier_s3_upload *up,
                         tier_error_t *error)
{
    char *json;
    int rc;

    if (!ep->opts.state)
        return 0;
    if (!up)
        return ep->opts.state (NULL, ep->opts.state_arg);
    if (!(json = tier_s3_upload_dump (up))) {
        tier_errprintf (error, "%s: out of memory", ep->url->display);
        return -1;
    }
    errno = 0;
    rc = ep->opts.state (json, ep->opts.state_arg);
    free (json);
    if (rc < 0) {
        if (!errno)
            errno = ECANCELED;
        tier_errprintf (error, "%s: the upload state could not be kept: %s",
                        ep->url->display, strerror (errno));
    }
    return rc;
}

static int64_t mtime_ns (const struct stat *st)
{
    return (int64_t) st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int check_unchanged (struct tier_endpoint *ep, int fd,
                            const struct stat *before, tier_error_t *error)
{
    struct stat st;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: %s", ep->url->display,
                               strerror (errno));
    if (st.st_size != before->st_size || mtime_ns (&st) != mtime_ns (before)
        || st.st_ino != before->st_ino) {
        errno = ESTALE;
        return tier_errprintf (error, "%s: the file changed while it was "
                               "sent", ep->url->display);
    }
    return 0;
}

static int s3_create_upload (struct tier_endpoint *ep, uint64_t size,
                             const struct stat *st, uint64_t part_size,
                             struct tier_s3_upload **upp,
                             tier_error_t *error)
{
    struct tier_strbuf body = { 0 };
    char *id;

    if (s3_send (ep, "POST", "uploads", -1, 0, 0, "", 
                 "CreateMultipartUpload", NULL, 0, &body, error) < 0)
        return -1;
    if (!(id = ep_xml_value (body.s, "UploadId")) || !*id) {
        free (id);
        tier_strbuf_free (&body);
        errno = EPROTO;
        return tier_errprintf (error, "%s: CreateMultipartUpload: no "
                               "UploadId in the answer", ep->url->display);
    }
    tier_strbuf_free (&body);
    *upp = upload_create (ep->url->text, id, size, mtime_ns (st), part_size);
    free (id);
    if (!*upp)
        return tier_errprintf (error, "%s: out of memory", ep->url->display);
    return 0;
}

static int s3_complete (struct tier_endpoint *ep,
                        const struct tier_s3_upload *up, tier_error_t *error)
{
    struct tier_strbuf xml = { 0 }, body = { 0 };
    char *query;
    int rc;

    tier_strbuf_puts (&xml, "<CompleteMultipartUpload>");
    for (unsigned int i = 0; i < up->nparts; i++) {
        tier_strbuf_printf (&xml, "<Part><PartNumber>%u</PartNumber><ETag>",
                            i + 1);
        for (const char *p = up->etags[i]; *p; p++) {
            if (*p == '"')
                tier_strbuf_puts (&xml, "&quot;");
            else if (*p == '&')
                tier_strbuf_puts (&xml, "&amp;");
            else if (*p == '<')
                tier_strbuf_puts (&xml, "&lt;");
            else
                tier_strbuf_add (&xml, p, 1);
        }
        tier_strbuf_puts (&xml, "</ETag></Part>");
    }
    tier_strbuf_puts (&xml, "</CompleteMultipartUpload>");
    if (!tier_strbuf_finish (&xml)
        || !(query = upload_query (up->upload_id, 0))) {
        tier_strbuf_free (&xml);
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    rc = s3_send (ep, "POST", query, -1, 0, xml.len, xml.s,
                  "CompleteMultipartUpload", NULL, 0, &body, error);
    free (query);
    tier_strbuf_free (&xml);
    if (rc == 0) {
        char *etag = ep_xml_value (body.s, "ETag");

        if (etag)
            snprintf (ep->res->etag, sizeof (ep->res->etag), "%s", etag);
        free (etag);
    }
    tier_strbuf_free (&body);
    return rc;
}

/* The upload saved at opts.resume, if it is still this file's; one of
 * another file or version is aborted and dropped (NULL: start over).
 */
static struct tier_s3_upload *resume_upload (struct tier_endpoint *ep,
                                             const struct stat *st)
{
    struct tier_endpoint_result *res = ep->res;
    struct tier_s3_upload *up;
    tier_error_t e;

    up = tier_s3_upload_load (ep->opts.resume, &e);
    if (up
        && (strcmp (up->url, ep->url->text) != 0
            || up->size != (uint64_t) st->st_size
            || up->mtime_ns != mtime_ns (st))) {
        /* another file or version: start over, drop the old one */
        struct tier_endpoint_result ignored = *res;

        (void) s3_abort (ep, up, &ignored, &e);
        res->requests = ignored.requests;
        tier_s3_upload_destroy (up);
        up = NULL;
    }
    return up;
}

/* PUT part i of the upload (len bytes of fd at off); keep its ETag. */
static int upload_part (struct tier_endpoint *ep, int fd,
                        struct tier_s3_upload *up, unsigned int i, uint64_t off,
                        uint64_t len, tier_error_t *error)
{
    char what[64], etag[256];
    char *query;
    int rc;

    snprintf (what, sizeof (what), "UploadPart %u of %u", i + 1, up->nparts);
    if (!(query = upload_query (up->upload_id, i + 1))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    rc = s3_send (ep, "PUT", query, fd, off, len, NULL, what, etag,
                  sizeof (etag), NULL, error);
    free (query);
    if (rc < 0)
        return -1;
    if (!etag[0]) {
        errno = EPROTO;
        return tier_errprintf (error, "%s: %s: no ETag in the answer",
                               ep->url->display, what);
    }
    if (!(up->etags[i] = strdup (etag))) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    return 0;
}

/* After a failure, abort an upload that nobody can resume, so that its
 * parts are not left to be billed.  Keeps errno.
 */
static void abandon_upload (struct tier_endpoint *ep,
                            const struct tier_s3_upload *up)
{
    struct tier_endpoint_result *res = ep->res;
    struct tier_endpoint_result ignored = *res;
    tier_error_t e;
    int saved = errno;

    if (s3_abort (ep, up, &ignored, &e) == 0)
        res->aborted_upload = 1;
    res->requests = ignored.requests;
    errno = saved;
}

static int s3_multipart (struct tier_endpoint *ep, int fd,
                         const struct stat *st, tier_error_t *error)
{
    uint64_t size = (uint64_t) st->st_size;
    uint64_t part_size = tier_s3_part_size (size, ep->opts.part_size);
    struct tier_s3_upload *up = NULL;
    struct tier_endpoint_result *res = ep->res;
    int resumed = 0, kept = 0;

    if (!part_size) {
        errno = EFBIG;
        return tier_errprintf (error, "%s: %" PRIu64 " bytes is more than "
                               "an S3 object can hold (5 TiB)",
                               ep->url->display, size);
    }
    if (ep->opts.resume) {
        up = resume_upload (ep, st);
        resumed = up != NULL;
    }
restart:
    if (!up) {
        if (s3_create_upload (ep, size, st, part_size, &up, error) < 0)
            return -1;
        if (notify_state (ep, up, error) < 0) {
            kept = 1;
            goto error;
        }
    }
    res->parts = up->nparts;
    ep->total = size;
    ep->done = 0;
    for (unsigned int i = 0; i < up->nparts; i++) {
        uint64_t off = (uint64_t) i * up->part_size;
        uint64_t len = size - off < up->part_size ? size - off : up->part_size;

        if (up->etags[i]) {
            res->parts_resumed++;
            ep->done += len;
            ep_progress (ep, false);
            continue;
        }
        if (upload_part (ep, fd, up, i, off, len, error) < 0) {
            if (errno == ENOENT && resumed) {
                /* the server forgot the upload: start a new one */
                resumed = 0;
                res->parts_resumed = 0;
                tier_s3_upload_destroy (up);
                up = NULL;
                goto restart;
            }
            goto error;
        }
        if (notify_state (ep, up, error) < 0) {
            kept = 1;
            goto error;
        }
    }
    if (check_unchanged (ep, fd, st, error) < 0)
        goto error;
    if (s3_complete (ep, up, error) < 0)
        goto error;
    (void) notify_state (ep, NULL, error);
    tier_s3_upload_destroy (up);
    ep_progress (ep, true);
    return 0;
error:
    if (up && !kept && !ep->opts.state
        && !(ep->opts.flags & TIER_ENDPOINT_KEEP_UPLOAD))
        abandon_upload (ep, up);
    tier_s3_upload_destroy (up);
    return -1;
}

static int s3_put (struct tier_endpoint *ep, int fd,
                   struct tier_endpoint_result *res, tier_error_t *error)
{
    uint64_t threshold = ep->opts.multipart_threshold
                         ? ep->opts.multipart_threshold
                         : TIER_S3_DEFAULT_THRESHOLD;
    struct stat st;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: PUT: %s", ep->url->display,
                               strerror (errno));
    if (!S_ISREG (st.st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: PUT: the source is not a regular "
                               "file", ep->url->display);
    }
    res->size = (uint64_t) st.st_size;
    ep->total = res->size;
    if ((uint64_t) st.st_size > threshold || ep->opts.resume)
        return s3_multipart (ep, fd, &st, error);
    if ((uint64_t) st.st_size > TIER_S3_MAX_PART) {
        errno = EFBIG;
        return tier_errprintf (error, "%s: PUT: more than 5 GiB needs a "
                               "multipart upload", ep->url->display);
    }
    if (s3_send (ep, "PUT", NULL, fd, 0, (uint64_t) st.st_size, NULL, "PUT",
                 res->etag, sizeof (res->etag), NULL, error) < 0)
        return -1;
    if (check_unchanged (ep, fd, &st, error) < 0)
        return -1;
    ep_progress (ep, true);
    return 0;
}

const struct tier_backend_ops tier_s3_ops = {
    .name = "s3",
    .get = s3_get,
    .put = s3_put,
    .remove = s3_remove,
    .abort_upload = s3_abort,
    .head = s3_head,
};

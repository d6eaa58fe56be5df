/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint.c - endpoint URLs, the endpoint handle, and the libcurl request
 * engine the s3 and http back-ends share */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "sigv4.h"
#include "endpoint_int.h"
#include "endpoint.h"

/*
 * Prefix URLs.
 */

static int valid_child_name (const char *name)
{
    const char *p = name;

    if (!*name || *name == '/')
        return 0;
    while (*p) {
        size_t len = strcspn (p, "/");

        if (len == 0 || (len == 1 && p[0] == '.')
            || (len == 2 && p[0] == '.' && p[1] == '.'))
            return 0;
        p += len;
        if (*p == '/')
            p++;
    }
    for (p = name; *p; p++)
        if (iscntrl ((unsigned char) *p))
            return 0;
    return 1;
}

struct tier_url *tier_url_child (const struct tier_url *url,
                                 const char *name, tier_error_t *error)
{
    struct tier_strbuf b = { 0 };
    struct tier_url *child;
    char *enc = NULL;

    if (!tier_url_is_prefix (url)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: not a prefix (end it with '/')",
                        url->display);
        return NULL;
    }
    if (!name || !valid_child_name (name)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: '%s' is not a relative name",
                        url->display, name ? name : "(null)");
        return NULL;
    }
    if (url->scheme == TIER_URL_S3) {
        tier_strbuf_printf (&b, "s3://%s/%s%s", url->bucket, url->key, name);
    }
    else {
        if (!(enc = ep_path_encode (name))) {
            tier_errprintf (error, "out of memory");
            return NULL;
        }
        tier_strbuf_printf (&b, "%s://%s",
                            url->scheme == TIER_URL_HTTPS ? "https" : "http",
                            url->host);
        if (url->port)
            tier_strbuf_printf (&b, ":%d", url->port);
        tier_strbuf_printf (&b, "%s%s", url->path, enc);
        free (enc);
    }
    if (!tier_strbuf_finish (&b)) {
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    child = tier_url_parse (b.s, error);
    tier_strbuf_free (&b);
    return child;
}

/*
 * Small helpers.
 */

char *ep_path_encode (const char *path)
{
    return tier_sigv4_uri_encode (path, strlen (path), 1);
}

void ep_random_name (char *buf, size_t n)
{
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char rnd[64];

    if (n > sizeof (rnd))
        n = sizeof (rnd);
    if (getrandom (rnd, n, 0) != (ssize_t) n) {
        struct timespec ts;

        clock_gettime (CLOCK_REALTIME, &ts);
        for (size_t i = 0; i < n; i++)
            rnd[i] = (unsigned char) ((ts.tv_nsec >> (i % 24))
                                      ^ getpid () ^ (long) i * 131);
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = chars[rnd[i] % (sizeof (chars) - 1)];
    buf[n] = '\0';
}

char *ep_xml_value (const char *xml, const char *tag)
{
    char open[64], close[64];
    const char *start, *end;
    struct tier_strbuf b = { 0 };

    snprintf (open, sizeof (open), "<%s>", tag);
    snprintf (close, sizeof (close), "</%s>", tag);
    if (!xml || !(start = strstr (xml, open))
        || !(end = strstr (start += strlen (open), close))) {
        errno = ENOENT;
        return NULL;
    }
    while (start < end) {
        static const struct {
            const char *ent;
            char c;
        } ents[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
                     { "&quot;", '"' }, { "&apos;", '\'' },
                     { "&#34;", '"' }, { "&#39;", '\'' } };
        size_t i;

        if (*start == '&') {
            for (i = 0; i < sizeof (ents) / sizeof (ents[0]); i++) {
                size_t len = strlen (ents[i].ent);

                if ((size_t) (end - start) >= len
                    && !strncmp (start, ents[i].ent, len)) {
                    tier_strbuf_add (&b, &ents[i].c, 1);
                    start += len;
                    break;
                }
            }
            if (i < sizeof (ents) / sizeof (ents[0]))
                continue;
        }
        tier_strbuf_add (&b, start++, 1);
    }
    return tier_strbuf_finish (&b);
}

/*
 * The handle.
 */

const struct tier_backend_ops *tier_backend_ops_find (
    enum tier_url_scheme scheme)
{
    switch (scheme) {
        case TIER_URL_S3:
            return &tier_s3_ops;
        case TIER_URL_HTTP:
        case TIER_URL_HTTPS:
            return &tier_http_ops;
    }
    return NULL;
}

int tier_endpoint_init (tier_error_t *error)
{
    CURLcode rc = curl_global_init (CURL_GLOBAL_DEFAULT);

    if (rc != CURLE_OK) {
        errno = EIO;
        return tier_errprintf (error, "curl_global_init: %s",
                               curl_easy_strerror (rc));
    }
    return 0;
}

void tier_endpoint_fini (void)
{
    curl_global_cleanup ();
}

void tier_endpoint_destroy (struct tier_endpoint *ep)
{
    if (ep) {
        int saved = errno;

        if (ep->curl)
            curl_easy_cleanup (ep->curl);
        tier_url_destroy (ep->url);
        free (ep->s3_base);
        free (ep->s3_host);
        free (ep->s3_prefix);
        free (ep);
        errno = saved;
    }
}

static struct tier_url *url_copy (const struct tier_url *url,
                                  tier_error_t *error)
{
    return tier_url_parse (url->text, error);
}

struct tier_endpoint *tier_endpoint_create (
    const struct tier_url *url, const struct tier_endpoint_opts *opts,
    tier_error_t *error)
{
    struct tier_endpoint *ep;

    if (!url) {
        errno = EINVAL;
        tier_errprintf (error, "no URL");
        return NULL;
    }
    if (!(ep = calloc (1, sizeof (*ep)))) {
        tier_errprintf (error, "out of memory");
        return NULL;
    }
    if (opts)
        ep->opts = *opts;
    if (!(ep->url = url_copy (url, error)))
        goto error;
    ep->ops = tier_backend_ops_find (url->scheme);
    if (tier_url_is_prefix (url)) {
        errno = EINVAL;
        tier_errprintf (error, "%s: names a prefix, not an object",
                        url->display);
        goto error;
    }
    if (!(ep->curl = curl_easy_init ())) {
        errno = EIO;
        tier_errprintf (error, "%s: curl_easy_init failed", url->display);
        goto error;
    }
    ep->http_only = url->scheme == TIER_URL_HTTP;
    if (url->scheme == TIER_URL_S3 && s3_setup (ep, error) < 0)
        goto error;
    return ep;
error:
    tier_endpoint_destroy (ep);
    return NULL;
}

static void call_begin (struct tier_endpoint *ep,
                        struct tier_endpoint_result *res,
                        struct tier_endpoint_result *local)
{
    ep->res = res ? res : local;
    memset (ep->res, 0, sizeof (*ep->res));
    ep->done = ep->total = ep->reported = 0;
}

int tier_endpoint_get (struct tier_endpoint *ep, int fd, uint64_t offset,
                       struct tier_endpoint_result *res, tier_error_t *error)
{
    struct tier_endpoint_result local;

    call_begin (ep, res, &local);
    if (fd < 0) {
        errno = EBADF;
        return tier_errprintf (error, "%s: GET: bad file descriptor",
                               ep->url->display);
    }
    return ep->ops->get (ep, fd, offset, ep->res, error);
}

int tier_endpoint_put (struct tier_endpoint *ep, int fd,
                       struct tier_endpoint_result *res, tier_error_t *error)
{
    struct tier_endpoint_result local;

    call_begin (ep, res, &local);
    if (fd < 0) {
        errno = EBADF;
        return tier_errprintf (error, "%s: PUT: bad file descriptor",
                               ep->url->display);
    }
    return ep->ops->put (ep, fd, ep->res, error);
}

int tier_endpoint_remove (struct tier_endpoint *ep,
                          struct tier_endpoint_result *res,
                          tier_error_t *error)
{
    struct tier_endpoint_result local;

    call_begin (ep, res, &local);
    return ep->ops->remove (ep, ep->res, error);
}

int tier_endpoint_head (struct tier_endpoint *ep,
                        struct tier_endpoint_info *info,
                        struct tier_endpoint_result *res,
                        tier_error_t *error)
{
    struct tier_endpoint_result local;

    call_begin (ep, res, &local);
    memset (info, 0, sizeof (*info));
    return ep->ops->head (ep, info, ep->res, error);
}

int tier_endpoint_abort_upload (struct tier_endpoint *ep, const char *json,
                                struct tier_endpoint_result *res,
                                tier_error_t *error)
{
    struct tier_endpoint_result local;
    struct tier_s3_upload *up;
    int rc;

    call_begin (ep, res, &local);
    if (!ep->ops->abort_upload) {
        errno = ENOTSUP;
        return tier_errprintf (error, "%s: %s endpoints have no multipart "
                               "uploads", ep->url->display, ep->ops->name);
    }
    if (!(up = tier_s3_upload_load (json, error)))
        return -1;
    rc = ep->ops->abort_upload (ep, up, ep->res, error);
    tier_s3_upload_destroy (up);
    return rc;
}

/*
 * Requests.
 */

void ep_request_init (struct ep_request *rq, const char *method)
{
    memset (rq, 0, sizeof (*rq));
    rq->method = method;
    rq->in_fd = -1;
    rq->out_fd = -1;
    rq->content_length = -1;
}

void ep_request_clear (struct ep_request *rq)
{
    int saved = errno;

    tier_strbuf_free (&rq->body);
    free (rq->url);
    rq->url = NULL;
    curl_slist_free_all (rq->headers);
    rq->headers = NULL;
    errno = saved;
}

bool ep_request_header (struct ep_request *rq, const char *line)
{
    struct curl_slist *l = curl_slist_append (rq->headers, line);

    if (!l)
        return false;
    rq->headers = l;
    return true;
}

bool ep_cancelled (const struct tier_endpoint *ep)
{
    return ep->opts.cancel && atomic_load (ep->opts.cancel);
}

void ep_progress (struct tier_endpoint *ep, bool force)
{
    if (!ep->opts.progress)
        return;
    if (force || ep->done - ep->reported >= (1u << 20)
        || ep->done < ep->reported) {
        ep->reported = ep->done;
        ep->opts.progress (ep->done, ep->total, ep->opts.progress_arg);
    }
}

struct ep_cb {
    struct tier_endpoint *ep;
    struct ep_request *rq;
};

static void stop (struct ep_request *rq, int errnum, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static void stop (struct ep_request *rq, int errnum, const char *fmt, ...)
{
    va_list ap;

    if (rq->stop_errno)
        return;
    rq->stop_errno = errnum;
    va_start (ap, fmt);
    vsnprintf (rq->stop_text, sizeof (rq->stop_text), fmt, ap);
    va_end (ap);
}

/* Wait for the bandwidth limit; false (and the transfer stops) when
 * cancelled. */
static bool throttle (struct ep_cb *cb, size_t n)
{
    if (ep_cancelled (cb->ep)) {
        stop (cb->rq, ECANCELED, "cancelled");
        return false;
    }
    if (cb->ep->opts.limit
        && tier_copy_limit_take (cb->ep->opts.limit, n,
                                 cb->ep->opts.cancel) < 0) {
        stop (cb->rq, ECANCELED, "cancelled");
        return false;
    }
    return true;
}

static size_t read_cb (char *buf, size_t size, size_t nitems, void *arg)
{
    struct ep_cb *cb = arg;
    struct ep_request *rq = cb->rq;
    size_t want = size * nitems;
    uint64_t left;
    ssize_t n;

    if (rq->in_mem) {
        left = rq->in_mem_len - rq->in_pos;
        if (want > left)
            want = (size_t) left;
        memcpy (buf, rq->in_mem + rq->in_pos, want);
        rq->in_pos += want;
        return want;
    }
    left = rq->in_len - rq->in_pos;
    if (want > left)
        want = (size_t) left;
    if (want == 0)
        return 0;
    if (!throttle (cb, want))
        return CURL_READFUNC_ABORT;
    do {
        n = pread (rq->in_fd, buf, want, (off_t) (rq->in_off + rq->in_pos));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        stop (rq, errno, "read: %s", strerror (errno));
        return CURL_READFUNC_ABORT;
    }
    if (n == 0) {
        stop (rq, ESTALE, "the file shrank while it was sent");
        return CURL_READFUNC_ABORT;
    }
    rq->in_pos += (uint64_t) n;
    cb->ep->done += (uint64_t) n;
    cb->ep->res->bytes += (uint64_t) n;
    ep_progress (cb->ep, false);
    return (size_t) n;
}

static int seek_cb (void *arg, curl_off_t offset, int origin)
{
    struct ep_cb *cb = arg;
    struct ep_request *rq = cb->rq;
    uint64_t len = rq->in_mem ? rq->in_mem_len : rq->in_len;

    if (origin != SEEK_SET || offset < 0 || (uint64_t) offset > len)
        return CURL_SEEKFUNC_CANTSEEK;
    if (!rq->in_mem) {
        cb->ep->done -= rq->in_pos - (uint64_t) offset;
        cb->ep->res->bytes -= rq->in_pos - (uint64_t) offset;
    }
    rq->in_pos = (uint64_t) offset;
    return CURL_SEEKFUNC_OK;
}

static bool status_ok_for_data (const struct ep_request *rq)
{
    return rq->status == 200 || rq->status == 206;
}

/* "bytes START-END/TOTAL": START, or -1. */
static int64_t range_start (const char *cr)
{
    unsigned long long start;

    if (sscanf (cr, "bytes %llu-", &start) != 1)
        return -1;
    return (int64_t) start;
}

static size_t write_cb (char *data, size_t size, size_t nmemb, void *arg)
{
    struct ep_cb *cb = arg;
    struct ep_request *rq = cb->rq;
    struct tier_endpoint *ep = cb->ep;
    size_t len = size * nmemb, done = 0;

    if (!rq->out_checked) {
        rq->out_checked = true;
        curl_easy_getinfo (ep->curl, CURLINFO_RESPONSE_CODE, &rq->status);
        if (rq->out_fd >= 0 && status_ok_for_data (rq)) {
            if (rq->status == 206) {
                if (range_start (rq->content_range)
                    != (int64_t) rq->out_start) {
                    stop (rq, EPROTO, "the server sent another range "
                          "(%s) than asked for", rq->content_range);
                    return 0;
                }
            }
            else if (rq->out_start > 0) {
                /* The whole object, not the rest: start over. */
                if (!rq->out_seekable) {
                    stop (rq, EPROTO, "the server ignored Range");
                    return 0;
                }
                ep->done -= rq->out_off;
                rq->out_off = 0;
                rq->out_restarted = true;
            }
            if (rq->content_length >= 0)
                ep->total = rq->out_off + (uint64_t) rq->content_length;
        }
    }
    if (rq->out_fd < 0 || !status_ok_for_data (rq)) {
        if (rq->body.len + len <= EP_BODY_MAX)
            tier_strbuf_add (&rq->body, data, len);
        else if (rq->out_fd < 0 && rq->status < 300) {
            stop (rq, EPROTO, "the response is longer than %u bytes",
                  EP_BODY_MAX);
            return 0;
        }
        return len;
    }
    if (!throttle (cb, len))
        return 0;
    while (done < len) {
        ssize_t n = rq->out_seekable
                    ? pwrite (rq->out_fd, data + done, len - done,
                              (off_t) rq->out_off)
                    : write (rq->out_fd, data + done, len - done);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            stop (rq, errno, "write: %s", strerror (errno));
            return 0;
        }
        done += (size_t) n;
        rq->out_off += (uint64_t) n;
    }
    ep->done += len;
    ep->res->bytes += len;
    ep_progress (ep, false);
    return len;
}

static size_t header_cb (char *data, size_t size, size_t nitems, void *arg)
{
    struct ep_cb *cb = arg;
    struct ep_request *rq = cb->rq;
    size_t len = size * nitems;
    const char *colon;
    size_t nlen, vlen;
    const char *v;

    if (len >= 5 && !strncmp (data, "HTTP/", 5)) {
        /* a new response (after 100 Continue or a redirect) */
        rq->etag[0] = '\0';
        rq->content_range[0] = '\0';
        rq->content_length = -1;
        return len;
    }
    if (!(colon = memchr (data, ':', len)))
        return len;
    nlen = (size_t) (colon - data);
    v = colon + 1;
    while (v < data + len && (*v == ' ' || *v == '\t'))
        v++;
    vlen = (size_t) (data + len - v);
    while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'
                        || v[vlen - 1] == ' '))
        vlen--;
    if (nlen == 4 && !strncasecmp (data, "etag", 4)) {
        if (vlen < sizeof (rq->etag)) {
            memcpy (rq->etag, v, vlen);
            rq->etag[vlen] = '\0';
        }
    }
    else if (nlen == 13 && !strncasecmp (data, "content-range", 13)) {
        if (vlen < sizeof (rq->content_range)) {
            memcpy (rq->content_range, v, vlen);
            rq->content_range[vlen] = '\0';
        }
    }
    else if (nlen == 14 && !strncasecmp (data, "content-length", 14)) {
        char tmp[32];

        if (vlen < sizeof (tmp)) {
            memcpy (tmp, v, vlen);
            tmp[vlen] = '\0';
            rq->content_length = strtoll (tmp, NULL, 10);
        }
    }
    return len;
}

static int xferinfo_cb (void *arg, curl_off_t dltotal, curl_off_t dlnow,
                        curl_off_t ultotal, curl_off_t ulnow)
{
    struct ep_cb *cb = arg;

    if (ep_cancelled (cb->ep)) {
        stop (cb->rq, ECANCELED, "cancelled");
        return 1;
    }
    return 0;
}

#define SETOPT(h, opt, val) \
    do { \
        if ((rc = curl_easy_setopt ((h), (opt), (val))) != CURLE_OK) \
            goto out; \
    } while (0)

CURLcode ep_perform (struct tier_endpoint *ep, struct ep_request *rq)
{
    CURL *h = ep->curl;
    struct ep_cb cb = { .ep = ep, .rq = rq };
    long connect_ms = ep->opts.connect_timeout_ms > 0
                      ? ep->opts.connect_timeout_ms : 30000;
    long stall = ep->opts.stall_timeout_s > 0 ? ep->opts.stall_timeout_s
                                              : 60;
    CURLcode rc;

    curl_easy_reset (h);
    ep->errbuf[0] = '\0';
    rq->status = 0;
    rq->stop_errno = 0;
    rq->out_checked = false;
    ep->res->requests++;
    SETOPT (h, CURLOPT_ERRORBUFFER, ep->errbuf);
    SETOPT (h, CURLOPT_NOSIGNAL, 1L);
    SETOPT (h, CURLOPT_URL, rq->url);
    SETOPT (h, CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT (h, CURLOPT_USERAGENT, "tier/" PACKAGE_VERSION);
    SETOPT (h, CURLOPT_SSL_VERIFYPEER, 1L);
    SETOPT (h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (ep->opts.ca_file)
        SETOPT (h, CURLOPT_CAINFO, ep->opts.ca_file);
    SETOPT (h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    SETOPT (h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    SETOPT (h, CURLOPT_LOW_SPEED_TIME, stall);
    if (ep->opts.timeout_s > 0)
        SETOPT (h, CURLOPT_TIMEOUT, ep->opts.timeout_s);
    SETOPT (h, CURLOPT_TCP_KEEPALIVE, 1L);
    if (rq->follow) {
        SETOPT (h, CURLOPT_FOLLOWLOCATION, 1L);
        SETOPT (h, CURLOPT_MAXREDIRS, 5L);
        SETOPT (h, CURLOPT_REDIR_PROTOCOLS_STR,
                ep->url->scheme == TIER_URL_HTTP ? "http,https" : "https");
    }
    SETOPT (h, CURLOPT_HTTPHEADER, rq->headers);
    SETOPT (h, CURLOPT_HEADERFUNCTION, header_cb);
    SETOPT (h, CURLOPT_HEADERDATA, &cb);
    SETOPT (h, CURLOPT_WRITEFUNCTION, write_cb);
    SETOPT (h, CURLOPT_WRITEDATA, &cb);
    SETOPT (h, CURLOPT_NOPROGRESS, 0L);
    SETOPT (h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    SETOPT (h, CURLOPT_XFERINFODATA, &cb);

    if (!strcmp (rq->method, "PUT")) {
        uint64_t len = rq->in_mem ? rq->in_mem_len : rq->in_len;

        SETOPT (h, CURLOPT_UPLOAD, 1L);
        SETOPT (h, CURLOPT_INFILESIZE_LARGE, (curl_off_t) len);
    }
    else if (!strcmp (rq->method, "POST")) {
        uint64_t len = rq->in_mem ? rq->in_mem_len : rq->in_len;

        SETOPT (h, CURLOPT_POST, 1L);
        SETOPT (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
    }
    else if (!strcmp (rq->method, "HEAD"))
        SETOPT (h, CURLOPT_NOBODY, 1L);
    else if (strcmp (rq->method, "GET") != 0)
        SETOPT (h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (rq->in_mem || rq->in_fd >= 0) {
        rq->in_pos = 0;
        SETOPT (h, CURLOPT_READFUNCTION, read_cb);
        SETOPT (h, CURLOPT_READDATA, &cb);
        SETOPT (h, CURLOPT_SEEKFUNCTION, seek_cb);
        SETOPT (h, CURLOPT_SEEKDATA, &cb);
    }
    rc = curl_easy_perform (h);
    if (rc == CURLE_OK || !rq->status) {
        long status = 0;

        if (curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status)
            == CURLE_OK && status)
            rq->status = status;
    }
    ep->res->http_status = (int) rq->status;
out:
    return rc;
}

bool ep_transient (CURLcode rc, const struct ep_request *rq)
{
    if (rq->stop_errno)
        return false;                   /* our own reason to stop */
    switch (rc) {
        case CURLE_OK:
            switch (rq->status) {
                case 408:
                case 429:
                case 500:
                case 502:
                case 503:
                case 504:
                    return true;
                default:
                    return false;
            }
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_HTTP3:
            return true;
        default:
            return false;
    }
}

int ep_retries (const struct tier_endpoint *ep)
{
    if (ep->opts.retries < 0)
        return 0;
    return ep->opts.retries ? ep->opts.retries : 4;
}

int ep_backoff (struct tier_endpoint *ep, int attempt)
{
    long base = ep->opts.retry_delay_ms > 0 ? ep->opts.retry_delay_ms : 500;
    long delay = base;
    unsigned int r = 0;
    struct timespec ts = { 0, 50 * 1000000L };

    for (int i = 0; i < attempt && delay < 30000; i++)
        delay *= 2;
    if (delay > 30000)
        delay = 30000;
    if (getrandom (&r, sizeof (r), 0) != sizeof (r))
        r = (unsigned int) getpid ();
    delay = delay / 2 + (long) (r % (unsigned int) (delay / 2 + 1));
    ep->res->retries++;
    for (long waited = 0; waited < delay; waited += 50) {
        if (ep_cancelled (ep)) {
            errno = ECANCELED;
            return -1;
        }
        nanosleep (&ts, NULL);
    }
    if (ep_cancelled (ep)) {
        errno = ECANCELED;
        return -1;
    }
    return 0;
}

static int status_errno (long status)
{
    switch (status) {
        case 401:
        case 403:
            return EACCES;
        case 404:
        case 410:
            return ENOENT;
        case 405:
        case 501:
            return ENOTSUP;
        case 409:
            return EEXIST;
        case 412:
            return ESTALE;
        case 413:
            return EFBIG;
        case 507:
            return ENOSPC;
        case 408:
        case 504:
            return ETIMEDOUT;
        default:
            return EIO;
    }
}

static int curl_errno (CURLcode rc)
{
    switch (rc) {
        case CURLE_OPERATION_TIMEDOUT:
            return ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
            return ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
            return EHOSTUNREACH;
        case CURLE_ABORTED_BY_CALLBACK:
            return ECANCELED;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
            return EACCES;
        case CURLE_OUT_OF_MEMORY:
            return ENOMEM;
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_UNSUPPORTED_PROTOCOL:
            return EPROTO;
        default:
            return EIO;
    }
}

int ep_fail (struct tier_endpoint *ep, const struct ep_request *rq,
             CURLcode rc, const char *what, tier_error_t *error)
{
    const char *shown = ep->url->display;

    if (rq->stop_errno) {
        errno = rq->stop_errno;
        return tier_errprintf (error, "%s: %s: %s", shown, what,
                               rq->stop_text);
    }
    if (rc != CURLE_OK) {
        const char *hint = "";

        if (rc == CURLE_PEER_FAILED_VERIFICATION
            || rc == CURLE_SSL_CACERT_BADFILE)
            hint = ep->opts.ca_file ? " (TLS: is the CA file right?)"
                                    : " (TLS: set a CA file?)";
        errno = curl_errno (rc);
        return tier_errprintf (error, "%s: %s: %s%s%s%s", shown, what,
                               curl_easy_strerror (rc),
                               ep->errbuf[0] ? ": " : "", ep->errbuf,
                               hint);
    }
    {
        char *code = ep_xml_value (rq->body.s, "Code");
        char *msg = ep_xml_value (rq->body.s, "Message");
        int err = status_errno (rq->status);

        if (code && !strcmp (code, "NoSuchUpload"))
            err = ENOENT;
        tier_errprintf (error, "%s: %s: HTTP %ld%s%s%s%s%s", shown, what,
                        rq->status, code ? " " : "", code ? code : "",
                        msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
        free (code);
        free (msg);
        errno = err;
        return -1;
    }
}

/*
 * GET and DELETE, shared by the back-ends.
 */

/* "bytes START-END/TOTAL": TOTAL, or -1. */
static int64_t range_total (const char *cr)
{
    const char *slash = strchr (cr, '/');

    if (!slash || !isdigit ((unsigned char) slash[1]))
        return -1;
    return strtoll (slash + 1, NULL, 10);
}

int ep_get (struct tier_endpoint *ep, int fd, uint64_t offset,
            ep_prepare_f prepare, int follow, tier_error_t *error)
{
    struct ep_request rq;
    struct stat st;
    bool seekable;
    uint64_t pos = offset;
    char etag[256] = "";
    int restarts = 0;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: GET: %s", ep->url->display,
                               strerror (errno));
    seekable = S_ISREG (st.st_mode);
    if (!seekable && offset > 0) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: GET: cannot resume into a "
                               "descriptor that is not a regular file",
                               ep->url->display);
    }
    ep->done = offset;
    for (int attempt = 0;; attempt++) {
        char line[300];
        CURLcode rc;

        ep_request_init (&rq, "GET");
        rq.follow = follow;
        if (prepare (ep, &rq, error) < 0)
            goto error;
        if (pos > 0) {
            snprintf (line, sizeof (line), "Range: bytes=%" PRIu64 "-", pos);
            if (!ep_request_header (&rq, line))
                goto nomem;
            if (etag[0]) {
                snprintf (line, sizeof (line), "If-Range: %s", etag);
                if (!ep_request_header (&rq, line))
                    goto nomem;
            }
        }
        rq.out_fd = fd;
        rq.out_seekable = seekable;
        rq.out_off = rq.out_start = pos;
        rc = ep_perform (ep, &rq);
        if (rq.out_checked && status_ok_for_data (&rq))
            pos = rq.out_off;
        if (rq.etag[0] && status_ok_for_data (&rq))
            snprintf (etag, sizeof (etag), "%s", rq.etag);
        if (rc == CURLE_OK && status_ok_for_data (&rq)) {
            int64_t total = range_total (rq.content_range);

            if (rq.status == 206 && total >= 0 && (uint64_t) total != pos) {
                errno = EPROTO;
                tier_errprintf (error, "%s: GET: the object has %" PRId64
                                " bytes, %" PRIu64 " arrived",
                                ep->url->display, total, pos);
                goto error;
            }
            break;
        }
        if (rc == CURLE_OK && rq.status == 416 && pos > 0
            && restarts++ < 2) {
            /* what we hold does not fit the object (it changed or is
             * complete): fetch it whole */
            pos = 0;
            ep->done = 0;
            etag[0] = '\0';
            ep_request_clear (&rq);
            continue;
        }
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)
            && (seekable || pos == 0)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0) {
                tier_errprintf (error, "%s: GET: cancelled",
                                ep->url->display);
                return -1;
            }
            continue;
        }
        ep_fail (ep, &rq, rc, "GET", error);
        goto error;
    }
    ep_request_clear (&rq);
    if (seekable && ftruncate (fd, (off_t) pos) < 0)
        return tier_errprintf (error, "%s: GET: truncate: %s",
                               ep->url->display, strerror (errno));
    ep->res->size = pos;
    ep->total = pos;
    ep_progress (ep, true);
    return 0;
nomem:
    errno = ENOMEM;
    tier_errprintf (error, "%s: GET: out of memory", ep->url->display);
error:
    ep_request_clear (&rq);
    return -1;
}

int ep_head (struct tier_endpoint *ep, ep_prepare_f prepare,
             struct tier_endpoint_info *info, tier_error_t *error)
{
    struct ep_request rq;

    for (int attempt = 0;; attempt++) {
        CURLcode rc;

        ep_request_init (&rq, "HEAD");
        if (prepare (ep, &rq, error) < 0)
            goto error;
        rc = ep_perform (ep, &rq);
        if (rc == CURLE_OK && rq.status >= 200 && rq.status < 300) {
            info->exists = 1;
            info->size = rq.content_length > 0
                         ? (uint64_t) rq.content_length : 0;
            snprintf (info->etag, sizeof (info->etag), "%s", rq.etag);
            break;
        }
        if (rc == CURLE_OK && (rq.status == 404 || rq.status == 410)) {
            info->exists = 0;
            break;
        }
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0)
                return tier_errprintf (error, "%s: HEAD: cancelled",
                                       ep->url->display);
            continue;
        }
        ep_fail (ep, &rq, rc, "HEAD", error);
        if (rc == CURLE_OK && (rq.status == 401 || rq.status == 403)) {
            /* a HEAD answer has no body to say why */
            int saved = errno;

            tier_errprintf (error, "%s: HEAD: HTTP %ld (access denied; "
                            "the answer to HEAD gives no reason: are the "
                            "credentials right?)", ep->url->display,
                            rq.status);
            errno = saved;
        }
        goto error;
    }
    ep_request_clear (&rq);
    return 0;
error:
    ep_request_clear (&rq);
    return -1;
}

int ep_delete (struct tier_endpoint *ep, ep_prepare_f prepare,
               tier_error_t *error)
{
    struct ep_request rq;

    for (int attempt = 0;; attempt++) {
        CURLcode rc;

        ep_request_init (&rq, "DELETE");
        if (prepare (ep, &rq, error) < 0)
            goto error;
        rc = ep_perform (ep, &rq);
        if (rc == CURLE_OK && (rq.status == 200 || rq.status == 202
                               || rq.status == 204 || rq.status == 404))
            break;
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0)
                return tier_errprintf (error, "%s: DELETE: cancelled",
                                       ep->url->display);
            continue;
        }
        ep_fail (ep, &rq, rc, "DELETE", error);
        goto error;
    }
    ep_request_clear (&rq);
    return 0;
error:
    ep_request_clear (&rq);
    return -1;
}

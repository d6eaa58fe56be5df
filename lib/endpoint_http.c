/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint_http.c - the http(s) back-end: GET, HEAD, WebDAV PUT + MOVE
 * (atomic) or plain PUT (not atomic), DELETE */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "endpoint_int.h"
#include "endpoint.h"

#define TEMP_RANDLEN 10

/* scheme://host[:port] */
static char *origin (const struct tier_url *u)
{
    struct tier_strbuf b = { 0 };

    tier_strbuf_printf (&b, "%s://%s",
                        u->scheme == TIER_URL_HTTPS ? "https" : "http",
                        u->host);
    if (u->port)
        tier_strbuf_printf (&b, ":%d", u->port);
    return tier_strbuf_finish (&b);
}

static int fixed_headers (struct ep_request *rq)
{
    return ep_request_header (rq, "Expect:") ? 0 : -1;
}

static int http_prepare (struct tier_endpoint *ep, struct ep_request *rq,
                         tier_error_t *error)
{
    if (!(rq->url = strdup (ep->url->text)) || fixed_headers (rq) < 0) {
        errno = ENOMEM;
        return tier_errprintf (error, "out of memory");
    }
    return 0;
}

static int http_get (struct tier_endpoint *ep, int fd, uint64_t offset,
                     struct tier_endpoint_result *res, tier_error_t *error)
{
    return ep_get (ep, fd, offset, http_prepare, 1, error);
}

static int http_head (struct tier_endpoint *ep,
                      struct tier_endpoint_info *info,
                      struct tier_endpoint_result *res, tier_error_t *error)
{
    return ep_head (ep, http_prepare, info, error);
}

static int http_remove (struct tier_endpoint *ep,
                        struct tier_endpoint_result *res,
                        tier_error_t *error)
{
    return ep_delete (ep, http_prepare, error);
}

/* One request without a body to url, with extra headers; retried.
 * ok_status lists the statuses that mean success (0-terminated). */
static int simple_request (struct tier_endpoint *ep, const char *method,
                           const char *url, const char *const *headers,
                           const long *ok_status, const char *what,
                           tier_error_t *error)
{
    struct ep_request rq;

    for (int attempt = 0;; attempt++) {
        CURLcode rc;
        bool ok = false;

        ep_request_init (&rq, method);
        if (!(rq.url = strdup (url)) || fixed_headers (&rq) < 0)
            goto nomem;
        for (size_t i = 0; headers && headers[i]; i++)
            if (!ep_request_header (&rq, headers[i]))
                goto nomem;
        rc = ep_perform (ep, &rq);
        for (size_t i = 0; rc == CURLE_OK && ok_status[i]; i++)
            if (rq.status == ok_status[i])
                ok = true;
        if (ok)
            break;
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0) {
                tier_errprintf (error, "%s: %s: cancelled",
                                ep->url->display, what);
                return -1;
            }
            continue;
        }
        ep_fail (ep, &rq, rc, what, error);
        if (rc == CURLE_OK && (rq.status == 405 || rq.status == 501)) {
            errno = ENOTSUP;
            tier_errprintf (error, "%s: %s: the server does not support it "
                            "(HTTP %ld)%s", ep->url->display, what,
                            rq.status, !strcmp (method, "MOVE")
                            ? "; without WebDAV use a plain PUT, which is "
                              "not atomic" : "");
        }
        ep_request_clear (&rq);
        return -1;
    }
    ep_request_clear (&rq);
    return 0;
nomem:
    ep_request_clear (&rq);
    errno = ENOMEM;
    return tier_errprintf (error, "out of memory");
}

/* PUT the file's content to url; retried from the start. */
static int put_file (struct tier_endpoint *ep, const char *url, int fd,
                     uint64_t size, tier_error_t *error)
{
    static const long ok[] = { 200, 201, 204, 0 };
    struct ep_request rq;

    for (int attempt = 0;; attempt++) {
        CURLcode rc;
        bool good = false;

        ep_request_init (&rq, "PUT");
        if (!(rq.url = strdup (url)) || fixed_headers (&rq) < 0) {
            ep_request_clear (&rq);
            errno = ENOMEM;
            return tier_errprintf (error, "out of memory");
        }
        rq.in_fd = fd;
        rq.in_len = size;
        ep->done = 0;
        rc = ep_perform (ep, &rq);
        for (size_t i = 0; rc == CURLE_OK && ok[i]; i++)
            if (rq.status == ok[i])
                good = true;
        if (good)
            break;
        if (ep_transient (rc, &rq) && attempt < ep_retries (ep)) {
            ep_request_clear (&rq);
            if (ep_backoff (ep, attempt) < 0) {
                tier_errprintf (error, "%s: PUT: cancelled",
                                ep->url->display);
                return -1;
            }
            continue;
        }
        ep_fail (ep, &rq, rc, "PUT", error);
        if (rc == CURLE_OK && rq.status == 409)
            tier_errprintf (error, "%s: PUT: HTTP 409 (does the parent "
                            "collection exist?)", ep->url->display);
        ep_request_clear (&rq);
        return -1;
    }
    ep_request_clear (&rq);
    return 0;
}

static int unchanged (struct tier_endpoint *ep, int fd,
                      const struct stat *before, tier_error_t *error)
{
    struct stat st;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: %s", ep->url->display,
                               strerror (errno));
    if (st.st_size != before->st_size
        || st.st_mtim.tv_sec != before->st_mtim.tv_sec
        || st.st_mtim.tv_nsec != before->st_mtim.tv_nsec
        || st.st_ino != before->st_ino) {
        errno = ESTALE;
        return tier_errprintf (error, "%s: the file changed while it was "
                               "sent", ep->url->display);
    }
    return 0;
}

static int http_put (struct tier_endpoint *ep, int fd,
                     struct tier_endpoint_result *res, tier_error_t *error)
{
    static const long move_ok[] = { 201, 204, 0 };
    static const long del_ok[] = { 200, 202, 204, 404, 0 };
    const struct tier_url *u = ep->url;
    struct tier_strbuf temp = { 0 }, dest = { 0 };
    char rnd[TEMP_RANDLEN + 1];
    const char *slash, *name;
    char *org = NULL;
    struct stat st;
    int rc = -1;

    if (fstat (fd, &st) < 0)
        return tier_errprintf (error, "%s: PUT: %s", u->display,
                               strerror (errno));
    if (!S_ISREG (st.st_mode)) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: PUT: the source is not a regular "
                               "file", u->display);
    }
    res->size = (uint64_t) st.st_size;
    ep->total = res->size;
    if (ep->opts.flags & TIER_ENDPOINT_PLAIN_PUT) {
        if (put_file (ep, u->text, fd, res->size, error) < 0
            || unchanged (ep, fd, &st, error) < 0)
            return -1;
        ep_progress (ep, true);
        return 0;
    }
    if (u->query) {
        errno = EINVAL;
        return tier_errprintf (error, "%s: a URL with a query cannot be "
                               "renamed with WebDAV MOVE; use a plain PUT "
                               "(not atomic)", u->display);
    }
    /* ".NAME.tier-XXXXXXXXXX.part" beside the target */
    slash = strrchr (u->path, '/');
    name = slash + 1;
    ep_random_name (rnd, TEMP_RANDLEN);
    if (!(org = origin (u)))
        goto nomem;
    tier_strbuf_printf (&temp, "%s%.*s.%s.tier-%s.part", org,
                        (int) (name - u->path), u->path, name, rnd);
    tier_strbuf_printf (&dest, "Destination: %s%s", org, u->path);
    if (!tier_strbuf_finish (&temp) || !tier_strbuf_finish (&dest))
        goto nomem;
    if (put_file (ep, temp.s, fd, res->size, error) < 0)
        goto remove_temp;
    if (unchanged (ep, fd, &st, error) < 0)
        goto remove_temp;
    {
        const char *hdrs[] = { dest.s, "Overwrite: T", NULL };

        if (simple_request (ep, "MOVE", temp.s, hdrs, move_ok, "MOVE",
                            error) < 0)
            goto remove_temp;
    }
    ep_progress (ep, true);
    rc = 0;
    goto out;
remove_temp:
    {
        /* best effort, even after a cancellation */
        int saved = errno;
        atomic_int *cancel = ep->opts.cancel;
        tier_error_t e;
        int retries = ep->opts.retries;

        ep->opts.cancel = NULL;
        ep->opts.retries = -1;
        (void) simple_request (ep, "DELETE", temp.s, NULL, del_ok, "DELETE",
                               &e);
        ep->opts.cancel = cancel;
        ep->opts.retries = retries;
        errno = saved;
    }
    goto out;
nomem:
    errno = ENOMEM;
    tier_errprintf (error, "out of memory");
out:
    tier_strbuf_free (&temp);
    tier_strbuf_free (&dest);
    free (org);
    return rc;
}

const struct tier_backend_ops tier_http_ops = {
    .name = "http",
    .get = http_get,
    .put = http_put,
    .remove = http_remove,
    .abort_upload = NULL,
    .head = http_head,
};

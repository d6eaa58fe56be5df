/* SPDX-License-Identifier: GPL-3.0-or-later */
/* Copyright 2026 the tier developers */
/* endpoint_int.h - what the endpoint back-ends share (not a public API) */
#ifndef TIER_ENDPOINT_INT_H
#define TIER_ENDPOINT_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "endpoint.h"
#include "strbuf.h"

#define EP_BODY_MAX (64u << 10)         /* response bodies kept in memory */

/* One HTTP request and its response. */
struct ep_request {
    const char *method;             /* GET PUT POST DELETE MOVE HEAD */
    char *url;                      /* the full URL sent (owned) */
    struct curl_slist *headers;     /* owned */
    int follow;                     /* follow redirects (http GET) */

    /* request body: from a file range, or from memory */
    int in_fd;                      /* -1: none */
    uint64_t in_off;
    uint64_t in_len;
    const char *in_mem;
    size_t in_mem_len;
    uint64_t in_pos;                /* bytes handed to curl */

    /* response body: into a file (GET), else into body */
    int out_fd;                     /* -1: into body */
    bool out_seekable;
    uint64_t out_off;               /* where the next byte goes */
    uint64_t out_start;             /* the offset asked for (Range) */
    bool out_checked;               /* status checked at first byte */
    bool out_restarted;             /* whole object sent despite Range */

    /* response */
    long status;
    struct tier_strbuf body; /* at most EP_BODY_MAX */
    char etag[256];
    char content_range[128];
    int64_t content_length;         /* -1: unknown */

    /* why a callback stopped the transfer (errno), and its message */
    int stop_errno;
    char stop_text[200];
};

/* Set up rq for method (url and headers come from a prepare function). */
void ep_request_init (struct ep_request *rq, const char *method);
/* Free url, headers and body (before a retry, and at the end). */
void ep_request_clear (struct ep_request *rq);
/* Append a header line; false when out of memory. */
bool ep_request_header (struct ep_request *rq, const char *line);

/* Fill rq->url and rq->headers for a request without a query (the
 * back-end's addressing, signing and fixed headers).  Returns 0, or -1
 * with errno set and *error. */
typedef int (*ep_prepare_f) (struct tier_endpoint *ep,
                             struct ep_request *rq, tier_error_t *error);

/* GET into fd from offset with retries and Range resumption (see
 * tier_endpoint_get); prepare is called before every try. */
int ep_get (struct tier_endpoint *ep, int fd, uint64_t offset,
            ep_prepare_f prepare, int follow, tier_error_t *error);

/* HEAD with retries into info; 404 (410) means absent, not an error. */
int ep_head (struct tier_endpoint *ep, ep_prepare_f prepare,
             struct tier_endpoint_info *info, tier_error_t *error);

/* DELETE with retries; 404 counts as done. */
int ep_delete (struct tier_endpoint *ep, ep_prepare_f prepare,
               tier_error_t *error);

struct tier_endpoint {
    struct tier_url *url;
    struct tier_endpoint_opts opts;
    const struct tier_backend_ops *ops;
    CURL *curl;
    char errbuf[CURL_ERROR_SIZE];
    int http_only;                  /* the service is plain http:// */

    /* s3: where requests go */
    char *s3_base;                  /* "https://host[:port]" */
    char *s3_host;                  /* Host header (authority) */
    char *s3_prefix;                /* path before the key: "/bucket/" or
                                     * "/" (virtual-hosted) */

    /* progress of the current call */
    struct tier_endpoint_result *res;
    uint64_t done;
    uint64_t total;
    uint64_t reported;
};

/* Run rq on the endpoint's handle (options reset and set anew: TLS,
 * timeouts, callbacks).  Returns the CURLcode; rq->status holds the HTTP
 * status.  Counts the request in ep->res. */
CURLcode ep_perform (struct tier_endpoint *ep, struct ep_request *rq);

/* True if the failure (rc, or rq->status when rc is CURLE_OK) is worth a
 * retry. */
bool ep_transient (CURLcode rc, const struct ep_request *rq);

/* Sleep before retry number attempt (0, 1, ...): backoff with jitter.
 * Returns 0, or -1 with errno ECANCELED. */
int ep_backoff (struct tier_endpoint *ep, int attempt);

/* Retries allowed per request. */
int ep_retries (const struct tier_endpoint *ep);

/* The failure of rq as errno and message: "URL: WHAT: reason".  what
 * names the operation ("GET", "UploadPart 3").  Returns -1. */
int ep_fail (struct tier_endpoint *ep, const struct ep_request *rq,
             CURLcode rc, const char *what, tier_error_t *error);

/* Checks between requests. */
bool ep_cancelled (const struct tier_endpoint *ep);
void ep_progress (struct tier_endpoint *ep, bool force);

/* The text between <tag> and </tag> in xml, entities decoded, malloc'ed;
 * NULL if absent (errno ENOENT) or out of memory. */
char *ep_xml_value (const char *xml, const char *tag);

/* Percent-encode a path (keep '/'): for URLs and names. */
char *ep_path_encode (const char *path);

/* A random name suffix of n characters into buf[n + 1]. */
void ep_random_name (char *buf, size_t n);

/* The back-ends. */
extern const struct tier_backend_ops tier_s3_ops;
extern const struct tier_backend_ops tier_http_ops;

/* s3: set up ep->s3_* from the URL and credentials. */
int s3_setup (struct tier_endpoint *ep, tier_error_t *error);

#endif /* !TIER_ENDPOINT_INT_H */
